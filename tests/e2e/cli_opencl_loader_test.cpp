// The OpenCL library is loaded at run time (backends/opencl/cl_api.h): the binary names no OpenCL library, and a
// machine without the ICD loader gets one line naming the package at `--device opencl`, while the CPU path runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/e2e/cli_run_util.h"
#include "tests/test_util.h"

namespace pipit {
namespace {

using test::run_sh;

// readelf's NEEDED entries of `file` (binutils is part of the toolchain that built it)
std::string needed(const std::string& file) { return run_sh("readelf -d " + file + " | grep NEEDED").out; }

TEST(CliDevice, BinaryNeedsNoOpenclLibrary) {
  const std::string bin = test::pipit_binary();
  const std::string deps = needed(bin);
  ASSERT_NE(deps.find("libc.so"), std::string::npos) << "readelf failed: " << deps;
  EXPECT_EQ(deps.find("libOpenCL"), std::string::npos) << deps;
  const std::string lib = std::string(PIPIT_BINARY_DIR) + "/libpipit.so";
  if (std::filesystem::exists(lib)) {
    EXPECT_EQ(needed(lib).find("libOpenCL"), std::string::npos);
  }
}

TEST(CliDevice, MissingOpenclLibraryIsOneLine) {
#ifndef PIPIT_WITH_OPENCL
  GTEST_SKIP() << "built without OpenCL";
#endif
  const std::string env = "PIPIT_OPENCL_LIBRARY=/nonexistent/libOpenCL.so.1 ";
  const std::string m = test::model_dir("stories260k");
  auto r = run_sh(env + test::pipit_binary() + " run -m " + m + " -p Hi -n 4 --temp 0 --device opencl");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("OpenCL runtime /nonexistent/libOpenCL.so.1 not found: install ocl-icd-libopencl1 and a "
                       "driver"), std::string::npos) << r.out;
  auto d = run_sh(env + test::pipit_binary() + " inspect --devices");
  EXPECT_EQ(d.code, 0) << d.out;  // the CPU is listed, the OpenCL line says why there is no device
  EXPECT_EQ(d.out.rfind("cpu: ", 0), 0u) << d.out;
  EXPECT_NE(d.out.find("ocl-icd-libopencl1"), std::string::npos) << d.out;
  auto cpu = run_sh(env + test::pipit_binary() + " run -m " + m + " -p \"Once upon a time\" -n 8 --temp 0 -q");
  EXPECT_EQ(cpu.code, 0) << cpu.out;
}

}  // namespace
}  // namespace pipit

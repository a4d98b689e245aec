// The DeepSeek-OCR goldens (tests/reference/deepseek_ocr_vision.py): a tiny random checkpoint in the real layout,
// its test images and golden_{base,gundam}.safetensors. Too large to commit (pixel_values alone are 12 MB), so the
// first test that needs them runs the script (Debian python3-torch/-pil/-numpy, scripts/setup.sh; ~15-20 s) into
// the build folder, in a folder named by the script's hash so an edited script makes new ones.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace pipit::test {

// The folder (model/, img_*.png, golden_*.safetensors), or "" after printing why it could not be made.
inline const std::string& deepseek_ocr_goldens() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    const std::string script = std::string(PIPIT_SOURCE_DIR) + "/tests/reference/deepseek_ocr_vision.py";
    std::ifstream in(script);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string d = std::string(PIPIT_BINARY_DIR) + "/deepseek_ocr_vision_" +
                          std::to_string(std::hash<std::string>{}(ss.str()) % 1000000007ULL);
    if (fs::exists(d + "/golden_gundam.safetensors")) return d;
    // into a private folder, then renamed: test processes that run at once never see a half-written one
    const std::string tmp = d + ".tmp" + std::to_string(::getpid());
    // LD_LIBRARY_PATH dropped: under qemu (the aarch64 tests) it points at the target's libraries
    const std::string cmd = "env -u LD_LIBRARY_PATH /usr/bin/python3 " + script + " " + tmp + " " +
                            std::string(PIPIT_TESTDATA_DIR) + " > " + tmp + ".log 2>&1";
    fs::create_directories(tmp);
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(tmp + ".log");
      std::stringstream l;
      l << log.rdbuf();
      std::fprintf(stderr, "making the DeepSeek-OCR goldens failed: %s\n%s\n", cmd.c_str(), l.str().c_str());
      return std::string();
    }
    std::error_code ec;
    fs::rename(tmp, d, ec);  // another process may have won: its copy is the same
    fs::remove_all(tmp, ec);
    fs::remove(tmp + ".log", ec);
    return d;
  }();
  return dir;
}

}  // namespace pipit::test

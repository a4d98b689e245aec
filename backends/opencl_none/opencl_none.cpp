// Built without OpenCL (no headers / ICD loader found by CMake, or -DPIPIT_WITH_OPENCL=OFF): the backend's entry
// points say so, so `--device opencl` is one clear error and `inspect --devices` lists the CPU only.
#include "backends/opencl/opencl.h"

namespace pipit {

Result<std::shared_ptr<Device>> open_opencl_device(int) {
  return Error::unsupported("[opencl] this pipit was built without OpenCL (install opencl-c-headers and "
                            "opencl-c-headers and rebuild); use --device cpu");
}

std::vector<std::string> list_opencl_devices() { return {"opencl: not built in (no OpenCL headers at build time)"}; }

}  // namespace pipit

// The OpenCL backend's entry points (backends/opencl/runtime.cpp; backends/opencl_none/ when pipit is built
// without OpenCL, where both say so instead of failing to link).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"

namespace pipit {

// The index-th OpenCL device counting over all platforms in order; builds (or loads from the kernel cache) every
// program before returning, so a kernel that does not compile is an error here, not in the middle of a forward.
Result<std::shared_ptr<Device>> open_opencl_device(int index);
// "opencl:N: <platform> / <device> (<type>, <memory>, OpenCL C <version>)" per device, or one line with the reason
// there is none.
std::vector<std::string> list_opencl_devices();

}  // namespace pipit

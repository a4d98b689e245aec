// libOpenCL.so.1 loaded at first use (cl_api.h says why): dlopen, then one dlsym per function of PIPIT_CL_FUNCTIONS.
#include "backends/opencl/cl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace pipit::opencl {
namespace {

struct Loaded {
  ClApi api;
  std::string error;  // empty when every function was found
};

Loaded load() {
  Loaded out;
  std::vector<std::string> names = {"libOpenCL.so.1", "libOpenCL.so"};
  if (const char* e = std::getenv("PIPIT_OPENCL_LIBRARY"); e && *e) names = {e};
  void* h = nullptr;
  for (const std::string& n : names)
    if ((h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
  if (!h) {
    out.error = "[opencl] OpenCL runtime " + names.front() +
                " not found: install ocl-icd-libopencl1 and a driver (e.g. pocl-opencl-icd for the CPU, or the GPU "
                "vendor's ICD); use --device cpu";
    return out;
  }
#define PIPIT_CL_RESOLVE(name)                                                                                   \
  out.api.name = reinterpret_cast<decltype(out.api.name)>(dlsym(h, #name));                                      \
  if (!out.api.name && out.error.empty())                                                                        \
    out.error = "[opencl] the OpenCL runtime " + names.front() + " has no " #name " (OpenCL 1.2 is needed)";
  PIPIT_CL_FUNCTIONS(PIPIT_CL_RESOLVE)
#undef PIPIT_CL_RESOLVE
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();  // once per process, thread-safe
  return l;
}

}  // namespace

Status load_cl_api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) return Error::unavailable("{}", l.error);
  return Status::ok();
}

const ClApi& cl_api() { return loaded().api; }

}  // namespace pipit::opencl

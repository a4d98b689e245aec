// The OpenCL entry points pipit calls, resolved from the ICD loader (libOpenCL.so.1) with dlopen + dlsym at the first
// `--device opencl` or `inspect --devices`: the pipit binary and libpipit start without any OpenCL library, and only
// the Khronos headers are needed to build. Internal to backends/opencl: every call goes through cl_api().
#pragma once

#include <CL/cl.h>

#include "core/status.h"

namespace pipit::opencl {

// Every OpenCL 1.2 function backends/opencl uses; one that a loader lacks is an error at load, naming it.
#define PIPIT_CL_FUNCTIONS(X)                                                                                      \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)                 \
  X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer) X(clReleaseMemObject)     \
  X(clCreateProgramWithSource) X(clCreateProgramWithBinary) X(clBuildProgram) X(clGetProgramBuildInfo)             \
  X(clGetProgramInfo) X(clReleaseProgram) X(clCreateKernelsInProgram) X(clGetKernelInfo) X(clReleaseKernel)        \
  X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer)                      \
  X(clEnqueueFillBuffer) X(clFinish)

struct ClApi {
#define PIPIT_CL_MEMBER(name) decltype(&::name) name = nullptr;
  PIPIT_CL_FUNCTIONS(PIPIT_CL_MEMBER)
#undef PIPIT_CL_MEMBER
};

// Loads the library once per process (thread-safe; later calls return the first answer). Looks for
// $PIPIT_OPENCL_LIBRARY when set, else libOpenCL.so.1 (Debian's ocl-icd-libopencl1), then libOpenCL.so (Android's
// vendor library, Termux's ocl-icd). The library stays loaded: ICD drivers do not expect to be unloaded.
Status load_cl_api();
// The table; valid once load_cl_api() succeeded, which every OpenclDevice and device listing checks first.
const ClApi& cl_api();

}  // namespace pipit::opencl

// The OpenCL C programs embedded in the binary (generated from kernels/*.cl by cmake/embed_cl.cmake).
#pragma once

namespace pipit::opencl {

struct ProgramSource {
  const char* name;  // file name without .cl
  const char* text;
};
extern const ProgramSource kOpenclSources[];  // ends with {nullptr, nullptr}

}  // namespace pipit::opencl

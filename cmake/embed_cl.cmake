# Writes OUT: a C++ source with the OpenCL C programs of DIR (*.cl) as one table, kOpenclSources {name, text},
# so the kernels are part of the binary and compiled at run time (backends/opencl/programs.cpp).
# Run as: cmake -DDIR=... -DOUT=... -P embed_cl.cmake
file(GLOB files "${DIR}/*.cl")
list(SORT files)
set(body "")
set(table "")
foreach(f ${files})
  get_filename_component(name "${f}" NAME_WE)
  file(READ "${f}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "const char k_${name}[] = {${bytes}0x00};\n")
  string(APPEND table "    {\"${name}\", k_${name}},\n")
endforeach()
file(WRITE "${OUT}.tmp"
  "// Generated from backends/opencl/kernels/*.cl by cmake/embed_cl.cmake; do not edit.\n"
  "#include \"backends/opencl/programs.h\"\n"
  "namespace pipit::opencl {\n"
  "namespace {\n${body}}  // namespace\n"
  "extern const ProgramSource kOpenclSources[] = {\n${table}    {nullptr, nullptr}};\n"
  "}  // namespace pipit::opencl\n")
file(RENAME "${OUT}.tmp" "${OUT}")

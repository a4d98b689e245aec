# Writes OUT: a C++ source defining NAME (unsigned char[]) and NAME_size (size_t) with IN's bytes, so static files
# (the chat page) are part of the binary. Run as: cmake -DIN=... -DOUT=... -DNAME=... -P embed_file.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN} by cmake/embed_file.cmake; do not edit.\n"
  "#include <cstddef>\n"
  "namespace pipit::server {\n"
  "extern const unsigned char ${NAME}[] = {${bytes}0x00};\n"
  "extern const size_t ${NAME}_size = ${n};\n"
  "}  // namespace pipit::server\n")
file(RENAME "${OUT}.tmp" "${OUT}")

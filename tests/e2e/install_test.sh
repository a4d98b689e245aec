#!/usr/bin/env bash
# Installs the build into a temporary prefix, compiles examples/chat.c against it with pkg-config and with CMake's
# find_package(pipit) (as a user would), and runs them on stories260k. The package files find the prefix relative to
# where they lie, for whatever libdir the build was configured with (lib, or Debian's lib/x86_64-linux-gnu).
set -euo pipefail
build="$1"; testdata="$2"
src="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="$(mktemp -d)"; trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc="$(dirname "$(find "$prefix" -name pipit.pc | head -1)")"
libdir="$(dirname "$pc")"
export PKG_CONFIG_PATH="$pc"
[ "$(pkg-config --variable=libdir pipit | xargs realpath)" = "$(realpath "$libdir")" ]
cc "$src/examples/chat.c" $(pkg-config --cflags --libs pipit) -o "$prefix/chat"
out="$(LD_LIBRARY_PATH="$libdir" "$prefix/chat" "$testdata/models/stories260k" "Once upon a time" 24 2>&1)"
echo "$out"
grep -q "Once upon a time, there was a little girl named Lily" <<<"$out"
# find_package(pipit) from the same prefix
mkdir -p "$prefix/app"
cat > "$prefix/app/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(app C)
find_package(pipit REQUIRED)
add_executable(app "$src/examples/chat.c")
target_link_libraries(app PRIVATE pipit::pipit)
CMAKE
cmake -S "$prefix/app" -B "$prefix/app/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/app/build" >/dev/null
out="$(LD_LIBRARY_PATH="$libdir" "$prefix/app/build/app" "$testdata/models/stories260k" "Once upon a time" 24 2>&1)"
grep -q "Once upon a time, there was a little girl named Lily" <<<"$out"
echo "find_package(pipit): ok"

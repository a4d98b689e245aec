#!/usr/bin/env bash
# Installs the build into a temporary prefix, compiles examples/chat.c against it with pkg-config (as a user would),
# and runs it on stories260k.
set -euo pipefail
build="$1"; testdata="$2"
src="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="$(mktemp -d)"; trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc "$src/examples/chat.c" $(pkg-config --cflags --libs pipit) -o "$prefix/chat"
out="$(LD_LIBRARY_PATH="$prefix/lib" "$prefix/chat" "$testdata/models/stories260k" "Once upon a time" 24 2>&1)"
echo "$out"
grep -q "Once upon a time, there was a little girl named Lily" <<<"$out"

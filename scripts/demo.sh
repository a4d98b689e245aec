#!/usr/bin/env bash
# The main job in one command: install what building and running needs (scripts/setup.sh: no test toolchain), build
# pipit, and generate text with a real model.
# MODEL defaults to the real stories260k model in the test data; point it at any HF checkpoint dir, .pipit or .gguf.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${MODEL:-$(cd .. && pwd)/shared/testdata/models/stories260k}"
PROMPT="${PROMPT:-Once upon a time}"

bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target pipit
./build/pipit run -m "$MODEL" -p "$PROMPT" -n "${N:-64}" --temp "${TEMP:-0}" "$@"

#!/usr/bin/env bash
# Zero-copy load benchmark: a Qwen3-0.6B-shaped random bf16 checkpoint -> q4 .pipit -> load time and resident memory.
# usage: bench/load_qwen3_shape.sh BUILD_DIR [SCRATCH_DIR]   (scratch default /tmp/pipit_qwen3_shape, ~1.6 GB)
# Target (issue 4): load < 0.5 s, resident memory after load < 10% of the file size.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [SCRATCH_DIR]}
SCRATCH=${2:-/tmp/pipit_qwen3_shape}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$SCRATCH"
[ -f "$SCRATCH/hf/model.safetensors" ] || /usr/bin/python3 "$HERE/make_qwen3_shape.py" "$SCRATCH/hf"
"$BUILD/pipit" convert "$SCRATCH/hf" -o "$SCRATCH/qwen3_shape_q4.pipit" --quant q4
ls -l "$SCRATCH/qwen3_shape_q4.pipit"
# cold-ish (first) and warm loads: each is a fresh process
for i in 1 2 3; do "$BUILD/pipit" inspect "$SCRATCH/qwen3_shape_q4.pipit" --load; done

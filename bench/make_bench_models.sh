#!/usr/bin/env bash
# Makes the benchmark models: Qwen3-0.6B- and 1.7B-shaped random checkpoints (HF safetensors, bf16), the same weights
# as an F16 GGUF (gguf-py) and, from it, Q4_0 and Q8_0 GGUFs (llama-quantize --pure: every matrix, the tied
# embedding/output too, in that type, so pipit imports exactly the bytes llama.cpp runs), and Q4_K_M / Q6_K GGUFs
# with llama-quantize's default mixes (not --pure: Q4_K_M gives the tied embedding/output, attn_v and half of
# ffn_down Q6_K, as in the files users download). MIXES="Q3_K_M Q2_K" (or any llama-quantize type names) makes those
# mixes instead of Q4_K_M / Q6_K.
# usage: bench/make_bench_models.sh [SCRATCH_DIR] [SIZES]   (default /tmp/pipit_bench, "0.6b 1.7b"; ~4 GB + ~10 GB)
# Needs numpy, gguf-py (GGUF_PY, default /tmp/llamacpp/src/gguf-py) and llama-quantize (LLAMA_BIN).
set -euo pipefail
SCRATCH=${1:-/tmp/pipit_bench}
SIZES=${2:-0.6b 1.7b}
LLAMA_BIN=${LLAMA_BIN:-/tmp/llamacpp/src/build/bin}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$SCRATCH"
for size in $SIZES; do
  d="$SCRATCH/qwen3-$size"
  [ -f "$d/hf/model.safetensors" ] || /usr/bin/python3 "$HERE/make_qwen3_shape.py" "$d/hf" --size "$size"
  [ -f "$d/f16.gguf" ] || /usr/bin/python3 "$HERE/hf_to_gguf_f16.py" "$d/hf" "$d/f16.gguf"
  for q in Q4_0 Q8_0; do
    out="$d/$(echo $q | tr A-Z a-z).gguf"
    [ -f "$out" ] || "$LLAMA_BIN/llama-quantize" --pure "$d/f16.gguf" "$out" "$q" > "$out.log" 2>&1
  done
  for q in ${MIXES:-Q4_K_M Q6_K}; do
    out="$d/$(echo $q | tr A-Z a-z).gguf"
    [ -f "$out" ] || "$LLAMA_BIN/llama-quantize" "$d/f16.gguf" "$out" "$q" > "$out.log" 2>&1
  done
  ls -l "$d"/*.gguf
done

#!/usr/bin/env bash
# pipit vs llama.cpp on the same GGUF files, in one run: llama-bench and `pipit bench` alternate, one repetition
# each per round, so that the load of a shared machine hits both alike; the table gives tok/s (mean ± stddev over
# rounds) and the ratio pipit / llama.cpp of the means. pipit imports the GGUFs (Q4_0 / Q8_0 blocks are used as they
# are, packed into 16-row panels at load; F16 stays F16). Also: read bandwidth and the decode roofline per thread
# count, and peak RSS of a 4096-token prompt (context 4096) for Q4_0.
# usage: bench/compare_llamacpp.sh BUILD_DIR [MODEL_DIR] [ROUNDS] [THREADS] [TYPES]
#   MODEL_DIR from bench/make_bench_models.sh (default /tmp/pipit_bench/qwen3-0.6b), ROUNDS 3, THREADS "1,2",
#   TYPES "q4_0 q8_0 f16". LLAMA_BIN: llama.cpp's bin folder (default /tmp/llamacpp/src/build/bin).
#   Scratch (JSON of every run) goes to $OUT (default /tmp/pipit_compare).
#   IK_BIN: ik_llama.cpp's bin folder; when set, its llama-bench (-rtr 1: repacked at load, its fastest CPU path)
#   runs in each round too, and the table gains its column and pipit / ik_llama.cpp.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [MODEL_DIR] [ROUNDS] [THREADS] [TYPES]}
MODELS=${2:-/tmp/pipit_bench/qwen3-0.6b}
ROUNDS=${3:-3}
THREADS=${4:-1,2}
TYPES=${5:-q4_0 q8_0 f16}
LLAMA_BIN=${LLAMA_BIN:-/tmp/llamacpp/src/build/bin}
OUT=${OUT:-/tmp/pipit_compare}
PIPIT=$(cd "$BUILD" && pwd)/pipit
mkdir -p "$OUT"
rm -f "$OUT"/*.json
echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -z "${IK_BIN:-}" ]] || echo "# ik_llama.cpp $(cd "$IK_BIN/../.." 2>/dev/null && git rev-parse --short HEAD 2>/dev/null || echo "(no git)")"
echo "# pipit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?), llama.cpp $("$LLAMA_BIN/llama-bench" --version 2>&1 | head -1 || true)"
for r in $(seq 1 "$ROUNDS"); do
  for t in $TYPES; do
    m="$MODELS/$t.gguf"
    run_llama() { "$LLAMA_BIN/llama-bench" -m "$m" -p 512 -n 128 -t "$THREADS" -r 1 -o json > "$OUT/llama_${t}_$r.json" 2> /dev/null; }
    run_pipit() { "$PIPIT" bench -m "$m" -p 512 -n 128 -t "$THREADS" -r 1 --json --bandwidth > "$OUT/pipit_${t}_$r.json"; }
    run_ik() {
      [[ -n "${IK_BIN:-}" ]] || return 0
      LD_LIBRARY_PATH="$IK_BIN:$IK_BIN/../ggml/src:$IK_BIN/../src" "$IK_BIN/llama-bench" -m "$m" -p 512 -n 128 \
        -t "$THREADS" -r 1 -rtr 1 -o json > "$OUT/ik_${t}_$r.json" 2> /dev/null
    }
    if (( r % 2 )); then run_llama; run_ik; run_pipit; else run_pipit; run_ik; run_llama; fi
    echo "# round $r $t done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
done
# peak RSS at context 4096 (a 4096-token prompt, so the KV cache is full), Q4_0
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
RSS_LLAMA=$(rss "$LLAMA_BIN/llama-bench" -m "$MODELS/q4_0.gguf" -p 4096 -n 0 -t 2 -r 1)
RSS_PIPIT=$(rss "$PIPIT" bench -m "$MODELS/q4_0.gguf" -p 4096 -n 0 -t 2 -r 1)
/usr/bin/python3 "$(dirname "$0")/compare_summary.py" "$OUT" "$ROUNDS" "$TYPES" "$RSS_LLAMA" "$RSS_PIPIT"

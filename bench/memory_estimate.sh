#!/usr/bin/env bash
# The memory estimate (`pipit inspect --memory`, pipit_estimate_memory) against the peak RSS `pipit bench` reports
# with the context filled: prompt tokens = context - 16, then 8 generated.
# Usage: bench/memory_estimate.sh MODEL CTX [CTX...]     e.g. bench/memory_estimate.sh /tmp/q06/q4.pipit 4096 32768
# (a Qwen3-0.6B-shaped q4 file: bench/make_qwen3_shape.py, then `pipit convert --quant q4`). At 32768 the prefill
# takes minutes on 2 cores.
set -euo pipefail
PIPIT=${PIPIT:-build/pipit}
model=$1; shift
for ctx in "$@"; do
  est=$("$PIPIT" inspect "$model" --memory -c "$ctx" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
  peak=$("$PIPIT" bench -m "$model" -p $((ctx - 16)) -n 8 -c "$ctx" -r 1 -t "${THREADS:-2}" 2>&1 |
         sed -n 's/^peak RSS \([0-9.]*\) MiB.*/\1/p')
  python3 -c "e=$est; p=$peak*1048576; print(f'context $ctx: estimate {e/1e6:.1f} MB, peak RSS {p/1e6:.1f} MB, error {100*(e-p)/p:+.1f}%')"
done

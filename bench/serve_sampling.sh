#!/usr/bin/env bash
# Server throughput with the sampling every OpenAI client sends (temperature 0.8, top_p 0.95, no top_k) against
# top_k 40 on the same server, at 1 and 8 streaming clients, alternating the two settings ROUNDS times. The figure
# of issue 34: without top_k the sampler used to sort the whole vocabulary every token (15-30x slower).
#
#   bench/serve_sampling.sh MODEL [PIPIT_BINARY] [THREADS] [MAX_TOKENS] [ROUNDS]
#   e.g. bench/serve_sampling.sh build/server_models/qwen3_chat build/pipit 2 64 3    (vocab 151,669)
set -euo pipefail
MODEL="${1:?usage: serve_sampling.sh MODEL [PIPIT_BINARY] [THREADS] [MAX_TOKENS] [ROUNDS]}"
PIPIT="${2:-build/pipit}"
THREADS="${3:-2}"
MAX_TOKENS="${4:-64}"
ROUNDS="${5:-3}"
PYTHON="${PYTHON:-/usr/bin/python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"

# shellcheck source=serve_start.sh
. "$HERE/serve_start.sh"
start_server "$PIPIT" "$MODEL" "$THREADS"

echo "model $MODEL, $THREADS threads, $MAX_TOKENS tokens per request, $ROUNDS rounds ($(nproc) CPUs)"
echo "clients  sampling                     total tok/s per round"
for K in 1 8; do
  declare -A ROWS=()
  for _ in $(seq 1 "$ROUNDS"); do
    for MODE in openai topk40; do
      if [ "$MODE" = openai ]; then EXTRA=(--temperature 0.8 --top-p 0.95); else EXTRA=(--temperature 0.8 --top-p 0.95 --top-k 40); fi
      T="$("$PYTHON" "$HERE/load_gen.py" --url "$URL" -k "$K" --requests 2 --max-tokens "$MAX_TOKENS" "${EXTRA[@]}" \
           --json | "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["total_tok_s"])')"
      ROWS[$MODE]="${ROWS[$MODE]:-} $T"
    done
  done
  printf '%-8s %-28s %s\n' "$K" "T 0.8, top_p 0.95 (OpenAI)" "${ROWS[openai]}"
  printf '%-8s %-28s %s\n' "$K" "T 0.8, top_p 0.95, top_k 40" "${ROWS[topk40]}"
  "$PYTHON" - "${ROWS[openai]}" "${ROWS[topk40]}" <<'PY'
import statistics, sys
a, b = [list(map(float, s.split())) for s in sys.argv[1:3]]
print(f"         median ratio (OpenAI / top_k 40): {statistics.median(a) / statistics.median(b):.3f}")
PY
  unset ROWS
done

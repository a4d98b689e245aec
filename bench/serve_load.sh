#!/usr/bin/env bash
# Server load figures: starts `pipit serve` on a free loopback port, runs bench/load_gen.py with K = 1, 2, 4, 8
# concurrent streaming clients, prints a table, and stops the server.
#
#   bench/serve_load.sh MODEL [PIPIT_BINARY] [THREADS] [MAX_TOKENS] [REQUESTS_PER_CLIENT]
#   e.g. bench/serve_load.sh build/server_models/qwen3_chat build/pipit 2 64 2
#
# The server gets --parallel 8 (one slot per client at K = 8) and THREADS compute threads (default 2).
set -euo pipefail
MODEL="${1:?usage: serve_load.sh MODEL [PIPIT_BINARY] [THREADS] [MAX_TOKENS] [REQUESTS_PER_CLIENT]}"
PIPIT="${2:-build/pipit}"
THREADS="${3:-2}"
MAX_TOKENS="${4:-64}"
REQUESTS="${5:-2}"
PYTHON="${PYTHON:-/usr/bin/python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"

LOG="$(mktemp)"
"$PIPIT" serve -m "$MODEL" --port 0 -t "$THREADS" --parallel 8 >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT

URL=""
for _ in $(seq 1 600); do
  URL="$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$LOG" | head -1 | sed 's/listening on //')" || true
  [ -n "$URL" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG"; echo "serve_load: the server exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { cat "$LOG"; echo "serve_load: the server did not start" >&2; exit 1; }

echo "model $MODEL, $THREADS threads, $MAX_TOKENS tokens per request, $REQUESTS requests per client ($(nproc) CPUs)"
"$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); import load_gen; print(load_gen.ROW_HEADER)' "$HERE"
for K in 1 2 4 8; do
  "$PYTHON" "$HERE/load_gen.py" --url "$URL" -k "$K" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --row || true
done

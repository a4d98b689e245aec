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

# shellcheck source=serve_start.sh
. "$HERE/serve_start.sh"
start_server "$PIPIT" "$MODEL" "$THREADS"

echo "model $MODEL, $THREADS threads, $MAX_TOKENS tokens per request, $REQUESTS requests per client ($(nproc) CPUs)"
"$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); import load_gen; print(load_gen.ROW_HEADER)' "$HERE"
for K in 1 2 4 8; do
  "$PYTHON" "$HERE/load_gen.py" --url "$URL" -k "$K" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --row || true
done

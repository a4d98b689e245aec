#!/usr/bin/env bash
# Server throughput against llama.cpp's llama-server on the same GGUF file (issue 38 item 3): both servers with 8
# slots and the same threads, bench/load_gen.py with K concurrent streaming clients sending what an OpenAI client
# sends (temperature 1, no top_k / top_p: each server samples as it does by default), alternating the two servers
# for ROUNDS rounds; one table row per server, round and K.
#
#   bench/compare_serve_llamacpp.sh PIPIT GGUF LLAMA_SERVER [THREADS] [MAX_TOKENS] [ROUNDS] [KS]
#   e.g. bench/compare_serve_llamacpp.sh build/pipit qwen3-0.6b-q4_0.gguf ~/llama.cpp/build/bin/llama-server 2 64 2 "1 4 8"
#
# PIPIT may also be "OLD_PIPIT:NEW_PIPIT" (two pipit binaries, no llama-server: a before / after comparison).
set -euo pipefail
PIPIT="${1:?usage: compare_serve_llamacpp.sh PIPIT GGUF LLAMA_SERVER [THREADS] [MAX_TOKENS] [ROUNDS] [KS]}"
GGUF="${2:?GGUF file}"
LLAMA_SERVER="${3:-}"
THREADS="${4:-2}"
MAX_TOKENS="${5:-64}"
ROUNDS="${6:-2}"
KS="${7:-1 4 8}"
PYTHON="${PYTHON:-/usr/bin/python3}"
HERE="$(cd "$(dirname "$0")" && pwd)"

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

PID=""
LOG="$(mktemp)"
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -f "$LOG"' EXIT

# start NAME COMMAND...: runs the server, waits for /health to answer 200, sets URL
start() {
  local name="$1"; shift
  local port; port="$(free_port)"
  "$@" --port "$port" >"$LOG" 2>&1 &
  PID=$!
  URL="http://127.0.0.1:$port"
  for _ in $(seq 1 600); do
    if "$PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' "$URL" \
        2>/dev/null; then
      return 0
    fi
    kill -0 "$PID" 2>/dev/null || { cat "$LOG"; echo "$name exited" >&2; exit 1; }
    sleep 0.2
  done
  cat "$LOG"; echo "$name did not start" >&2; exit 1
}
stop() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""; }

declare -a NAMES CMDS
if [[ "$PIPIT" == *:* ]]; then
  NAMES=("pipit-old" "pipit-new")
  CMDS=("${PIPIT%%:*} serve -m $GGUF -t $THREADS --parallel 8" "${PIPIT##*:} serve -m $GGUF -t $THREADS --parallel 8")
else
  NAMES=("pipit" "llama-server")
  CMDS=("$PIPIT serve -m $GGUF -t $THREADS --parallel 8"
        "$LLAMA_SERVER -m $GGUF -t $THREADS -tb $THREADS -np 8 -c 8192 --host 127.0.0.1")
fi

echo "file $GGUF, $THREADS threads, $MAX_TOKENS tokens x 2 requests per client, OpenAI sampling (temperature 1)"
printf '%-13s %-6s ' server round
"$PYTHON" -c 'import sys; sys.path.insert(0, sys.argv[1]); import load_gen; print(load_gen.ROW_HEADER)' "$HERE"
for r in $(seq 1 "$ROUNDS"); do
  for i in 0 1; do
    # shellcheck disable=SC2086
    start "${NAMES[$i]}" ${CMDS[$i]}
    for K in $KS; do
      printf '%-13s %-6s ' "${NAMES[$i]}" "$r"
      "$PYTHON" "$HERE/load_gen.py" --url "$URL" -k "$K" --requests 2 --max-tokens "$MAX_TOKENS" \
        --temperature 1 --row || true
    done
    stop
  done
done

# Sourced by the server benchmarks (serve_load.sh, serve_sampling.sh): start_server PIPIT MODEL THREADS starts
# `pipit serve` on a free loopback port with --parallel 8, sets URL once it listens, and stops it when the script
# exits. A server that exits or does not start is an error, with its log.
start_server() {
  local pipit="$1" model="$2" threads="$3"
  SERVE_LOG="$(mktemp)"
  "$pipit" serve -m "$model" --port 0 -t "$threads" --parallel 8 >"$SERVE_LOG" 2>&1 &
  SERVE_PID=$!
  trap 'kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; rm -f "$SERVE_LOG"' EXIT
  URL=""
  for _ in $(seq 1 600); do
    URL="$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$SERVE_LOG" | head -1 | sed 's/listening on //')" || true
    [ -n "$URL" ] && return 0
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$SERVE_LOG"; echo "$(basename "$0"): the server exited" >&2; exit 1; }
    sleep 0.1
  done
  cat "$SERVE_LOG"
  echo "$(basename "$0"): the server did not start" >&2
  exit 1
}

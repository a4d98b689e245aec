#!/usr/bin/env bash
# Cold start: process start -> first generated token, the model file already in the page cache (a phone app opening
# a model it used before), for each given model, and llama.cpp's llama-simple on a GGUF of the same weights. Runs
# alternate (one of each per round) so a shared machine's load hits all alike; prints the median wall time, pipit's
# own split (load / first token), peak RSS, and the cost of merely touching the file's pages once here (the floor
# for any program that reads every weight before its first token) measured in the same run.
# usage: bench/cold_start.sh BUILD_DIR[,BUILD_DIR...] ROUNDS MODEL [MODEL...] [-- LLAMA_GGUF]
#   several build dirs (comma-separated, e.g. an old binary's and a new one's) run alternately too, in each round;
#   each pipit's resident memory after load (`pipit inspect MODEL --load`) is measured once, after the timed rounds.
#   MODEL: a .pipit or .gguf file pipit runs; after `--`, a GGUF for llama.cpp's llama-simple (LLAMA_BIN, default
#   /tmp/lc/src/build/bin). THREADS (default 2). PIPIT_ARGS: more `pipit run` options.
# Each pipit run is `pipit run -m MODEL -p Hello -n 1 -t THREADS --no-template`; llama-simple's is `-n 1 Hello`.
# How the page cache holds a file decides much of its start: in 2 MiB folios (a .pipit this pipit wrote, or any file
# read from disk, on Linux 6.x ext4 / XFS) its weights are mapped with huge pages at once; in 4 KiB pages (a file
# written 4 KiB at a time, or copied) the first token reads them slowly and a background thread moves them. The
# "touch" column tells which (tens of ms: 2 MiB folios). REREAD=1 drops each file from the page cache and reads it
# back before the rounds, so every file starts as a file read from disk does.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR ROUNDS MODEL [MODEL...] [-- LLAMA_GGUF]}
ROUNDS=${2:?rounds}
shift 2
MODELS=()
LLAMA_GGUF=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then LLAMA_GGUF=${2:-}; break; fi
  MODELS+=("$1")
  shift
done
THREADS=${THREADS:-2}
LLAMA_BIN=${LLAMA_BIN:-/tmp/lc/src/build/bin}
IFS=, read -ra BUILDS <<< "$BUILD"
PIPITS=()
for b in "${BUILDS[@]}"; do PIPITS+=("$(cd "$b" && pwd)/pipit"); done
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
read -ra EXTRA <<< "${PIPIT_ARGS:-}"
echo "# $(date -u +%FT%TZ) $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg), threads $THREADS"

# the page cache holds every file before the first timed run
for m in "${MODELS[@]}" $LLAMA_GGUF; do
  if [ "${REREAD:-0}" = 1 ]; then
    /usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$m"
  fi
  cat "$m" > /dev/null
done

touch_pages() {  # one byte of every 4 KiB page of a mapping of the file, in a fresh process
  /usr/bin/python3 -c '
import mmap, sys, time
f = open(sys.argv[1], "rb")
t = time.perf_counter()
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
s = sum(m[i] for i in range(0, len(m), 4096))
print(f"{(time.perf_counter() - t) * 1e3:.0f}")' "$1"
}

for r in $(seq "$ROUNDS"); do
  for i in "${!MODELS[@]}"; do
    m=${MODELS[$i]}
    for j in "${!PIPITS[@]}"; do
      /usr/bin/time -f "%e %M %U %S" -o "$OUT/time" "${PIPITS[$j]}" run -m "$m" -p Hello -n 1 -t "$THREADS" \
        --no-template "${EXTRA[@]}" > "$OUT/log" 2>&1 || { cat "$OUT/log"; exit 1; }
      read -r wall rss user sys < "$OUT/time"
      load=$(grep -oE 'load [0-9.]+ ms' "$OUT/log" | grep -oE '[0-9.]+')
      pps=$(grep -oE 'prompt 1 tokens, [0-9.]+ tok/s' "$OUT/log" | grep -oE '[0-9.]+ tok/s' | grep -oE '[0-9.]+')
      first=$(awk -v t="$pps" 'BEGIN { printf "%.0f", (t + 0 > 0) ? 1000 / t : 0 }')
      cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
      echo "$wall $rss $load $first $cpu" >> "$OUT/pipit_${i}_$j"
    done
    echo "$(touch_pages "$m")" >> "$OUT/touch_$i"
  done
  if [ -n "$LLAMA_GGUF" ]; then
    /usr/bin/time -f "%e %M %U %S" -o "$OUT/time" "$LLAMA_BIN/llama-simple" -m "$LLAMA_GGUF" -n 1 Hello \
      > "$OUT/log" 2>&1 || { cat "$OUT/log"; exit 1; }
    read -r wall rss user sys < "$OUT/time"
    echo "$wall $rss $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')" >> "$OUT/llama"
  fi
done

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
printf "%-44s %8s %8s %10s %10s %12s %12s %8s %9s\n" model "wall s" "cpu s" "load ms" "1st tok ms" "peak RSS MB" \
  "after load" "file MB" "touch ms"
for i in "${!MODELS[@]}"; do
  for j in "${!PIPITS[@]}"; do
    f="$OUT/pipit_${i}_$j"
    after=$("${PIPITS[$j]}" inspect "${MODELS[$i]}" --load 2>&1 | grep -oE '[0-9.]+ MB after' | grep -oE '[0-9.]+')
    label="pipit $(basename "${MODELS[$i]}")"
    [ ${#PIPITS[@]} -gt 1 ] && label="$label [${BUILDS[$j]}]"
    printf "%-44s %8s %8s %10s %10s %12.0f %12.0f %8.0f %9s\n" "$label" \
      "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f5 "$f" | median)" "$(cut -d' ' -f3 "$f" | median)" \
      "$(cut -d' ' -f4 "$f" | median)" "$(cut -d' ' -f2 "$f" | median | awk '{ print $1 / 1024 }')" "${after:-0}" \
      "$(stat -c %s "${MODELS[$i]}" | awk '{ print $1 / 1e6 }')" "$(median < "$OUT/touch_$i")"
  done
done
if [ -n "$LLAMA_GGUF" ]; then
  printf "%-44s %8s %8s %10s %10s %12.0f %12s %8.0f\n" "llama-simple $(basename "$LLAMA_GGUF")" \
    "$(cut -d' ' -f1 "$OUT/llama" | median)" "$(cut -d' ' -f3 "$OUT/llama" | median)" - - \
    "$(cut -d' ' -f2 "$OUT/llama" | median | awk '{ print $1 / 1024 }')" - \
    "$(stat -c %s "$LLAMA_GGUF" | awk '{ print $1 / 1e6 }')"
fi
echo "# wall: process start to exit after one token (median of $ROUNDS); cpu: user + sys of that process (less"
echo "# sensitive than wall to a shared machine); load: pipit's own (file open to ready); after load: resident MB"
echo "# once loaded (pipit inspect --load, one run);"
echo "# 1st tok: its prompt + first token; touch: one byte of every 4 KiB page of the file's mapping, page cache warm"

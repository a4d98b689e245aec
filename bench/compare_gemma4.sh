#!/usr/bin/env bash
# Gemma 4 E2B shape, pipit vs llama.cpp on the same weights (issue 32's speed point): text pp512 / tg128, image to
# first token, audio to first token (a 10 s clip) and the peak RSS of each, the two programs alternating (one run
# each per round, the order flipped every round) so the load of a shared machine hits both alike.
#   model:  bench/make_gemma4_shape.py DIR (random weights, the Hub's E2B config and tensor names);
#   pipit:  `pipit convert DIR -o q8.pipit --quant q8` (the vision / audio towers in the same file);
#   llama:  LLAMA_SRC=... bench/llamacpp_convert_novocab.py DIR --outfile e2b-Q8_0.gguf --outtype q8_0, and the same
#           with --mmproj (mmproj-e2b-Q8_0.gguf: the vision tower (gemma4v) and the audio conformer (gemma4a)).
# Text:  bench/compare_pair.sh (llama-bench vs `pipit bench`, -p 512 -n 128).
# Image: bench/compare_vision.sh (`pipit bench --image` tower + prefill vs llama-mtmd-cli's prompt eval time).
# Audio: `pipit run --audio CLIP -n 1 --json`: timings.media_ms (WAV decode, log-mel, conformer, projector) +
#        timings.prompt_ms (the prefill of the audio tokens and the chat-formatted text) vs `llama-mtmd-cli --audio
#        CLIP -n 1`: its prompt eval time (in de3ff81 it includes the encode, which it also logs apart as "audio
#        slice encoded in" / "mtmd batch encoding done in").
# Peak RSS (/usr/bin/time -f %M, one run each): `pipit bench -p 512 -n 128` vs llama-bench, and the audio / image runs
# above (pipit run vs llama-mtmd-cli).
# usage: bench/compare_gemma4.sh BUILD_DIR PIPIT_MODEL LLAMA_GGUF LLAMA_MMPROJ IMAGE CLIP [ROUNDS] [THREADS]
#   ROUNDS 3, THREADS 2. LLAMA_BIN: llama.cpp's bin folder (default /tmp/llamacpp/src/build/bin). PARTS: any of
#   "text image audio rss" (default all four). llama-mtmd-cli runs with --jinja (LLAMA_ARGS): the shape's toy chat
#   template matches none of llama.cpp's built-in ones, and without it llama-mtmd-cli stops at start. TEMPLATE: a
#   chat template file both use instead of the one in their model files (pipit run --chat-template FILE,
#   llama-mtmd-cli --chat-template TEXT), for files converted before make_gemma4_shape.py wrote its media-aware one.
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR PIPIT_MODEL LLAMA_GGUF LLAMA_MMPROJ IMAGE CLIP [ROUNDS] [THREADS]}
PM=${2:?pipit model}
LM=${3:?llama.cpp gguf}
MM=${4:?llama.cpp mmproj}
IMG=${5:?image}
CLIP=${6:?audio clip}
ROUNDS=${7:-3}
THREADS=${8:-2}
export LLAMA_BIN=${LLAMA_BIN:-/tmp/llamacpp/src/build/bin}
export LLAMA_ARGS=${LLAMA_ARGS:---jinja}
PARTS=${PARTS:-text image audio rss}
HERE=$(cd "$(dirname "$0")" && pwd)
PIPIT=$(cd "$BUILD" && pwd)/pipit
PROMPT="Transcribe this audio."
PT=() LT=()
# llama-mtmd-cli takes the template's text (after --jinja), pipit run the file
if [ -n "${TEMPLATE:-}" ]; then PT=(--chat-template "$TEMPLATE"); LT=(--chat-template "$(cat "$TEMPLATE")"); fi
echo "# $(date -u +%FT%TZ) $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg), threads $THREADS, rounds $ROUNDS"
if [[ " $PARTS " == *" text "* ]]; then
  echo "## text: pp512 / tg128"
  "$HERE/compare_pair.sh" "$BUILD" "$PM" "$LM" "$ROUNDS" "$THREADS" 512 128
fi
if [[ " $PARTS " == *" image "* ]]; then
  echo "## image to first token ($IMG)"
  "$HERE/compare_vision.sh" "$BUILD" "$PM" "$LM" "$MM" "$IMG" "$ROUNDS" "$THREADS"
fi
OUT=$(mktemp -d)
if [[ " $PARTS " == *" audio "* ]]; then
  echo "## audio to first token ($CLIP)"
  for r in $(seq 1 "$ROUNDS"); do
    run_llama() {
      "$LLAMA_BIN/llama-mtmd-cli" -m "$LM" --mmproj "$MM" --audio "$CLIP" -p "$PROMPT" -n 1 -t "$THREADS" --temp 0 \
        -lv 4 $LLAMA_ARGS "${LT[@]}" > "$OUT/llama_$r.out" 2>&1
    }
    run_pipit() {
      "$PIPIT" run -m "$PM" --audio "$CLIP" -p "$PROMPT" -n 1 -t "$THREADS" --temp 0 --json "${PT[@]}" \
        > "$OUT/pipit_$r.json" \
        2> /dev/null
    }
    if (( r % 2 )); then run_llama; run_pipit; else run_pipit; run_llama; fi
    echo "# audio round $r done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
  /usr/bin/python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
pipit, llama = [], []
for r in range(1, rounds + 1):
    t = json.load(open(f"{out}/pipit_{r}.json"))["timings"]
    text = open(f"{out}/llama_{r}.out").read()
    enc = re.search(r"(?:audio slice encoded in|mtmd batch encoding done in) (\d+) ms", text)
    m = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", text)
    if not (enc and m):
        sys.exit(f"round {r}: no timing lines in llama-mtmd-cli's output:\n" + text[-2000:])
    l_enc, l_total = float(enc.group(1)), float(m.group(1))
    pipit.append(t["media_ms"] + t["prompt_ms"])
    llama.append(l_total)
    print(f"round {r}: pipit audio {t['media_ms']:.0f} ms + prefill {t['prompt_ms']:.0f} ms"
          f" ({t['prompt_tokens']} tokens)"
          f" = {pipit[-1]:.0f} ms | llama.cpp encode {l_enc:.0f} ms, prompt eval (with it) {l_total:.0f} ms"
          f" ({m.group(2)} tokens) | encode ratio {t['media_ms'] / l_enc:.2f}")
mp, ml = statistics.median(pipit), statistics.median(llama)
print(f"audio to first token (median): pipit {mp:.0f} ms, llama.cpp {ml:.0f} ms, pipit / llama.cpp = {mp / ml:.2f}")
EOF
fi
if [[ " $PARTS " == *" rss "* ]]; then
  echo "## peak RSS (MiB), one run each"
  rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
  kib() { echo "$(( $1 / 1024 ))"; }
  echo "text pp512+tg128: pipit $(kib "$(rss "$PIPIT" bench -m "$PM" -p 512 -n 128 -t "$THREADS" -r 1)")," \
       "llama.cpp $(kib "$(rss "$LLAMA_BIN/llama-bench" -m "$LM" -p 512 -n 128 -t "$THREADS" -r 1)")"
  MM_ARGS=(-m "$LM" --mmproj "$MM" -n 1 -t "$THREADS" --temp 0 $LLAMA_ARGS "${LT[@]}")
  p_img=$(rss "$PIPIT" run -m "$PM" --image "$IMG" -p "Describe this image." -n 1 -t "$THREADS" --temp 0 "${PT[@]}")
  l_img=$(rss "$LLAMA_BIN/llama-mtmd-cli" "${MM_ARGS[@]}" --image "$IMG" -p "Describe this image.")
  echo "image to one token: pipit $(kib "$p_img"), llama.cpp $(kib "$l_img")"
  p_aud=$(rss "$PIPIT" run -m "$PM" --audio "$CLIP" -p "$PROMPT" -n 1 -t "$THREADS" --temp 0 "${PT[@]}")
  l_aud=$(rss "$LLAMA_BIN/llama-mtmd-cli" "${MM_ARGS[@]}" --audio "$CLIP" -p "$PROMPT")
  echo "audio to one token: pipit $(kib "$p_aud"), llama.cpp $(kib "$l_aud")"
fi
rm -rf "$OUT"
echo "# done $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"

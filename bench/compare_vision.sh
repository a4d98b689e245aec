#!/usr/bin/env bash
# Image to first token, pipit vs llama-mtmd-cli, on the same weights: pipit's .pipit converted from an HF checkpoint
# (bench/make_qwen2_vl_shape.py, `pipit convert`), llama.cpp the GGUF + mmproj its own converter wrote from it
# (bench/llamacpp_convert_novocab.py, with a tokenizer.json beside the weights: llama-mtmd-cli tokenizes its prompt).
# The two alternate, one run each per round, so the load of a shared machine hits both alike.
#   pipit:     `pipit bench --image IMG -p 8 -n 0 -r 1` (after its unmeasured warm-up run): "image" (processor + vision tower) + "pp8+img" (the prefill
#              of the image's tokens and 8 text tokens), in ms.
#   llama.cpp: `llama-mtmd-cli --image IMG -p ... -n 1 -lv 4`: the tower's time ("image slice encoded in", or
#              "mtmd batch encoding done in" in 2026 versions) and llama_perf's prompt eval time. Older versions
#              time only the image's embeddings and the chat-formatted text through llama_decode there (the sum is
#              image to first token); newer ones include the encode in it (0.5.0-dev de3ff81: encode 9680 ms +
#              "image decoded in" 3450 ms <= prompt eval 13866 ms), so the prompt eval time alone is the total.
# Prints both sums per round and the ratio of the means, pipit / llama.cpp (lower is faster for pipit).
# usage: bench/compare_vision.sh BUILD_DIR PIPIT_MODEL LLAMA_GGUF LLAMA_MMPROJ IMAGE [ROUNDS] [THREADS]
#   ROUNDS 3, THREADS 2. LLAMA_BIN: llama.cpp's bin folder (default /work/lc/build/bin). LLAMA_ARGS: more
#   llama-mtmd-cli options (e.g. "--jinja" for a GGUF whose chat template llama.cpp has no built-in match for).
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR PIPIT_MODEL LLAMA_GGUF LLAMA_MMPROJ IMAGE [ROUNDS] [THREADS]}
PM=${2:?pipit model}
LM=${3:?llama.cpp gguf}
MM=${4:?llama.cpp mmproj}
IMG=${5:?image}
ROUNDS=${6:-3}
THREADS=${7:-2}
LLAMA_BIN=${LLAMA_BIN:-/work/lc/build/bin}
OUT=$(mktemp -d)
PIPIT=$(cd "$BUILD" && pwd)/pipit
echo "# $(date -u +%FT%TZ) $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# pipit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?) on $PM ($(du -h "$PM" | cut -f1))"
echo "# llama.cpp on $LM + $MM ($(du -ch "$LM" "$MM" | tail -1 | cut -f1)), $THREADS threads, image $IMG"
for r in $(seq 1 "$ROUNDS"); do
  run_llama() {
    "$LLAMA_BIN/llama-mtmd-cli" -m "$LM" --mmproj "$MM" --image "$IMG" -p "Describe this image." -n 1 -t "$THREADS" \
      --temp 0 -lv 4 ${LLAMA_ARGS:-} > "$OUT/llama_$r.out" 2>&1
  }
  run_pipit() {
    "$PIPIT" bench -m "$PM" --image "$IMG" -p 8 -n 0 -t "$THREADS" -r 1 --json > "$OUT/pipit_$r.json"
  }
  if (( r % 2 )); then run_llama; run_pipit; else run_pipit; run_llama; fi
  echo "# round $r done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
pipit, llama = [], []
for r in range(1, rounds + 1):
    tests = {e["test"]: e for e in json.load(open(f"{out}/pipit_{r}.json"))["tests"]}
    img = tests["image"]
    pp = next(e for t, e in tests.items() if t.endswith("+img"))
    # ms = tokens / (tok/s)
    p_img, p_pp = 1e3 * img["n_tokens"] / img["avg_ts"], 1e3 * pp["n_tokens"] / pp["avg_ts"]
    text = open(f"{out}/llama_{r}.out").read()
    old = re.search(r"image slice encoded in (\d+) ms", text)
    l_img = float((old or re.search(r"mtmd batch encoding done in (\d+) ms", text)).group(1))
    m = re.search(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens", text)
    l_total = float(m.group(1)) + (l_img if old else 0.0)  # newer versions: the prompt eval time includes the encode
    l_pp = l_total - l_img
    pipit.append(p_img + p_pp)
    llama.append(l_total)
    print(f"round {r}: pipit tower {p_img:.0f} ms + prefill {p_pp:.0f} ms ({pp['n_tokens']} tokens) = {p_img + p_pp:.0f} ms"
          f" | llama.cpp tower {l_img:.0f} ms + prompt eval {l_pp:.0f} ms ({m.group(2)} tokens) = {l_total:.0f} ms"
          f" | tower ratio {p_img / l_img:.2f}")
mp, ml = statistics.mean(pipit), statistics.mean(llama)
print(f"image to first token: pipit {mp:.0f} ms, llama.cpp {ml:.0f} ms, pipit / llama.cpp = {mp / ml:.2f}")
mp, ml = statistics.median(pipit), statistics.median(llama)
print(f"median: pipit {mp:.0f} ms, llama.cpp {ml:.0f} ms, pipit / llama.cpp = {mp / ml:.2f}")
EOF
rm -rf "$OUT"

#!/usr/bin/env bash
# pipit on one model file vs llama.cpp on another holding the same weights, for architectures whose GGUF pipit
# does not import (Qwen3.5, GPT-OSS): pipit runs its .pipit converted from the HF checkpoint, llama.cpp the GGUF its
# own converter wrote from that checkpoint (bench/llamacpp_convert_novocab.py). llama-bench and `pipit bench`
# alternate, one repetition each per round, so the load of a shared machine hits both alike; prints tok/s (mean ±
# stddev over rounds) and the ratio pipit / llama.cpp.
# usage: bench/compare_pair.sh BUILD_DIR PIPIT_MODEL LLAMA_GGUF [ROUNDS] [THREADS] [PROMPT] [GEN]
#   ROUNDS 3, THREADS 2 (a comma list runs each), PROMPT 512, GEN 64. LLAMA_BIN: llama.cpp's bin folder (default
#   /tmp/lc/src/build/bin). DEPTH=D: both run their tests after D positions already in the context (-d). KV=f16|q8_0|
#   f32: the KV cache type of both (pipit --kv-type, llama -ctk/-ctv; default: each one's own, f16). FA=on|off|auto:
#   llama.cpp's flash attention (default: its own, auto). PIPIT_ARGS: more `pipit bench` options (e.g.
#   "--precision fast").
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR PIPIT_MODEL LLAMA_GGUF [ROUNDS] [THREADS] [PROMPT] [GEN]}
PM=${2:?pipit model}
LM=${3:?llama.cpp gguf}
ROUNDS=${4:-3}
THREADS=${5:-2}
P=${6:-512}
N=${7:-64}
LLAMA_BIN=${LLAMA_BIN:-/tmp/lc/src/build/bin}
DEPTH=${DEPTH:-0}
LARGS=(-d "$DEPTH")
PARGS=(-d "$DEPTH")
if [ -n "${KV:-}" ]; then LARGS+=(-ctk "$KV" -ctv "$KV"); PARGS+=(--kv-type "$KV"); fi
if [ -n "${FA:-}" ]; then LARGS+=(-fa "$FA"); fi
if [ -n "${PIPIT_ARGS:-}" ]; then read -ra _extra <<< "$PIPIT_ARGS"; PARGS+=("${_extra[@]}"); fi
OUT=$(mktemp -d)
PIPIT=$(cd "$BUILD" && pwd)/pipit
echo "# $(date -u +%FT%TZ) $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# pipit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?) on $PM ($(du -h "$PM" | cut -f1))"
echo "# llama.cpp $("$LLAMA_BIN/llama-bench" --version 2>&1 | head -1 || true) on $LM ($(du -h "$LM" | cut -f1))"
echo "# llama-bench ${LARGS[*]} / pipit bench ${PARGS[*]}, threads $THREADS, -p $P -n $N"
for r in $(seq 1 "$ROUNDS"); do
  run_llama() { "$LLAMA_BIN/llama-bench" -m "$LM" -p "$P" -n "$N" -t "$THREADS" -r 1 "${LARGS[@]}" -o json > "$OUT/llama_$r.json" 2> "$OUT/llama_$r.err"; }
  run_pipit() { "$PIPIT" bench -m "$PM" -p "$P" -n "$N" -t "$THREADS" -r 1 "${PARGS[@]}" --json > "$OUT/pipit_$r.json"; }
  if (( r % 2 )); then run_llama; run_pipit; else run_pipit; run_llama; fi
  echo "# round $r done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
done
/usr/bin/python3 - "$OUT" "$ROUNDS" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def ms(v): return (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0)
llama, pipit = {}, {}
for r in range(1, rounds + 1):
    for e in json.load(open(f"{out}/llama_{r}.json")):
        name = f"pp{e['n_prompt']}" if e["n_gen"] == 0 else f"tg{e['n_gen']}"
        if e.get("n_depth", 0): name += f" @ d{e['n_depth']}"
        llama.setdefault((name, e["n_threads"]), []).append(e["avg_ts"])
    for e in json.load(open(f"{out}/pipit_{r}.json"))["tests"]:
        pipit.setdefault((e["test"], e["threads"]), []).append(e["avg_ts"])
print("| test | threads | pipit tok/s | llama.cpp tok/s | pipit / llama.cpp |")
print("| --- | ---: | ---: | ---: | ---: |")
for key in sorted(pipit, key=lambda k: (k[0][:2] != "pp", k[1])):
    if key not in llama: continue
    (pm, ps), (lm, ls) = ms(pipit[key]), ms(llama[key])
    print(f"| {key[0]} | {key[1]} | {pm:.1f} ± {ps:.1f} | {lm:.1f} ± {ls:.1f} | {pm / lm:.2f} |")
# on a loaded machine one disturbed round moves a mean far: the medians, and every round's figures
for key in sorted(pipit, key=lambda k: (k[0][:2] != "pp", k[1])):
    if key not in llama: continue
    pmed, lmed = statistics.median(pipit[key]), statistics.median(llama[key])
    rounds_txt = ", ".join(f"{p:.1f}/{l:.1f}" for p, l in zip(pipit[key], llama[key]))
    print(f"median {key[0]} t{key[1]}: pipit {pmed:.1f}, llama.cpp {lmed:.1f}, ratio {pmed / lmed:.2f}"
          f" (per round pipit/llama.cpp: {rounds_txt})")
EOF
rm -rf "$OUT"

#!/usr/bin/env bash
# pipit vs llama.cpp on the same GGUF files, in one run: llama-bench and `pipit bench` alternate, one repetition
# each per round, so that the load of a shared machine hits both alike; the table gives tok/s (mean ± stddev over
# rounds) and the ratio pipit / llama.cpp of the means. pipit imports the GGUFs (Q4_0 / Q8_0 blocks are used as they
# are, packed into 16-row panels at load; F16 stays F16). Also: read bandwidth and the decode roofline per thread
# count, and peak RSS of a 4096-token prompt (context 4096) for Q4_0.
# usage: bench/compare_llamacpp.sh BUILD_DIR [MODEL_DIR] [ROUNDS] [THREADS] [TYPES]
#   MODEL_DIR from bench/make_bench_models.sh (default /tmp/pipit_bench/qwen3-0.6b), ROUNDS 3, THREADS "1,2",
#   TYPES "q4_0 q8_0 f16". LLAMA_BIN: llama.cpp's bin folder (default /tmp/llamacpp/src/build/bin).
#   Scratch (JSON of every run) goes to $OUT (default /tmp/pipit_compare).
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR [MODEL_DIR] [ROUNDS] [THREADS] [TYPES]}
MODELS=${2:-/tmp/pipit_bench/qwen3-0.6b}
ROUNDS=${3:-3}
THREADS=${4:-1,2}
TYPES=${5:-q4_0 q8_0 f16}
LLAMA_BIN=${LLAMA_BIN:-/tmp/llamacpp/src/build/bin}
OUT=${OUT:-/tmp/pipit_compare}
PIPIT=$(cd "$BUILD" && pwd)/pipit
mkdir -p "$OUT"
rm -f "$OUT"/*.json
echo "# $(date -u +%FT%TZ) $(uname -n), $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# pipit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?), llama.cpp $("$LLAMA_BIN/llama-bench" --version 2>&1 | head -1 || true)"
for r in $(seq 1 "$ROUNDS"); do
  for t in $TYPES; do
    m="$MODELS/$t.gguf"
    run_llama() { "$LLAMA_BIN/llama-bench" -m "$m" -p 512 -n 128 -t "$THREADS" -r 1 -o json > "$OUT/llama_${t}_$r.json" 2> /dev/null; }
    run_pipit() { "$PIPIT" bench -m "$m" -p 512 -n 128 -t "$THREADS" -r 1 --json --bandwidth > "$OUT/pipit_${t}_$r.json"; }
    if (( r % 2 )); then run_llama; run_pipit; else run_pipit; run_llama; fi
    echo "# round $r $t done, load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
done
# peak RSS at context 4096 (a 4096-token prompt, so the KV cache is full), Q4_0
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
RSS_LLAMA=$(rss "$LLAMA_BIN/llama-bench" -m "$MODELS/q4_0.gguf" -p 4096 -n 0 -t 2 -r 1)
RSS_PIPIT=$(rss "$PIPIT" bench -m "$MODELS/q4_0.gguf" -p 4096 -n 0 -t 2 -r 1)
/usr/bin/python3 - "$OUT" "$ROUNDS" "$TYPES" "$RSS_LLAMA" "$RSS_PIPIT" <<'EOF'
import json, statistics, sys
out, rounds, types, rss_llama, rss_pipit = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], sys.argv[5]
def ms(v): return (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0)
rows, bw = [], {}
for t in types:
    llama, pipit = {}, {}
    for r in range(1, rounds + 1):
        for e in json.load(open(f"{out}/llama_{t}_{r}.json")):
            name = f"pp{e['n_prompt']}" if e["n_gen"] == 0 else f"tg{e['n_gen']}"
            llama.setdefault((name, e["n_threads"]), []).append(e["avg_ts"])
        j = json.load(open(f"{out}/pipit_{t}_{r}.json"))
        for e in j["tests"]:
            pipit.setdefault((e["test"], e["threads"]), []).append(e["avg_ts"])
        for b in j.get("bandwidth", []):
            bw.setdefault((t, b["threads"]), []).append((b["read_gb_s"], b["roofline_ts"], j["size_bytes"]))
    for key in sorted(pipit, key=lambda k: (k[0][:2] != "pp", k[1])):
        if key not in llama: continue
        (pm, ps), (lm, ls) = ms(pipit[key]), ms(llama[key])
        rows.append((t, key[0], key[1], pm, ps, lm, ls))
print(f"\n| weights | test | threads | pipit tok/s | llama.cpp tok/s | pipit / llama.cpp |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for t, name, th, pm, ps, lm, ls in rows:
    print(f"| {t} | {name} | {th} | {pm:.1f} ± {ps:.1f} | {lm:.1f} ± {ls:.1f} | {pm / lm:.2f} |")
print("\n| weights | threads | read GB/s (best of 5, per round) | roofline tok/s | pipit tg128 | fraction of roofline |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for (t, th), v in sorted(bw.items()):
    gbs = statistics.mean(x[0] for x in v); roof = statistics.mean(x[1] for x in v)
    tg = next((r[3] for r in rows if r[0] == t and r[1].startswith("tg") and r[2] == th), 0)
    print(f"| {t} | {th} | {gbs:.1f} | {roof:.1f} | {tg:.1f} | {tg / roof:.2f} |")
scale = {}
for t in types:
    v = {r[2]: r[3] for r in rows if r[0] == t and r[1].startswith("pp")}
    if 1 in v and 2 in v: scale[t] = v[2] / v[1]
if scale:
    print("\nprefill thread scaling 1 -> 2: " + ", ".join(f"{t} {s:.2f}x" for t, s in scale.items()))
print(f"peak RSS, q4_0, 4096-token prompt (context 4096), 2 threads: pipit {int(rss_pipit) / 1024:.0f} MiB, "
      f"llama.cpp {int(rss_llama) / 1024:.0f} MiB")
EOF

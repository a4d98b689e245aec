#!/usr/bin/env python3
# The tables of bench/compare_llamacpp.sh from the JSON its rounds left in OUT, so that a run can be summarised again
# (or with fewer types) without running it again.
# usage: bench/compare_summary.py OUT ROUNDS "TYPES" [RSS_LLAMA_KIB RSS_PIPIT_KIB]
import json, os, statistics, sys
out, rounds, types = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
rss_llama, rss_pipit = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None, None)
def ms(v): return (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0)
rows, bw, frac = [], {}, {}  # frac: each round's decode / roofline as pipit bench gives it (K/V reads counted)
for t in types:
    llama, ik, pipit = {}, {}, {}
    for r in range(1, rounds + 1):
        for peer, runs in (("llama", llama), ("ik", ik)):
            if not os.path.exists(f"{out}/{peer}_{t}_{r}.json"): continue
            for e in json.load(open(f"{out}/{peer}_{t}_{r}.json")):
                name = f"pp{e['n_prompt']}" if e["n_gen"] == 0 else f"tg{e['n_gen']}"
                runs.setdefault((name, e["n_threads"]), []).append(e["avg_ts"])
        j = json.load(open(f"{out}/pipit_{t}_{r}.json"))
        for e in j["tests"]:
            pipit.setdefault((e["test"], e["threads"]), []).append(e["avg_ts"])
            if "roofline" in e:
                frac.setdefault((t, e["threads"]), []).append(e["roofline"]["fraction"])
        for b in j.get("bandwidth", []):
            bw.setdefault((t, b["threads"]), []).append((b["read_gb_s"], b["roofline_ts"], j["size_bytes"]))
    for key in sorted(pipit, key=lambda k: (k[0][:2] != "pp", k[1])):
        if key not in llama: continue
        (pm, ps), (lm, ls) = ms(pipit[key]), ms(llama[key])
        rows.append((t, key[0], key[1], pm, ps, lm, ls, ms(ik[key]) if key in ik else None))
has_ik = any(r[7] for r in rows)
ik_head, ik_rule = (" ik_llama.cpp -rtr 1 tok/s | pipit / ik_llama.cpp |", " ---: | ---: |") if has_ik else ("", "")
print(f"\n| weights | test | threads | pipit tok/s | llama.cpp tok/s | pipit / llama.cpp |{ik_head}")
print("| --- | --- | ---: | ---: | ---: | ---: |" + ik_rule)
for t, name, th, pm, ps, lm, ls, k in rows:
    extra = (f" {k[0]:.1f} ± {k[1]:.1f} | {pm / k[0]:.2f} |" if k else " | |") if has_ik else ""
    print(f"| {t} | {name} | {th} | {pm:.1f} ± {ps:.1f} | {lm:.1f} ± {ls:.1f} | {pm / lm:.2f} |{extra}")
print("\n| weights | threads | read GB/s (best of 5, per round) | roofline tok/s (weights) | pipit tg128 | fraction of roofline (weights + K/V) |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for (t, th), v in sorted(bw.items()):
    gbs = statistics.mean(x[0] for x in v); roof = statistics.mean(x[1] for x in v)
    tg = next((r[3] for r in rows if r[0] == t and r[1].startswith("tg") and r[2] == th), 0)
    f = statistics.mean(frac[(t, th)]) if (t, th) in frac else tg / roof
    print(f"| {t} | {th} | {gbs:.1f} | {roof:.1f} | {tg:.1f} | {f:.2f} |")
scale = {}
for t in types:
    v = {r[2]: r[3] for r in rows if r[0] == t and r[1].startswith("pp")}
    if 1 in v and 2 in v: scale[t] = v[2] / v[1]
if scale:
    print("\nprefill thread scaling 1 -> 2: " + ", ".join(f"{t} {s:.2f}x" for t, s in scale.items()))
if rss_pipit and rss_llama:
    print(f"peak RSS, q4_0, 4096-token prompt (context 4096), 2 threads: pipit {int(rss_pipit) / 1024:.0f} MiB, "
          f"llama.cpp {int(rss_llama) / 1024:.0f} MiB")

# One row per type, as the README gives them: pipit tok/s (x llama.cpp[, x ik_llama.cpp]) per thread count.
threads = sorted({r[2] for r in rows})
def cell(t, test):
    out = []
    for th in threads:
        r = next((r for r in rows if r[0] == t and r[1].startswith(test) and r[2] == th), None)
        if r is None: out.append("-"); continue
        ratios = f"{r[3] / r[5]:.2f}x" + (f", {r[3] / r[7][0]:.2f}x ik" if r[7] else "")
        out.append(f"{r[3]:.1f} ({ratios})")
    return " / ".join(out)
def roof(t):
    out = []
    for th in threads:
        v = bw.get((t, th))
        tg = next((r[3] for r in rows if r[0] == t and r[1].startswith("tg") and r[2] == th), None)
        if (t, th) in frac: out.append(f"{statistics.mean(frac[(t, th)]):.2f}")
        else: out.append(f"{tg / statistics.mean(x[1] for x in v):.2f}" if v and tg else "-")
    return " / ".join(out)
tt = " / ".join(map(str, threads))
print(f"\n| weights | pp512 tok/s, {tt} threads (pipit / peer) | tg128 tok/s, {tt} threads | decode / roofline, {tt} threads |")
print("| --- | ---: | ---: | ---: |")
for t in types:
    if any(r[0] == t for r in rows): print(f"| {t.upper()} | {cell(t, 'pp')} | {cell(t, 'tg')} | {roof(t)} |")

#!/usr/bin/env python3
"""Decode speed of `pipit serve --draft` against a plain server: one greedy completion at a time, the two servers
alternating request by request (so that load from other processes hits both alike), --reps times each. Prints each
request's time and usage (accepted / rejected guesses), the total ratio, and whether the texts are the same (they
must be).

    python3 bench/serve_draft_bench.py PIPIT TARGET DRAFT [--draft-max 4] [-n 48] [--reps 2] [-t 2] [--prompt TEXT]

Python standard library only (tests/e2e/server_util.py starts the servers).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from server_util import Server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pipit")
    ap.add_argument("target")
    ap.add_argument("draft")
    ap.add_argument("--draft-max", default="4")
    ap.add_argument("-n", type=int, default=48)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--prompt", default="The city council met on Tuesday to discuss the new public library.")
    a = ap.parse_args()
    common = ("--parallel", "1", "--cache-ram", "0")
    servers = {"plain": Server(a.pipit, a.target, *common, threads=a.threads),
               "draft": Server(a.pipit, a.target, *common, "--draft", a.draft, "--draft-max", a.draft_max,
                               threads=a.threads)}
    body = {"prompt": a.prompt, "max_tokens": a.n, "temperature": 0, "ignore_eos": True}
    secs, texts = {"plain": 0.0, "draft": 0.0}, {"plain": [], "draft": []}
    try:
        for _ in range(a.reps):
            for name, srv in servers.items():
                t0 = time.time()
                status, r = srv.post("/v1/completions", body)
                dt = time.time() - t0
                if status != 200:
                    sys.exit(f"{name}: HTTP {status}: {r}")
                secs[name] += dt
                texts[name].append(r["choices"][0]["text"])
                print(f"{name:5} {dt:6.1f} s  {r['usage']}", flush=True)
        print(f"plain {secs['plain']:.1f} s, draft {secs['draft']:.1f} s: x{secs['plain'] / secs['draft']:.2f}; "
              f"same text: {texts['plain'] == texts['draft']}")
    finally:
        for srv in servers.values():
            srv.stop()


if __name__ == "__main__":
    main()

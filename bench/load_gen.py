#!/usr/bin/env python3
"""Load generator for an OpenAI-compatible server (pipit serve): K clients, each running streaming chat requests
back to back, report aggregate throughput, time to first token and errors. Python standard library only.

  load_gen.py --url http://127.0.0.1:8080 -k 4 [--requests 2] [--max-tokens 64] [--json]

Each request asks for exactly --max-tokens tokens (ignore_eos, temperature 0 unless --temperature; top_k / top_p
only when --top-k / --top-p are given, as OpenAI clients send none) so runs at different K compare the same work. Reported:
  total tok/s   every completion token of the run / wall time of the run (prefill included)
  decode tok/s  sum over requests of (tokens - 1) / (last token - first token), the streams' decode rate added up
                over the K clients (per-request average x K)
  TTFT p50/p95  request sent -> first content delta
  errors        HTTP errors, error events in a stream, broken connections
"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a refrigerator works.",
    "List some facts about the Moon.",
    "What makes a good cup of tea?",
    "Describe a walk through a forest in autumn.",
    "Why is the sky blue?",
    "Give advice to someone learning to cook.",
    "Summarize the history of the bicycle.",
]


ROW_HEADER = f"{'clients':<8} {'requests':<9} {'errors':<7} {'total tok/s':<12} {'decode tok/s':<13} " \
             f"{'TTFT p50 ms':<12} {'TTFT p95 ms':<12}"
ROW_FORMAT = "{clients:<8} {requests:<9} {errors:<7} {total_tok_s:<12} {decode_tok_s:<13} {ttft_p50_ms:<12} {ttft_p95_ms:<12}"


class Result:
    def __init__(self):
        self.ok = False
        self.error = ""
        self.ttft = None  # seconds
        self.tokens = 0
        self.decode_s = 0.0
        self.text = ""


def stream_chat(url, body, api_key, timeout):
    """One streaming chat request; returns a Result with timings measured from the moment it is sent."""
    r = Result()
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    t0 = time.perf_counter()
    t_first = t_last = None
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            r.error = f"HTTP {resp.status}: {resp.read()[:200]!r}"
            return r
        usage = None
        done = False
        for raw in resp:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                r.error = "stream error: " + str(ev["error"].get("message"))
                return r
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices", []):
                piece = ch.get("delta", {}).get("content") or ""
                if piece:
                    now = time.perf_counter()
                    if t_first is None:
                        t_first = now
                    t_last = now
                    r.text += piece
        if not done:
            r.error = "stream ended without [DONE]"
            return r
        r.tokens = usage["completion_tokens"] if usage else 0
        if t_first is not None:
            r.ttft = t_first - t0
            r.decode_s = t_last - t_first
        r.ok = True
    except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
        r.error = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return r


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def run(url, k, requests, max_tokens, temperature, api_key, timeout, top_k=None, top_p=None):
    results = []
    lock = threading.Lock()

    def client(ci):
        for j in range(requests):
            body = {
                "model": "pipit",
                "messages": [{"role": "user", "content": PROMPTS[(ci + j) % len(PROMPTS)]}],
                "max_tokens": max_tokens,
                "temperature": temperature,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            # sent only when given: OpenAI clients send no top_k (and often no top_p)
            if top_k is not None:
                body["top_k"] = top_k
            if top_p is not None:
                body["top_p"] = top_p
            r = stream_chat(url, body, api_key, timeout)
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(k)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    ok = [r for r in results if r.ok]
    tokens = sum(r.tokens for r in ok)
    rates = [(r.tokens - 1) / r.decode_s for r in ok if r.tokens > 1 and r.decode_s > 0]
    ttfts = [r.ttft for r in ok if r.ttft is not None]
    return {
        "clients": k,
        "requests": len(results),
        "errors": len(results) - len(ok),
        "error_samples": [r.error for r in results if not r.ok][:3],
        "tokens": tokens,
        "wall_s": round(wall, 3),
        "total_tok_s": round(tokens / wall, 2) if wall > 0 else 0.0,
        "decode_tok_s": round(statistics.mean(rates) * k, 2) if rates else 0.0,
        "ttft_p50_ms": round(percentile(ttfts, 50) * 1000, 1),
        "ttft_p95_ms": round(percentile(ttfts, 95) * 1000, 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("-k", "--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=2, help="requests per client, back to back")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=None, help="sent only when given (OpenAI clients send none)")
    ap.add_argument("--top-p", type=float, default=None, help="sent only when given")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    ap.add_argument("--row", action="store_true", help="print one table row (see ROW_HEADER)")
    a = ap.parse_args()
    if a.clients < 1 or a.requests < 1 or a.max_tokens < 1:
        ap.error("--clients, --requests and --max-tokens must be >= 1")
    s = run(a.url, a.clients, a.requests, a.max_tokens, a.temperature, a.api_key, a.timeout, a.top_k, a.top_p)
    if a.json:
        print(json.dumps(s))
    elif a.row:
        print(ROW_FORMAT.format(**s))
    else:
        print(f"clients {s['clients']}  requests {s['requests']}  errors {s['errors']}  tokens {s['tokens']}  "
              f"wall {s['wall_s']} s")
        print(f"total {s['total_tok_s']} tok/s  decode {s['decode_tok_s']} tok/s  "
              f"TTFT p50 {s['ttft_p50_ms']} ms  p95 {s['ttft_p95_ms']} ms")
        for e in s["error_samples"]:
            print("error:", e)
    return 1 if s["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

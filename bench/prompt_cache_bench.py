"""Time to first token over a multi-turn chat, with and without the server's prompt cache.

    python3 bench/prompt_cache_bench.py PIPIT MODEL [--turns 10] [--threads 2] [--system-words 300]

Starts `pipit serve` twice on the same model (default --cache-ram, then --cache-ram 0), plays the same conversation
of --turns user turns against each (a long system prompt, each answer fed back as the client would: greedy, 32
tokens), and prints per turn the prompt tokens, the cached tokens and the time to the first streamed token.
Both runs alternate turn by turn, so that load from other processes on the machine hits both alike.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from server_util import Server  # noqa: E402

QUESTIONS = ["What is a prime number?", "Give an example.", "Why is 1 not prime?", "How many primes are there?",
             "Who proved it?", "What is a twin prime?", "Name a large prime.", "What is a Mersenne prime?",
             "How are primes used in cryptography?", "Summarise our chat."]


def turn(srv, msgs):
    # logprobs: every token's chunk carries them, so the first token is seen even when its text is empty (the
    # first chunk, the role with content "", is sent before the prompt is evaluated and does not count)
    body = {"messages": msgs, "temperature": 0, "max_tokens": 32, "stream": True, "logprobs": True,
            "stream_options": {"include_usage": True}}
    c = srv.connect()
    t0 = time.time()
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    ttft, text, usage = None, "", None
    for raw in r:
        if not raw.startswith(b"data: ") or raw.strip() == b"data: [DONE]":
            continue
        ev = json.loads(raw[6:])
        if ev.get("usage"):
            usage = ev["usage"]
        for ch in ev.get("choices", []):
            piece = ch.get("delta", {}).get("content")
            if (piece or ch.get("logprobs")) and ttft is None:
                ttft = time.time() - t0
            text += piece or ""
    c.close()
    return ttft, text, usage


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pipit")
    ap.add_argument("model")
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--system-words", type=int, default=300)
    a = ap.parse_args()
    system = "You are a patient mathematics tutor. " + " ".join(f"rule{i % 50}" for i in range(a.system_words))
    warm = Server(a.pipit, a.model, "--parallel", "1", threads=a.threads)
    cold = Server(a.pipit, a.model, "--parallel", "1", "--cache-ram", "0", threads=a.threads)
    conv = {"warm": [{"role": "system", "content": system}], "cold": [{"role": "system", "content": system}]}
    print("| turn | prompt tokens | cached | TTFT cache (ms) | TTFT no cache (ms) | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    tot = {"warm": 0.0, "cold": 0.0}
    try:
        for i in range(a.turns):
            res = {}
            for name, srv in (("warm", warm), ("cold", cold)):
                conv[name].append({"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]})
                ttft, text, usage = turn(srv, conv[name])
                conv[name].append({"role": "assistant", "content": text})
                res[name] = (ttft, usage)
                tot[name] += ttft
            (tw, uw), (tc, uc) = res["warm"], res["cold"]
            if conv["warm"][-1] != conv["cold"][-1]:
                print(f"turn {i + 1}: the answers differ", file=sys.stderr)
            print(f"| {i + 1} | {uw['prompt_tokens']} | {uw['prompt_tokens_details']['cached_tokens']} | "
                  f"{tw * 1e3:.0f} | {tc * 1e3:.0f} | {tc / tw:.2f} |")
        print(f"total TTFT: cache {tot['warm'] * 1e3:.0f} ms, no cache {tot['cold'] * 1e3:.0f} ms "
              f"(x{tot['cold'] / tot['warm']:.2f})")
    finally:
        warm.stop()
        cold.stop()


if __name__ == "__main__":
    main()

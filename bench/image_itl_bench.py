#!/usr/bin/env python3
"""Inter-token latency of running streams while an image request arrives (issue 14, parallel model execution).

Starts `pipit serve` on a vision model, opens --streams streaming chat requests (greedy, ignore_eos, --max-tokens
each), and once every stream has produced --warmup tokens sends one chat request with an image. Reports, per
phase, the gaps between consecutive tokens of the streams (all streams pooled):
  before   tokens before the image request was sent
  image    tokens between the image request being sent and its first token (the server decodes the image,
           encodes it with the vision tower and prefills its prompt meanwhile)
  after    the rest
and the image request's time to first token. Run it with the server options to compare, e.g. the default (encode
on half the threads, 64-token prefill chunks) against `--server-args "--prefill-chunk 0 --image-threads T"` (the
encode on a pool as big as the decode's, the image prompt prefilled in one pass: the server before issue 14's
part 3). Python standard library only.

  image_itl_bench.py PIPIT MODEL IMAGE [-t 2] [--streams 3] [--max-tokens 96] [--warmup 8] [--server-args "..."]
"""
import argparse
import base64
import http.client
import json
import statistics
import subprocess
import sys
import threading
import time


def stream(port, body, times, first=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
    for raw in resp:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if "error" in ev:
            raise RuntimeError(str(ev["error"]))
        for ch in ev.get("choices", []):
            # one chunk per token, with its logprobs (so that a token without text still counts); not the first
            # chunk, the role with content "", which is sent once the request is queued (after the image encode)
            if ch.get("delta", {}).get("content") or ch.get("logprobs"):
                times.append(time.perf_counter())
                if first is not None and not first:
                    first.append(times[-1])
    conn.close()


def summary(gaps):
    if not gaps:
        return "no tokens"
    g = sorted(x * 1000 for x in gaps)
    p = lambda q: g[min(len(g) - 1, int(round(q * (len(g) - 1))))]
    return f"n {len(g):3d}  mean {statistics.mean(g):7.1f} ms  p50 {p(0.5):7.1f}  p90 {p(0.9):7.1f}  max {g[-1]:7.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pipit")
    ap.add_argument("model")
    ap.add_argument("image")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--streams", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--server-args", default="")
    a = ap.parse_args()

    cmd = [a.pipit, "serve", "-m", a.model, "--port", "0", "-t", str(a.threads), "--parallel", str(a.streams + 1),
           "-c", "1024"] + a.server_args.split()
    srv = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    port = None
    for line in srv.stderr:
        if "listening on http://" in line:
            port = int(line.strip().rsplit(":", 1)[1].split("/")[0])
            break
    if port is None:
        sys.exit("the server did not start: " + " ".join(cmd))
    threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
    try:
        with open(a.image, "rb") as f:
            url = "data:image/png;base64," + base64.b64encode(f.read()).decode()
        text_body = lambda i: {"messages": [{"role": "user", "content": f"Tell me a long story, number {i}."}],
                               "max_tokens": a.max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                               "logprobs": True}
        times = [[] for _ in range(a.streams)]
        threads = [threading.Thread(target=stream, args=(port, text_body(i), times[i])) for i in range(a.streams)]
        for t in threads:
            t.start()
        while min(len(t) for t in times) < a.warmup:
            time.sleep(0.005)
        image_body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                                {"type": "text", "text": "Describe the image."}]}],
                      "max_tokens": 4, "temperature": 0, "stream": True, "logprobs": True}
        t_sent = time.perf_counter()
        itimes, first = [], []
        it = threading.Thread(target=stream, args=(port, image_body, itimes, first))
        it.start()
        it.join()
        for t in threads:
            t.join()
        t_first = first[0]
        phases = {"before": [], "image": [], "after": []}
        for ts in times:
            for x, y in zip(ts, ts[1:]):
                phases["before" if y <= t_sent else "image" if y <= t_first else "after"].append(y - x)
        print(f"server: {' '.join(cmd[1:])}")
        for k, v in phases.items():
            print(f"  stream gaps {k:<6} {summary(v)}")
        print(f"  image request: first token after {1000 * (t_first - t_sent):.0f} ms")
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()

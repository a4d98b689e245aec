#!/usr/bin/env python3
"""Bad input for `pipit serve`: 1,000 randomized malformed requests (broken JSON, wrong types, huge numbers,
invalid base64 images, unknown roles, missing fields, deep nesting, invalid UTF-8, wrong methods and routes) from a
fixed seed. Every one must be answered with a 4xx and an OpenAI-shaped error body; the server must stay healthy
and still answer a valid request afterwards. A few raw-socket cases break HTTP itself.

  server_fuzz_test.py PIPIT_BINARY MODEL_DIR [N] [SEED]
"""
import base64
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server  # noqa: E402

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"


def base_chat(rng):
    return {"model": "qwen3_chat", "messages": [{"role": "user", "content": rng.choice(["hi", "Hello there", "2+2?"])}],
            "max_tokens": 2, "temperature": 0}


def base_completion(rng):
    return {"prompt": rng.choice(["Once", "Hello"]), "max_tokens": 2}


def valid_json(b):
    try:
        json.loads(b.decode("utf-8"))
        return True
    except (ValueError, UnicodeDecodeError):
        return False


def broken_json(rng):
    path = rng.choice([CHAT, COMPLETIONS])
    text = json.dumps(base_chat(rng) if path == CHAT else base_completion(rng)).encode()
    while True:
        b = bytearray(text)
        op = rng.randrange(5)
        i = rng.randrange(len(b))
        if op == 0:
            b = b[:i]  # truncated
        elif op == 1:
            b.insert(i, ord(rng.choice('{}[],:"\\x')))
        elif op == 2:
            del b[i]
        elif op == 3:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            b.insert(i, 0xFF)  # invalid UTF-8
        if not valid_json(bytes(b)):
            return path, bytes(b)


WRONG = {
    "messages": ["hi", {}, [], 5, [5], [[]], [{"role": "user"}], True],
    "temperature": ["hot", [], {}, True, -0.5, 2.5],
    "top_p": ["1", 1.5, -0.1, [0.5]],
    "max_tokens": ["4", 4.5, -1, 0, True, [4], {"n": 4}],
    "max_completion_tokens": ["4", 0, -7, 3.25],
    "stream": ["true", 1, 0, [], {}],
    "stop": [5, [1], {"a": 1}, [["x"]], True, ["x" * 300]],
    "seed": ["x", 1.5, [], True],
    "n": [0, "1", 1.0, -3, 1000],  # 1..16 choices are valid (issue 16)
    "presence_penalty": [3, -3, "0"],
    "frequency_penalty": [2.5, "a", []],
    "stream_options": ["x", 5, {"include_usage": "yes"}],
    "model": [5, [], {}, True],
    "top_k": ["10", 1.5, -5],
    "min_p": [2, "0.1"],
    "logprobs": [3, "yes"],  # chat logprobs is a bool
    "tools": [[{"type": "function"}]],
    "response_format": [{"type": "xml"}, "json", 5],
    "ignore_eos": ["yes", 1],
    "chat_template_kwargs": [5, "x", {"a": {"b": 1}}, {"a": [1]}],
}


def wrong_type(rng):
    body = base_chat(rng)
    if rng.random() < 0.3:  # inside a message
        where = rng.choice(["role", "content", "part"])
        m = body["messages"][0]
        if where == "role":
            m["role"] = rng.choice([5, None, [], {}, True])
        elif where == "content":
            m["content"] = rng.choice([5, {"a": 1}, [5], True, [[]], 1.5])
        else:
            m["content"] = [rng.choice([{"type": "text"}, {"type": "text", "text": 5}, {"type": "audio"}, {"text": "x"},
                                        {"type": 5}, {"type": "image_url"}, {"type": "image_url", "image_url": 5},
                                        {"type": "image_url", "image_url": {"url": 5}}, "text", None])]
        return CHAT, json.dumps(body).encode()
    field = rng.choice(sorted(WRONG))
    body[field] = rng.choice(WRONG[field])
    return CHAT, json.dumps(body).encode()


HUGE = ["1e309", "-1e309", "123456789012345678901234567890", str(2 ** 64), str(2 ** 63), str(-2 ** 63 - 1),
        "1e300", "-1e300", "1e20", "99999999999999999999.5"]


def huge_number(rng):
    path = rng.choice([CHAT, COMPLETIONS])
    body = base_chat(rng) if path == CHAT else base_completion(rng)
    field = rng.choice(["temperature", "top_p", "max_tokens", "seed", "n", "presence_penalty", "frequency_penalty",
                        "top_k", "min_p", "max_completion_tokens", "repetition_penalty"])
    value = rng.choice(HUGE)
    if field == "seed":  # any int64 is a fine seed: only values outside it
        value = rng.choice(["1e309", "123456789012345678901234567890", str(2 ** 64), "1e20", "-1e300"])
    body[field] = "__NUM__"
    return path, json.dumps(body).replace('"__NUM__"', value).encode()


def bad_image(rng):
    junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    url = rng.choice([
        "data:image/png;base64,!!!notbase64!!!",
        "data:image/png;base64,",
        "data:image/png,rawdata",
        "data:text/plain;base64,aGVsbG8=",
        "data:image/png;base64,A",
        "data:image/png;base64,AAAA====",
        "data:image/jpeg;base64," + base64.b64encode(junk).decode() + "%%",
        "data:image/png;base64," + base64.b64encode(junk).decode(),  # valid base64, not an image
        "data:;base64,@@@@",
        "data:image/png;base64",
        "http://example.com/cat.png",
        "https://127.0.0.1/x.png",
        "file:///etc/passwd",
        "/etc/passwd",
        "",
        "data:image/png;base64," + "A" * 4 + "=" + "B" * 3,
    ])
    part = {"type": "image_url", "image_url": {"url": url}}
    if rng.random() < 0.2:
        part["image_url"] = url  # the short form some clients send
    body = base_chat(rng)
    body["messages"][0]["content"] = [part, {"type": "text", "text": "What is in the picture?"}]
    return CHAT, json.dumps(body).encode()


def unknown_role(rng):
    body = base_chat(rng)
    role = rng.choice(["wizard", "System", "USER", "bot", "function", "", "assistant ", "ユーザー", "model", "human"])
    body["messages"].insert(rng.randrange(len(body["messages"]) + 1), {"role": role, "content": "hello"})
    return CHAT, json.dumps(body).encode()


def missing_or_odd_body(rng):
    return rng.choice([
        (CHAT, b"{}"), (CHAT, b"[]"), (CHAT, b"null"), (CHAT, b"5"), (CHAT, b'"str"'), (CHAT, b""),
        (CHAT, b'{"model": "x"}'), (CHAT, b'{"messages": null}'), (COMPLETIONS, b"{}"),
        (COMPLETIONS, b'{"prompt": null}'), (COMPLETIONS, b'{"prompt": ""}'), (COMPLETIONS, b'{"prompt": []}'),
        (COMPLETIONS, b'{"prompt": [[1, 2], [3]]}'), (COMPLETIONS, b'{"prompt": ["a", "b"]}'),
        (COMPLETIONS, b'{"prompt": [-1]}'), (COMPLETIONS, b'{"prompt": [1000000000000]}'),
        (COMPLETIONS, b'{"prompt": [1.5]}'), (COMPLETIONS, b'{"prompt": "x", "echo": true}'),
        (COMPLETIONS, b'{"prompt": "x", "best_of": 3}'), (COMPLETIONS, b'{"prompt": "x", "suffix": "y"}'),
        (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "n": 17}'),
    ])


def deep_nesting(rng):
    depth = rng.choice([100, 1000, 10000, 30000])
    nest = "[" * depth + "]" * depth
    where = rng.choice(["messages", "stop", "content", "body"])
    if where == "body":
        return CHAT, nest.encode()
    body = base_chat(rng)
    body[where if where != "content" else "messages"] = "__NEST__"
    if where == "content":
        body["messages"] = [{"role": "user", "content": "__NEST__"}]
    return CHAT, json.dumps(body).replace('"__NEST__"', nest).encode()


def wrong_route_or_method(rng):
    return rng.choice([
        ("GET", CHAT, None), ("PUT", CHAT, b"{}"), ("DELETE", COMPLETIONS, None), ("GET", "/v1/chat", None),
        ("POST", "/v1/embeddings", b"{}"), ("POST", "/v1/chat/completions/x", b"{}"), ("GET", "/v1/models/nope", None),
        ("POST", "/health", b"{}"), ("GET", "/%ff%fe", None), ("GET", "/" + "a" * 2000, None),
    ])


GENERATORS = [broken_json, wrong_type, huge_number, bad_image, unknown_role, missing_or_odd_body, deep_nesting]


def make_case(rng):
    if rng.random() < 0.04:
        return wrong_route_or_method(rng)
    path, body = rng.choice(GENERATORS)(rng)
    return "POST", path, body


RAW = [
    b"GARBAGE\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{\"messages\":",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\n{}",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
    b"GET / HTTP/9.9\r\n\r\n",
    b"\x00\x01\x02\x03\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\n" + b"X-Long: " + b"a" * 20000 + b"\r\n\r\n",
]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pipit, model = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 20250607
    rng = random.Random(seed)
    srv = Server(pipit, model, "--parallel", "2", "--ctx", "256", "--max-body", str(1 << 20))
    failures = []
    try:
        conn = srv.connect(timeout=30)
        counts = {}
        for i in range(n):
            method, path, body = make_case(rng)
            try:
                status, data, _ = srv.request(method, path, body, conn=conn)
            except (OSError, Exception) as e:  # noqa: BLE001 - any failure to get an answer is a finding
                failures.append(f"case {i}: {method} {path} {body[:120]!r}: no answer ({type(e).__name__}: {e})")
                conn.close()
                conn = srv.connect(timeout=30)
                if not srv.alive():
                    break
                continue
            counts[status] = counts.get(status, 0) + 1
            shaped = False
            try:
                err = json.loads(data)["error"]
                shaped = isinstance(err["message"], str) and {"type", "param", "code"} <= set(err)
            except (ValueError, KeyError, TypeError):
                pass
            if not (400 <= status < 500) or not shaped:
                failures.append(f"case {i}: {method} {path} {body[:160]!r} -> {status} {data[:200]!r}")
            if i % 100 == 99:
                h = srv.health()
                if h.get("status") != "ok":
                    failures.append(f"after case {i}: /health says {h}")
        conn.close()
        for r in RAW:
            reply = srv.raw(r)
            if reply and not (reply.startswith(b"HTTP/1.1 4") or reply.startswith(b"HTTP/1.0 4")):
                failures.append(f"raw {r[:60]!r} -> {reply[:120]!r}")
        if not srv.alive():
            failures.append("the server died")
        else:
            status, ok = srv.post(CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
            if status != 200:
                failures.append(f"a valid request after the fuzzing got {status}: {ok}")
            for _ in range(100):  # the engine frees the slot just after the answer is out
                h = srv.health()
                if h["status"] == "ok" and h["slots_busy"] == 0:
                    break
                time.sleep(0.05)
            else:
                failures.append(f"/health after the fuzzing: {h}")
        print(f"[fuzz] {n} requests, statuses {dict(sorted(counts.items()))}, {len(RAW)} raw cases")
    finally:
        out = srv.output()
        rc = srv.stop()
        if rc != 0:
            failures.append(f"pipit serve exited with {rc}:\n{out[-3000:]}")
    for f in failures[:30]:
        print("FAIL", f)
    if failures:
        print(f"[fuzz] {len(failures)} failures")
        return 1
    print("[fuzz] ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

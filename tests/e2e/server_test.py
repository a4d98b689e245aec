#!/usr/bin/env python3
"""End-to-end tests of `pipit serve` over real HTTP (Python's http.client and raw sockets): chat and completions,
streamed and not (the deltas add up to the non-streamed text at temperature 0), /v1/models and /health, errors in
OpenAI's shape (bad JSON, missing fields, wrong types, a prompt longer than the context, a wrong API key, a body
over the limit, a full queue), cancellation by closing the connection (the slot is freed), and 8 concurrent
streams that give what each gives alone.

  server_test.py PIPIT_BINARY MODELS_DIR TESTDATA_DIR [unittest options]

MODELS_DIR: what tests/e2e/make_server_models.py makes: qwen3_chat (text) and qwen2_vl_chat (text + images), both
with the real Qwen tokenizer and chat templates, and qwen3_vl_chat (the tiny Qwen3-VL with a toy tokenizer). TESTDATA_DIR: the shared test data (images; the
gemma4 checkpoint, which VisionGemma4 pairs with tests/data/gemma4_tokenizer).
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, ServerCase, deltas, finish_reason  # noqa: E402

PIPIT = MODEL = VL_MODEL = TESTDATA = MODELS_DIR = None
HERE = os.path.dirname(os.path.abspath(__file__))

PROMPTS = [
    "Hello there",
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Count from one to ten.",
    "Tell me a joke about computers.",
    "Why do cats purr?",
    "Translate 'good morning' into German.",
    "Name three primary colours.",
]


def chat(content, **kw):
    body = {"model": "qwen3_chat", "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": 16}
    body.update(kw)
    return body


def assert_error(t, status, body, want_status, param=None, needle=None, code=None):
    t.assertEqual(status, want_status, body)
    t.assertIn("error", body)
    e = body["error"]
    t.assertEqual(set(e), {"message", "type", "param", "code"}, e)
    t.assertIsInstance(e["message"], str)
    t.assertTrue(e["message"])
    if param is not None:
        t.assertEqual(e["param"], param, e)
    if needle is not None:
        t.assertIn(needle, e["message"])
    if code is not None:
        t.assertEqual(e["code"], code, e)


class Api(ServerCase):
    """One server with 8 slots for everything that does not need special limits."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "8", "--ctx", "512")

    def test_health_and_models(self):
        status, h = self.srv.get("/health")
        self.assertEqual(status, 200)
        self.assertEqual(h["status"], "ok")
        self.assertEqual(h["slots"], 8)
        status, m = self.srv.get("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(m["object"], "list")
        self.assertEqual(m["data"][0]["id"], "qwen3_chat")
        self.assertEqual(m["data"][0]["object"], "model")
        status, one = self.srv.get("/v1/models/qwen3_chat")
        self.assertEqual((status, one["id"]), (200, "qwen3_chat"))
        status, body = self.srv.get("/v1/models/gpt-9")
        assert_error(self, status, body, 404, code="model_not_found")

    def test_chat_stream_equals_non_stream(self):
        for prompt in PROMPTS[:3]:
            status, full = self.srv.post("/v1/chat/completions", chat(prompt, max_tokens=24))
            self.assertEqual(status, 200, full)
            self.assertEqual(full["object"], "chat.completion")
            msg = full["choices"][0]["message"]
            self.assertEqual(msg["role"], "assistant")
            usage = full["usage"]
            self.assertGreater(usage["prompt_tokens"], 5)
            self.assertLessEqual(usage["completion_tokens"], 24)
            self.assertEqual(usage["total_tokens"], usage["prompt_tokens"] + usage["completion_tokens"])
            self.assertIn(full["choices"][0]["finish_reason"], ("stop", "length"))

            status, events, done, _ = self.srv.stream(
                "/v1/chat/completions", chat(prompt, max_tokens=24, stream=True, stream_options={"include_usage": True}))
            self.assertEqual(status, 200)
            self.assertTrue(done, "no data: [DONE]")
            self.assertEqual(events[0]["object"], "chat.completion.chunk")
            self.assertEqual(events[0]["choices"][0]["delta"]["role"], "assistant")
            self.assertEqual(len({e["id"] for e in events}), 1)
            self.assertEqual(deltas(events), msg["content"])
            self.assertEqual(finish_reason(events), full["choices"][0]["finish_reason"])
            self.assertEqual(events[-1]["choices"], [])  # the usage chunk
            # the same prompt again: all but its last token come from the prompt cache
            details = events[-1]["usage"].pop("prompt_tokens_details")
            self.assertEqual(details["cached_tokens"], usage["prompt_tokens"] - 1)
            usage.pop("prompt_tokens_details")
            self.assertEqual(events[-1]["usage"], usage)
            self.assertTrue(all(e["usage"] is None for e in events[:-1]))

    def test_completion_stream_equals_non_stream(self):
        body = {"prompt": "Once upon a time", "max_tokens": 20, "temperature": 0}
        status, full = self.srv.post("/v1/completions", body)
        self.assertEqual(status, 200, full)
        self.assertEqual(full["object"], "text_completion")
        text = full["choices"][0]["text"]
        status, events, done, _ = self.srv.stream("/v1/completions", dict(body, stream=True))
        self.assertEqual(status, 200)
        self.assertTrue(done)
        self.assertEqual(deltas(events), text)
        self.assertEqual(finish_reason(events), full["choices"][0]["finish_reason"])
        # token ids as the prompt
        status, ids = self.srv.post("/v1/completions", {"prompt": [9707, 1879], "max_tokens": 3, "temperature": 0})
        self.assertEqual(status, 200, ids)
        self.assertEqual(ids["usage"]["prompt_tokens"], 2)

    def test_sampling_fields(self):
        # a stop string cuts the answer where it first appears, and is not part of it
        status, full = self.srv.post("/v1/chat/completions", chat(PROMPTS[1], max_tokens=24, ignore_eos=True))
        text = full["choices"][0]["message"]["content"]
        self.assertEqual(full["usage"]["completion_tokens"], 24)
        stop = text[len(text) // 2:len(text) // 2 + 2]
        if stop.strip():
            status, cut = self.srv.post("/v1/chat/completions", chat(PROMPTS[1], max_tokens=24, stop=[stop, "zzzz"]))
            self.assertEqual(status, 200, cut)
            self.assertEqual(cut["choices"][0]["message"]["content"], text[:text.find(stop)])
            self.assertEqual(cut["choices"][0]["finish_reason"], "stop")
        # the same seed gives the same sample; penalties and top_p are accepted
        body = chat(PROMPTS[2], temperature=1.0, top_p=0.9, seed=1234, presence_penalty=0.5, frequency_penalty=0.5,
                    max_completion_tokens=12)
        a = self.srv.post("/v1/chat/completions", body)[1]
        b = self.srv.post("/v1/chat/completions", body)[1]
        self.assertEqual(a["choices"][0]["message"], b["choices"][0]["message"])
        self.assertLessEqual(a["usage"]["completion_tokens"], 12)
        # content parts and a system message
        status, parts = self.srv.post("/v1/chat/completions", {
            "messages": [{"role": "developer", "content": "Be brief."},
                         {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}]}],
            "max_tokens": 4})
        self.assertEqual(status, 200, parts)

    def test_errors(self):
        P = "/v1/chat/completions"
        cases = [
            (b"{not json", 400, None, "not valid JSON"),
            (b"", 400, None, "not valid JSON"),
            (b"[1, 2]", 400, None, "JSON object"),
            ({"model": "x"}, 400, "messages", "required"),
            ({"messages": "hi"}, 400, "messages", "must be a list"),
            ({"messages": []}, 400, "messages", "at least one"),
            ({"messages": [{"content": "hi"}]}, 400, "messages[0].role", "no 'role'"),
            ({"messages": [{"role": "wizard", "content": "hi"}]}, 400, "messages[0].role", "wizard"),
            ({"messages": [{"role": "user"}]}, 400, "messages[0].content", "content"),
            ({"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content", "string or a list"),
            ({"messages": [{"role": "user", "content": [{"type": "audio"}]}]}, 400, "messages[0].content[0].type", None),
            (chat("hi", temperature="hot"), 400, "temperature", "must be a number"),
            (chat("hi", temperature=5), 400, "temperature", None),
            (chat("hi", max_tokens=0), 400, "max_tokens", None),
            (chat("hi", max_tokens=2.5), 400, "max_tokens", "integer"),
            (chat("hi", max_tokens=10**30), 400, "max_tokens", None),
            (chat("hi", max_tokens=100000), 400, "max_tokens", "context"),
            (chat("hi", n=17), 400, "n", None),
            (chat("hi", stream="yes"), 400, "stream", "boolean"),
            (chat("hi", stop=5), 400, "stop", None),
            (chat("hi", seed="abc"), 400, "seed", None),
            (chat("hi", tools=[{"type": "function", "function": {"description": "f"}}]), 400, "tools[0].function.name", None),
            (chat("hi", logprobs="yes"), 400, "logprobs", None),
            (chat("hi", top_logprobs=3), 400, "top_logprobs", "logprobs"),
            (chat("hi", logprobs=True, top_logprobs=21), 400, "top_logprobs", None),
            (chat("hi", response_format={"type": "xml"}), 400, "response_format", None),
            ({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]},
             400, "messages[0].content[0]", "does not accept images"),
            ({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]}]},
             400, "messages[0].content[0].image_url", "invalid base64"),
            ({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "/etc/passwd"}}]}]},
             400, "messages[0].content[0].image_url", "--allow-local-files"),
            ({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]},
             400, "messages[0].content[0].image_url", "data URL"),
        ]
        for body, want, param, needle in cases:
            with self.subTest(body=body):
                status, data, headers = self.srv.request("POST", P, body)
                self.assertTrue(headers.get("Content-Type", "").startswith("application/json"), headers)
                assert_error(self, status, json.loads(data), want, param, needle)
        for body, param in [({"prompt": 5}, "prompt"), ({}, "prompt"), ({"prompt": ["a", "b"]}, "prompt"),
                            ({"prompt": [1, -1]}, "prompt"), ({"prompt": "x", "echo": True}, "echo")]:
            status, data = self.srv.post("/v1/completions", body)
            assert_error(self, status, data, 400, param)
        status, data, _ = self.srv.request("GET", "/v2/nothing")
        assert_error(self, status, json.loads(data), 404, needle="/v2/nothing")
        status, data, _ = self.srv.request("DELETE", "/v1/models")
        self.assertGreaterEqual(status, 400)
        self.assertLess(status, 500)
        self.assertTrue(self.srv.alive())

    def test_concurrent_streams_equal_solo(self):
        """8 streams at once (one per slot, joining and leaving at different times) give exactly the greedy text
        each gives alone."""
        bodies = [chat(p, max_tokens=12 + 3 * i, ignore_eos=True) for i, p in enumerate(PROMPTS)]
        solo = []
        for b in bodies:
            status, r = self.srv.post("/v1/chat/completions", b)
            self.assertEqual(status, 200, r)
            solo.append(r["choices"][0]["message"]["content"])
        got = [None] * len(bodies)

        def run(i):
            status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(bodies[i], stream=True))
            got[i] = (status, done, deltas(events))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, g in enumerate(got):
            self.assertEqual(g, (200, True, solo[i]), f"stream {i}")

    def test_load_gen_runs(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "load_gen.py"),
                              "--url", f"http://127.0.0.1:{self.srv.port}", "-k", "2", "--requests", "1",
                              "--max-tokens", "6", "--json"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        s = json.loads(out.stdout)
        self.assertEqual((s["requests"], s["errors"], s["tokens"]), (2, 0, 12), s)


class WaitsForHealth:
    """For test classes with a server in self.srv: poll /health until `pred` holds."""

    def wait_health(self, pred, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            h = self.srv.health()
            if pred(h):
                return h
            time.sleep(0.05)
        self.fail(f"/health never satisfied the condition: {self.srv.health()}")


class Limits(WaitsForHealth, ServerCase):
    """One slot, a queue of one, a small context and body limit, and an API key."""

    KEY = {"Authorization": "Bearer sekrit"}

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "1", "--queue", "1", "--ctx", "256", "--max-body", "65536",
                         "--api-key", "sekrit")

    def post(self, body, path="/v1/chat/completions"):
        return self.srv.post(path, body, self.KEY)

    def test_api_key(self):
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekrit"},
                        {"Authorization": "Bearer sekrit2"}]:
            status, body = self.srv.post("/v1/chat/completions", chat("hi", max_tokens=2), headers)
            assert_error(self, status, body, 401, code="invalid_api_key")
            status, body = self.srv.get("/v1/models", headers)
            assert_error(self, status, body, 401)
        status, body = self.post(chat("hi", max_tokens=2))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.srv.get("/health")[0], 200)  # health needs no key
        for path in ("/props", "/slots", "/metrics"):  # these do
            self.assertEqual(self.srv.request("GET", path)[0], 401, path)
            self.assertEqual(self.srv.request("GET", path, headers=self.KEY)[0], 200, path)

    def test_prompt_longer_than_context(self):
        status, body = self.post(chat("hello " * 400))
        assert_error(self, status, body, 400, param="messages", code="context_length_exceeded", needle="256")
        status, body = self.post({"prompt": "hello " * 400}, "/v1/completions")
        assert_error(self, status, body, 400, param="prompt", code="context_length_exceeded")

    def test_body_too_large(self):
        status, data, _ = self.srv.request("POST", "/v1/chat/completions", chat("x" * 70000), self.KEY)
        assert_error(self, status, json.loads(data), 413, needle="65536")
        self.assertEqual(self.post(chat("hi", max_tokens=2))[0], 200)

    def test_cancel_on_disconnect_frees_the_slot(self):
        before = self.wait_health(lambda h: h["slots_busy"] == 0)
        c = self.srv.connect()
        c.request("POST", "/v1/chat/completions", headers=dict(self.KEY, **{"Content-Type": "application/json"}),
                  body=json.dumps(chat(PROMPTS[0], max_tokens=200, ignore_eos=True, stream=True)))
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        n = 0
        for raw in r:
            if raw.startswith(b"data: ") and b'"content":"' in raw and b'"content":""' not in raw:
                n += 1
                if n == 3:
                    break
        c.sock.shutdown(2)
        c.close()
        h = self.wait_health(lambda h: h["slots_busy"] == 0 and h["requests_completed"] > before["requests_completed"])
        self.assertLess(h["tokens_generated"] - before["tokens_generated"], 200, "generation was not cancelled")
        status, body = self.post(chat(PROMPTS[1], max_tokens=4))  # the one slot serves the next request
        self.assertEqual(status, 200, body)

    def test_queue_full_is_503(self):
        self.wait_health(lambda h: h["slots_busy"] == 0)
        conns = []
        try:
            for want in ({"slots_busy": 1}, {"queued": 1}):
                c = self.srv.connect()
                c.request("POST", "/v1/chat/completions",
                          headers=dict(self.KEY, **{"Content-Type": "application/json"}),
                          body=json.dumps(chat(PROMPTS[2], max_tokens=220, ignore_eos=True, stream=True)))
                conns.append(c)
                self.wait_health(lambda h: all(h[k] == v for k, v in want.items()))
            status, body = self.post(chat("hi", max_tokens=2))
            assert_error(self, status, body, 503, code="server_overloaded")
            self.assertEqual(body["error"]["type"], "server_error")
        finally:
            for c in conns:
                c.close()
        self.wait_health(lambda h: h["slots_busy"] == 0 and h["queued"] == 0)
        self.assertEqual(self.post(chat("hi", max_tokens=2))[0], 200)


class LongAnswers(WaitsForHealth, ServerCase):
    """--keepalive 0.2: non-streaming answers that take longer are written late (leading spaces, then the JSON),
    and a client that leaves before its answer is noticed and cancelled like a stream's."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "1", "--ctx", "4096", "--keepalive", "0.2")

    def test_long_answer_is_the_streamed_text(self):
        body = chat(PROMPTS[0], max_tokens=600, ignore_eos=True)
        t0 = time.time()
        status, data, headers = self.srv.request("POST", "/v1/chat/completions", body)
        took = time.time() - t0
        self.assertEqual(status, 200, data)
        full = json.loads(data)  # leading spaces are JSON whitespace
        self.assertEqual(full["usage"]["completion_tokens"], 600)
        self.assertEqual(full["choices"][0]["finish_reason"], "length")
        if took > 0.5:  # it took long enough to go through the late path: the spaces were sent
            self.assertTrue(data.startswith(b" "), data[:20])
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertEqual(status, 200)
        self.assertEqual(deltas(events), full["choices"][0]["message"]["content"])

    def test_leaving_before_the_answer_frees_the_slot(self):
        before = self.wait_health(lambda h: h["slots_busy"] == 0)
        c = self.srv.connect()
        c.request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"},
                  body=json.dumps(chat(PROMPTS[0], max_tokens=3500, ignore_eos=True)))
        self.wait_health(lambda h: h["slots_busy"] == 1)
        time.sleep(0.5)
        c.sock.shutdown(2)
        c.close()
        h = self.wait_health(lambda h: h["slots_busy"] == 0 and h["requests_completed"] > before["requests_completed"])
        self.assertLess(h["tokens_generated"] - before["tokens_generated"], 3500, "generation was not cancelled")
        status, body = self.srv.post("/v1/chat/completions", chat(PROMPTS[1], max_tokens=4))
        self.assertEqual(status, 200, body)


class Disconnects(WaitsForHealth, ServerCase):
    """A non-streaming or queued request whose client has gone is noticed within a second (the handler looks at
    its socket every 100 ms), not at the next keep-alive write (--keepalive 5 s here, the default), and its
    generation stops."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "1", "--ctx", "4096", "--keepalive", "5")

    def send(self, **kw):
        c = self.srv.connect()
        c.request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"},
                  body=json.dumps(chat(PROMPTS[0], max_tokens=4000, ignore_eos=True, **kw)))
        return c

    def leave(self, c, pred):
        """Closes c; returns the seconds until /health satisfies pred, and /health then."""
        t0 = time.time()
        c.sock.shutdown(2)
        c.close()
        h = self.wait_health(pred, timeout=10)
        took = time.time() - t0
        sys.stderr.write(f" [noticed in {took:.2f} s] ")
        return took, h

    def test_abandoned_answer_stops_generating_within_a_second(self):
        before = self.wait_health(lambda h: h["slots_busy"] == 0)
        c = self.send()
        self.wait_health(lambda h: h["slots_busy"] == 1 and h["tokens_generated"] > before["tokens_generated"])
        time.sleep(0.3)
        took, h = self.leave(c, lambda h: h["slots_busy"] == 0)
        self.assertLess(took, 1.0, f"the slot was freed {took:.2f} s after the client left")
        time.sleep(0.3)
        self.assertEqual(self.srv.health()["tokens_generated"], h["tokens_generated"], "still generating")
        self.assertLess(h["tokens_generated"] - before["tokens_generated"], 4000, "generation was not cancelled")

    def test_abandoned_queued_request_leaves_the_queue_within_a_second(self):
        before = self.wait_health(lambda h: h["slots_busy"] == 0 and h["queued"] == 0)
        running = self.send(stream=True)  # holds the one slot
        self.wait_health(lambda h: h["slots_busy"] == 1)
        queued = self.send()
        self.wait_health(lambda h: h["queued"] == 1)
        took, _ = self.leave(queued, lambda h: h["queued"] == 0)
        self.assertLess(took, 1.0, f"the queued request left the queue {took:.2f} s after its client")
        self.assertEqual(self.srv.health()["slots_busy"], 1)  # the other one still runs
        took, h = self.leave(running, lambda h: h["slots_busy"] == 0)
        self.assertLess(took, 1.0, f"the stream's slot was freed {took:.2f} s after the client left")
        self.assertLess(h["tokens_generated"] - before["tokens_generated"], 4000)


class Vision(ServerCase):
    """A Qwen2-VL-shaped model: images as data URLs (and local files when allowed) through the Engine."""

    QUESTION = "Describe the picture."

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, VL_MODEL, "--parallel", "4", "--ctx", "512", "--allow-local-files",
                         os.path.join(TESTDATA, "models", "qwen2_vl"))
        cls.images = [os.path.join(TESTDATA, "models", "qwen2_vl", n) for n in ("img_100x75.png", "img_300x200.png")]

    def body(self, url, **kw):
        b = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                       {"type": "text", "text": self.QUESTION}]}],
             "max_tokens": 20, "temperature": 0}
        b.update(kw)
        return b

    def data_url(self, path):
        with open(path, "rb") as f:
            return "data:image/png;base64," + base64.b64encode(f.read()).decode()

    def test_image_answer_matches_pipit_run(self):
        status, r = self.srv.post("/v1/chat/completions", self.body(self.data_url(self.images[0])))
        self.assertEqual(status, 200, r)
        self.assertEqual(r["usage"]["prompt_tokens"], 37)  # the template's tokens + 12 image tokens (84x112)
        run = subprocess.run([PIPIT, "run", "-m", VL_MODEL, "-p", self.QUESTION, "--image", self.images[0], "-n", "20",
                              "--temp", "0", "-t", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(r["choices"][0]["message"]["content"], run.stdout[:-1])
        status, events, done, _ = self.srv.stream("/v1/chat/completions",
                                                  self.body(self.data_url(self.images[0]), stream=True))
        self.assertTrue(done)
        self.assertEqual(deltas(events), r["choices"][0]["message"]["content"])
        # the same file by path (allowed on this server) gives the same answer
        for url in (self.images[0], "file://" + self.images[0]):
            status, by_path = self.srv.post("/v1/chat/completions", self.body(url))
            self.assertEqual(status, 200, by_path)
            self.assertEqual(by_path["choices"][0]["message"], r["choices"][0]["message"])

    def test_images_and_text_concurrently_equal_solo(self):
        bodies = [self.body(self.data_url(self.images[0]), max_tokens=16),
                  self.body(self.data_url(self.images[1]), max_tokens=24),
                  chat(PROMPTS[0], max_tokens=20), chat(PROMPTS[1], max_tokens=12)]
        for b in bodies:
            b["ignore_eos"] = True
        solo = [self.srv.post("/v1/chat/completions", b)[1]["choices"][0]["message"]["content"] for b in bodies]
        self.assertNotEqual(solo[0], solo[1])  # the image matters
        got = [None] * len(bodies)

        def run(i):
            status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(bodies[i], stream=True))
            got[i] = (status, done, deltas(events))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, g in enumerate(got):
            self.assertEqual(g, (200, True, solo[i]), f"request {i}")

    def test_bad_images(self):
        with open(self.images[0], "rb") as f:
            png = f.read()
        for url, needle in [("data:image/png;base64," + base64.b64encode(b"hello world").decode(), "PNG or JPEG"),
                            ("data:image/png;base64," + base64.b64encode(png[:200]).decode(), None),
                            ("data:image/png;base64,%%%", "base64"),
                            ("/nonexistent/cat.png", None),
                            ("https://example.com/cat.png", "data URL")]:
            with self.subTest(url=url[:60]):
                status, body = self.srv.post("/v1/chat/completions", self.body(url))
                assert_error(self, status, body, 400, needle=needle)
        self.assertEqual(self.srv.health()["status"], "ok")


class PromptCache(WaitsForHealth, ServerCase):
    """The same model with the prompt cache (the default) and without it (--cache-ram 0, a 256-token context): a
    conversation's next turn prefills only what the cache does not hold and answers as the cold server does."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "1")
        cls.cold = Server(PIPIT, MODEL, "--parallel", "1", "--cache-ram", "0", "--ctx", "256")

    @classmethod
    def tearDownClass(cls):
        out, rc = cls.cold.output(), cls.cold.stop()
        assert rc == 0, f"pipit serve exited with {rc}:\n{out}"
        super().tearDownClass()

    def test_next_turn_reuses_the_conversation(self):
        msgs = [{"role": "user", "content": PROMPTS[3]}]
        for turn in range(3):
            body = {"model": "qwen3_chat", "messages": msgs, "temperature": 0, "max_tokens": 8}
            before = self.srv.health()
            status, warm = self.srv.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, warm)
            after = self.srv.health()
            status, cold = self.cold.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, cold)
            self.assertEqual(warm["choices"][0]["message"], cold["choices"][0]["message"], f"turn {turn}")
            cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
            self.assertEqual(cold["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
            # counted by the engine's forward passes, not derived from the cache's answer
            self.assertEqual(after["prompt_tokens_evaluated"] - before["prompt_tokens_evaluated"],
                             warm["usage"]["prompt_tokens"] - cached)
            if turn > 0:  # at least the previous turn's prompt (the template may render the answer differently)
                self.assertGreaterEqual(cached, prev_prompt - 1)
            prev_prompt = warm["usage"]["prompt_tokens"]
            msgs = msgs + [warm["choices"][0]["message"], {"role": "user", "content": PROMPTS[4 + turn]}]
        h = self.srv.health()["prompt_cache"]
        self.assertGreaterEqual(h["hits"], 2)
        self.assertGreater(h["bytes"], 0)
        self.assertEqual(h["budget_bytes"], 1024 << 20)
        self.assertEqual(self.cold.health()["prompt_cache"]["bytes"], 0)

    def test_context_full_is_length(self):
        # the cold server's context holds 256 tokens: the answer stops when it is full, with finish_reason "length"
        body = chat(PROMPTS[0], max_tokens=256, ignore_eos=True)
        status, r = self.cold.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        self.assertEqual(r["choices"][0]["finish_reason"], "length")
        # the last token is sampled from the 256th position's logits and needs no room of its own
        self.assertEqual(r["usage"]["total_tokens"], 257)
        status, events, done, _ = self.cold.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertEqual((status, done), (200, True))
        self.assertEqual(finish_reason(events), "length")
        self.assertEqual(deltas(events), r["choices"][0]["message"]["content"])


class SpeculativeMtp(WaitsForHealth, ServerCase):
    """--mtp: the model's own multi-token-prediction head in the Engine (Qwen3.5: the tiny qwen3_5_vl golden
    checkpoint with stories260k's tokenizer, the same 512 ids, and a small chat template linked beside it). Greedy and
    seeded answers equal a plain server's; guesses are reported; a model without the head is refused at start."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        q, st = os.path.join(TESTDATA, "models", "qwen3_5_vl"), os.path.join(TESTDATA, "models", "stories260k")
        for src, name in ((q, "config.json"), (q, "model.safetensors"), (st, "tokenizer.json")):
            os.symlink(os.path.join(src, name), os.path.join(cls.dir.name, name))
        with open(os.path.join(cls.dir.name, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": "<s>", "eos_token": "</s>", "chat_template": "{% for m in messages %}[{{ m.role }}] "
                       "{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"}, f)
        cls.srv = Server(PIPIT, cls.dir.name, "--mtp", "--mtp-n", "2", "--kv-type", "f32")
        cls.plain = Server(PIPIT, cls.dir.name, "--kv-type", "f32")

    @classmethod
    def tearDownClass(cls):
        out, rc = cls.plain.output(), cls.plain.stop()
        assert rc == 0, f"pipit serve exited with {rc}:\n{out}"
        super().tearDownClass()
        cls.dir.cleanup()

    def test_same_answers(self):
        drafted = 0
        for kw in ({}, {"temperature": 0.8, "seed": 5}, {"temperature": 1.0, "seed": 3, "n": 2}):
            body = chat("Once upon a time there was a cat.", max_tokens=48, ignore_eos=True, **kw)
            status, spec = self.srv.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, spec)
            status, plain = self.plain.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, plain)
            self.assertEqual([c["message"] for c in spec["choices"]], [c["message"] for c in plain["choices"]], kw)
            d = spec["usage"].get("completion_tokens_details", {})
            drafted += d.get("accepted_prediction_tokens", 0) + d.get("rejected_prediction_tokens", 0)
        self.assertGreater(drafted, 0)
        self.assertGreater(self.srv.health()["speculative"]["drafted"], 0)

    def test_refused_without_head(self):
        stories = os.path.join(TESTDATA, "models", "stories260k")  # a Llama: no head
        r = subprocess.run([PIPIT, "serve", "-m", stories, "--port", "0", "--mtp"], capture_output=True, text=True,
                           timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--mtp", r.stderr)
        self.assertIn("no multi-token-prediction head", r.stderr)


class Speculative(WaitsForHealth, ServerCase):
    """--lookup (prompt lookup) and --draft (a draft model: here the model itself) in the Engine. Greedy and seeded
    sampled answers equal a server without them, streamed or not; usage reports the guesses accepted and rejected,
    /health counts them."""

    PROMPT = "1 2 3 1 2 3 1 2 3"  # the random test model repeats itself in its greedy answer to this one

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--lookup", "--draft-max", "6")
        cls.plain = Server(PIPIT, MODEL)
        cls.drafted = Server(PIPIT, MODEL, "--draft", MODEL, "--draft-max", "4")

    @classmethod
    def tearDownClass(cls):
        for srv in (cls.plain, cls.drafted):
            out, rc = srv.output(), srv.stop()
            assert rc == 0, f"pipit serve exited with {rc}:\n{out}"
        super().tearDownClass()

    def check(self, srv, self_draft):
        before = srv.health()["speculative"]
        drafted = accepted = 0
        for kw in ({}, {"temperature": 1.0, "top_k": 40, "seed": 3}, {"temperature": 0.8, "seed": 11, "n": 2}):
            body = chat(self.PROMPT, max_tokens=64, ignore_eos=True, **kw)
            status, spec = srv.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, spec)
            status, plain = self.plain.post("/v1/chat/completions", body)
            self.assertEqual(status, 200, plain)
            self.assertEqual([c["message"] for c in spec["choices"]], [c["message"] for c in plain["choices"]], kw)
            self.assertNotIn("completion_tokens_details", plain["usage"])
            d = spec["usage"].get("completion_tokens_details", {"accepted_prediction_tokens": 0,
                                                                "rejected_prediction_tokens": 0})
            drafted += d["accepted_prediction_tokens"] + d["rejected_prediction_tokens"]
            accepted += d["accepted_prediction_tokens"]
            if not kw:
                self.assertGreater(d["accepted_prediction_tokens"], 0, spec["usage"])
                if self_draft:  # the model's own greedy guesses are its greedy tokens
                    self.assertEqual(d["rejected_prediction_tokens"], 0, spec["usage"])
            status, events, done, _ = srv.stream("/v1/chat/completions",
                                                 dict(body, stream=True, stream_options={"include_usage": True}))
            self.assertEqual((status, done), (200, True))
            if "n" not in kw:
                self.assertEqual(deltas(events), plain["choices"][0]["message"]["content"])
                self.assertEqual(events[-1]["usage"].get("completion_tokens_details"),
                                 spec["usage"].get("completion_tokens_details"))
        after = srv.health()["speculative"]
        # the streamed repeats guess as much again (same tokens, same guesses)
        self.assertEqual(after["drafted"] - before["drafted"], 2 * drafted)
        self.assertGreater(accepted, 0)
        self.assertEqual(self.plain.health()["speculative"], {"drafted": 0, "accepted": 0})

    def test_same_answers_and_acceptance_reported(self):
        self.check(self.srv, False)

    def test_draft_model(self):
        self.check(self.drafted, True)
        r = subprocess.run([PIPIT, "serve", "-m", MODEL, "--port", "0", "--lookup", "--draft", MODEL],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("choose one", r.stderr)


class VisionQwen3(ServerCase):
    """Qwen3-VL (DeepStack rows, interleaved M-RoPE) through the Engine: an image in /v1/chat/completions gives what
    `pipit run --image` gives (same prompt tokens, same greedy text), streamed or not."""

    QUESTION = "What is in the image?"

    @classmethod
    def setUpClass(cls):
        cls.model = os.path.join(MODELS_DIR, "qwen3_vl_chat")
        cls.srv = Server(PIPIT, cls.model, "--parallel", "2", "--ctx", "512")
        cls.image = os.path.join(TESTDATA, "models", "qwen3_vl", "img_150x90.png")

    def test_image_answer_matches_pipit_run(self):
        with open(self.image, "rb") as f:
            url = "data:image/png;base64," + base64.b64encode(f.read()).decode()
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                          {"type": "text", "text": self.QUESTION}]}],
                "max_tokens": 12, "temperature": 0, "ignore_eos": True}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        run = subprocess.run([PIPIT, "run", "-m", self.model, "-p", self.QUESTION, "--image", self.image, "-n", "12",
                              "--temp", "0", "--ignore-eos", "-t", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        m = re.search(r"prompt (\d+) tokens", run.stderr)
        self.assertIsNotNone(m, run.stderr)
        self.assertEqual(r["usage"]["prompt_tokens"], int(m.group(1)))
        self.assertEqual(r["usage"]["completion_tokens"], 12)
        self.assertEqual(r["choices"][0]["message"]["content"], run.stdout[:-1])
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertTrue(done)
        self.assertEqual(deltas(events), r["choices"][0]["message"]["content"])
        # the tiny random model's greedy text hardly depends on the image; a seeded sample reads the whole
        # distribution, so it does: both images, every sampler setting given on both sides, server == pipit run
        answers = []
        for image in (self.image, os.path.join(TESTDATA, "models", "qwen3_vl", "img_256x160.png")):
            with open(image, "rb") as f:
                url = "data:image/png;base64," + base64.b64encode(f.read()).decode()
            b = dict(body, temperature=1.0, top_k=40, top_p=0.95, min_p=0.05, seed=7)
            b["messages"][0]["content"][0]["image_url"]["url"] = url
            status, r = self.srv.post("/v1/chat/completions", b)
            self.assertEqual(status, 200, r)
            run = subprocess.run([PIPIT, "run", "-m", self.model, "-p", self.QUESTION, "--image", image, "-n", "12",
                                  "--temp", "1", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05", "--seed", "7",
                                  "--ignore-eos", "-t", "1"], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(r["choices"][0]["message"]["content"], run.stdout[:-1], image)
            answers.append(run.stdout)
        self.assertNotEqual(answers[0], answers[1])


class VisionGemma4(ServerCase):
    """Gemma 4 (an image becomes <|image> + soft tokens + <image|>) through the Engine: the tiny checkpoint of
    TESTDATA/models/gemma4 with the toy tokenizer of tests/data/gemma4_tokenizer; an image_url part gives what
    `pipit run --image` gives (78 prompt tokens, the same greedy text), streamed or not."""

    QUESTION = "Describe this image."

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pipit_srv_gemma4_")
        cls.model = os.path.join(cls.tmp, "gemma4")
        shutil.copytree(os.path.join(TESTDATA, "models", "gemma4"), cls.model)
        tok = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "gemma4_tokenizer")
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok, f), cls.model)
        cls.srv = Server(PIPIT, cls.model, "--parallel", "2", "--ctx", "512")
        cls.image = os.path.join(TESTDATA, "models", "gemma4", "img_200x150.png")

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_image_answer_matches_pipit_run(self):
        with open(self.image, "rb") as f:
            url = "data:image/png;base64," + base64.b64encode(f.read()).decode()
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                          {"type": "text", "text": self.QUESTION}]}],
                "max_tokens": 12, "temperature": 0, "ignore_eos": True}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        self.assertEqual(r["usage"]["prompt_tokens"], 78)  # 14 template tokens, the placeholder -> 1 + 63 + 1
        run = subprocess.run([PIPIT, "run", "-m", self.model, "-p", self.QUESTION, "--image", self.image, "-n", "12",
                              "--temp", "0", "--ignore-eos", "-t", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("prompt 78 tokens", run.stderr)
        self.assertEqual(r["usage"]["completion_tokens"], 12)
        self.assertEqual(r["choices"][0]["message"]["content"], run.stdout[:-1])
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertTrue(done)
        self.assertEqual(deltas(events), r["choices"][0]["message"]["content"])


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    PIPIT, TESTDATA = sys.argv[1], sys.argv[3]
    MODEL = os.path.join(sys.argv[2], "qwen3_chat")
    VL_MODEL = os.path.join(sys.argv[2], "qwen2_vl_chat")
    MODELS_DIR = sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)

#!/usr/bin/env python3
"""End-to-end tests of the `pipit serve` API beyond plain chat: logprobs / top_logprobs (chat and completions,
streamed and not, checked against `pipit logits`), n > 1 and seed, /tokenize and /detokenize, /v1/models'
context length, and /v1/embeddings (mean and last-token pooling from a sentence-transformers config, checked
against the logits: the test model ties its output head to the embeddings, so pooled hidden states @ E^T must
equal the pooled logits).

  server_api_test.py PIPIT_BINARY MODELS_DIR [unittest options]
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import unittest
import uuid

import jsonschema
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_util import read_safetensors, write_ids  # noqa: E402
from server_util import Server, ServerCase, deltas  # noqa: E402

PIPIT = MODEL = None


def chat(content, **kw):
    body = {"model": "qwen3_chat", "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": 8}
    body.update(kw)
    return body


def pipit_logits(ids):
    """[T, V] logits of `pipit logits` over ids (float64)."""
    with tempfile.TemporaryDirectory() as d:
        write_ids(os.path.join(d, "in.safetensors"), ids)
        subprocess.run([PIPIT, "logits", "-m", MODEL, "-t", "1", "--input", os.path.join(d, "in.safetensors"),
                        "--output", os.path.join(d, "out.safetensors")], check=True, capture_output=True)
        return read_safetensors(os.path.join(d, "out.safetensors"))["logits"][0].astype(np.float64)


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


class Api(ServerCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "4", "--ctx", "512")

    def test_models_context_length(self):
        status, m = self.srv.get("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(m["data"][0]["context_length"], 512)
        self.assertEqual(m["data"][0]["meta"]["n_vocab"], 151669)
        self.assertFalse(m["data"][0]["meta"]["embeddings"])

    def test_props_slots_metrics_and_timings(self):
        status, p = self.srv.get("/props")
        self.assertEqual(status, 200, p)
        self.assertEqual((p["total_slots"], p["default_generation_settings"]["n_ctx"]), (4, 512))
        self.assertIn("<|im_start|>", p["chat_template"])
        self.assertTrue(p["build_info"].startswith("pipit-"))
        secret = "my private question about zebras"
        c = self.srv.connect()
        c.request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"},
                  body=json.dumps(chat(secret, max_tokens=400, ignore_eos=True, stream=True)))
        r = c.getresponse()
        r.readline()  # the answer has started: its slot is busy
        status, data, _ = self.srv.request("GET", "/slots")
        slots = json.loads(data)
        self.assertEqual(len(slots), 4)
        busy = sum(s["is_processing"] for s in slots)
        self.assertNotIn(b"zebras", data)  # no prompt text
        status, data, headers = self.srv.request("GET", "/metrics")
        self.assertTrue(headers.get("Content-Type", "").startswith("text/plain"), headers)
        # The 400 tokens take ~0.3 s on this model: a test client descheduled that long (ctest -j 2 beside the
        # hostile suite) may look after the answer ended. Then the stream must be complete; otherwise busy is 1.
        finished = busy == 0 and b"[DONE]" in r.read()
        self.assertEqual(busy, 0 if finished else 1, slots)
        c.close()
        values = {}
        for line in data.decode().splitlines():  # Prometheus text format: comments, then "name value"
            if line.startswith("#"):
                self.assertRegex(line, r"^# (HELP|TYPE) pipit_[a-z_]+ ")
                continue
            name, value = line.split(" ")
            values[name] = float(value)
        self.assertEqual(values["pipit_slots"], 4)
        if not finished:
            self.assertIn("pipit_requests_processing", values)
        # timings (llama-server's): counts agree with usage
        status, full = self.srv.post("/v1/chat/completions", chat("Hello", max_tokens=6, ignore_eos=True))
        t, u = full["timings"], full["usage"]
        self.assertEqual(t["predicted_n"], u["completion_tokens"])
        self.assertEqual(t["prompt_n"] + t["cache_n"], u["prompt_tokens"])
        self.assertGreater(t["prompt_ms"], 0)
        self.assertGreater(t["predicted_per_second"], 0)
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(chat("Hello", max_tokens=6),
                                                   stream=True, stream_options={"include_usage": True}))
        self.assertEqual(events[-1]["timings"]["predicted_n"], events[-1]["usage"]["completion_tokens"])

    def test_apply_template_is_the_prompt_generation_uses(self):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
        status, t = self.srv.post("/apply-template", {"messages": messages})
        self.assertEqual(status, 200, t)
        self.assertTrue(t["prompt"].endswith("<|im_start|>assistant\n"), t)
        self.assertIn("Name a colour.", t["prompt"])
        status, ids = self.srv.post("/tokenize", {"content": t["prompt"], "add_special": False})
        status, r = self.srv.post("/v1/chat/completions", {"messages": messages, "max_tokens": 1})
        self.assertEqual(len(ids["tokens"]), r["usage"]["prompt_tokens"])
        status, e = self.srv.post("/apply-template", {"messages": []})
        self.assertEqual((status, e["error"]["param"]), (400, "messages"))

    def test_tokenize_detokenize(self):
        text = "Hello world, héllo 🌍!"
        status, t = self.srv.post("/tokenize", {"content": text})
        self.assertEqual(status, 200, t)
        self.assertTrue(all(isinstance(i, int) for i in t["tokens"]))
        status, d = self.srv.post("/detokenize", {"tokens": t["tokens"]})
        self.assertEqual((status, d["content"]), (200, text))
        status, p = self.srv.post("/tokenize", {"content": "Hello world", "with_pieces": True})
        self.assertEqual([x["piece"] for x in p["tokens"]], ["Hello", " world"])
        self.assertEqual([x["id"] for x in p["tokens"]], [9707, 1879])
        for path, body, param in [("/tokenize", {"content": 5}, "content"), ("/tokenize", {}, "content"),
                                  ("/detokenize", {"tokens": [1, -3]}, "tokens"),
                                  ("/detokenize", {"tokens": [10**9]}, "tokens"), ("/detokenize", {}, "tokens"),
                                  ("/tokenize", {"content": "x", "with_pieces": 1}, "with_pieces")]:
            status, e = self.srv.post(path, body)
            self.assertEqual((status, e["error"]["param"]), (400, param), e)

    def test_chat_logprobs(self):
        body = chat("What is the capital of France?", logprobs=True, top_logprobs=3, max_tokens=10, ignore_eos=True)
        status, full = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, full)
        lp = full["choices"][0]["logprobs"]
        content = lp["content"]
        self.assertEqual(len(content), full["usage"]["completion_tokens"])
        self.assertEqual(b"".join(bytes(c["bytes"]) for c in content),
                         full["choices"][0]["message"]["content"].encode())
        for c in content:
            self.assertLessEqual(c["logprob"], 0.0)
            self.assertEqual(len(c["top_logprobs"]), 3)
            tops = [t["logprob"] for t in c["top_logprobs"]]
            self.assertEqual(tops, sorted(tops, reverse=True))
            # greedy: the chosen token is the most likely one
            self.assertEqual(c["top_logprobs"][0]["token"], c["token"])
            self.assertAlmostEqual(c["top_logprobs"][0]["logprob"], c["logprob"], places=5)
        # streamed: the same entries, spread over the chunks
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertTrue(done)
        streamed = [c for e in events for ch in e["choices"] if ch.get("logprobs") for c in ch["logprobs"]["content"]]
        self.assertEqual(streamed, content)
        self.assertEqual(deltas(events), full["choices"][0]["message"]["content"])
        # no logprobs asked: null
        status, plain = self.srv.post("/v1/chat/completions", chat("Hi"))
        self.assertIsNone(plain["choices"][0]["logprobs"])

    def test_completion_logprobs_match_pipit_logits(self):
        """The logprobs the server reports at temperature 1 (sampled, so not the argmax) are log_softmax of the
        logits `pipit logits` computes over prompt + answer."""
        prompt = [9707, 1879, 11, 1128, 374, 279]
        body = {"prompt": prompt, "max_tokens": 8, "temperature": 1.0, "seed": 7, "logprobs": 2, "ignore_eos": True}
        status, r = self.srv.post("/v1/completions", body)
        self.assertEqual(status, 200, r)
        lp = r["choices"][0]["logprobs"]
        n = len(lp["tokens"])
        self.assertEqual(len(lp["token_logprobs"]), n)
        self.assertEqual(lp["text_offset"][0], 0)
        self.assertEqual("".join(lp["tokens"]).encode("utf-8", "surrogateescape"),
                         r["choices"][0]["text"].encode("utf-8", "surrogateescape"))
        # the answer's ids: vLLM's return_tokens_as_token_ids names them
        status, r2 = self.srv.post("/v1/completions", dict(body, return_tokens_as_token_ids=True))
        lp2 = r2["choices"][0]["logprobs"]
        self.assertEqual(lp2["token_logprobs"], lp["token_logprobs"])
        self.assertEqual(lp2["text_offset"], lp["text_offset"])
        ids = [int(t.split(":")[1]) for t in lp2["tokens"]]
        ref = log_softmax(pipit_logits(prompt + ids))
        for i in range(n):
            want = ref[len(prompt) - 1 + i, ids[i]]
            self.assertEqual(sorted(int(k.split(":")[1]) for k in lp2["top_logprobs"][i]),
                             sorted(np.argsort(-ref[len(prompt) - 1 + i])[:2].tolist()))
            self.assertAlmostEqual(lp["token_logprobs"][i], want, delta=1e-3, msg=f"token {i}")
            top = sorted(lp["top_logprobs"][i].values(), reverse=True)
            want_top = np.sort(ref[len(prompt) - 1 + i])[::-1][:2]
            np.testing.assert_allclose(top, want_top, atol=1e-3)
        # streamed completions carry the same lists per chunk, offsets continuing
        status, events, done, _ = self.srv.stream("/v1/completions", dict(body, stream=True))
        toks, offs = [], []
        for e in events:
            for ch in e["choices"]:
                if ch.get("logprobs"):
                    toks += ch["logprobs"]["tokens"]
                    offs += ch["logprobs"]["text_offset"]
        self.assertEqual((toks, offs), (lp["tokens"], lp["text_offset"]))

    def test_n_choices_and_seed(self):
        body = chat("Write a haiku about the sea.", temperature=1.0, seed=42, max_tokens=10, n=3)
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        self.assertEqual([c["index"] for c in r["choices"]], [0, 1, 2])
        texts = [c["message"]["content"] for c in r["choices"]]
        # choice i is what a single request with seed + i gives
        for i in range(3):
            status, one = self.srv.post("/v1/chat/completions", dict(body, n=1, seed=42 + i))
            self.assertEqual(one["choices"][0]["message"]["content"], texts[i])
        self.assertGreater(len(set(texts)), 1, texts)
        single = [self.srv.post("/v1/chat/completions", dict(body, n=1, seed=42 + i))[1]["usage"]["completion_tokens"]
                  for i in range(3)]
        self.assertEqual(r["usage"]["completion_tokens"], sum(single))
        # streamed: each index's deltas add up to its choice, each ends with a finish_reason
        status, events, done, _ = self.srv.stream(
            "/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}))
        self.assertTrue(done)
        per = {}
        fins = {}
        for e in events:
            for ch in e["choices"]:
                per[ch["index"]] = per.get(ch["index"], "") + (ch["delta"].get("content") or "")
                if ch["finish_reason"]:
                    fins[ch["index"]] = ch["finish_reason"]
        self.assertEqual([per[i] for i in range(3)], texts)
        self.assertEqual(sorted(fins), [0, 1, 2])
        for u in (events[-1]["usage"], r["usage"]):  # the streamed request found the prompt in the prompt cache
            u.pop("prompt_tokens_details")
        self.assertEqual(events[-1]["usage"], r["usage"])

    def test_embeddings_need_a_pooling_config(self):
        status, e = self.srv.post("/v1/embeddings", {"input": "hello"})
        self.assertEqual(status, 400)
        self.assertEqual(e["error"]["param"], "model")
        self.assertIn("pooling", e["error"]["message"])


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer"},
    "member": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 3}},
    "required": ["name", "age", "color"]}


class Structured(ServerCase):
    """Tool calls and structured output on the tiny random model: it never calls a tool or writes JSON by itself,
    so calls are forced with tool_choice (a grammar) and JSON with response_format; the answers are checked."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "4", "--ctx", "1024")

    def test_tool_call_round_trip(self):
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        body = {"messages": messages, "tools": [WEATHER, TIME], "max_tokens": 120, "temperature": 0,
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        ch = r["choices"][0]
        self.assertEqual(ch["finish_reason"], "tool_calls", ch)
        calls = ch["message"]["tool_calls"]
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0]["type"], "function")
        self.assertTrue(calls[0]["id"].startswith("call_"))
        self.assertEqual(calls[0]["function"]["name"], "get_weather")
        args = json.loads(calls[0]["function"]["arguments"])
        jsonschema.validate(args, WEATHER["function"]["parameters"])
        self.assertEqual(list(args), ["city", "unit"])  # the schema's order
        self.assertIsNone(ch["message"]["content"])
        # streamed: the call arrives as OpenAI sends it (id/type/name, then the arguments), same call
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertTrue(done)
        tc = [c["delta"]["tool_calls"][0] for e in events for c in e["choices"] if c["delta"].get("tool_calls")]
        self.assertEqual(len(tc), 2, events)
        self.assertEqual((tc[0]["index"], tc[0]["type"], tc[0]["function"]), (0, "function", {"name": "get_weather", "arguments": ""}))
        self.assertTrue(tc[0]["id"].startswith("call_"))
        self.assertEqual(tc[1]["function"]["arguments"], calls[0]["function"]["arguments"])
        self.assertEqual([c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]], ["tool_calls"])
        self.assertEqual(deltas(events), "")
        # the result goes back as a tool message; the model answers (with tool_choice none it is not parsed)
        messages += [ch["message"], {"role": "tool", "tool_call_id": calls[0]["id"], "content": '{"temp": 21}'}]
        for choice in ("auto", "none"):
            status, r2 = self.srv.post("/v1/chat/completions", {"messages": messages, "tools": [WEATHER, TIME],
                                                                "tool_choice": choice, "max_tokens": 8,
                                                                "temperature": 0})
            self.assertEqual(status, 200, r2)
            self.assertIn(r2["choices"][0]["finish_reason"], ("stop", "length", "tool_calls"))
        # the history changes the prompt: the tool result is rendered
        status, short = self.srv.post("/v1/chat/completions", {"messages": messages[:1], "max_tokens": 1})
        self.assertGreater(r2["usage"]["prompt_tokens"], short["usage"]["prompt_tokens"] + 20)
        # required: one of the tools, any
        status, r3 = self.srv.post("/v1/chat/completions", dict(body, tool_choice="required", temperature=1.0, seed=3))
        self.assertEqual(status, 200, r3)
        self.assertIn(r3["choices"][0]["message"]["tool_calls"][0]["function"]["name"], ("get_weather", "get_time"))

    def test_json_schema_answers_always_validate(self):
        """50 sampled answers (temperature 1, 5 requests of n = 10) all parse and validate."""
        body = {"messages": [{"role": "user", "content": "Describe a person as JSON."}], "temperature": 1.0,
                "max_tokens": 200, "n": 10,
                "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
        n = 0
        for seed in range(5):
            status, r = self.srv.post("/v1/chat/completions", dict(body, seed=100 * seed))
            self.assertEqual(status, 200, r)
            for ch in r["choices"]:
                self.assertEqual(ch["finish_reason"], "stop", ch)
                doc = json.loads(ch["message"]["content"])
                jsonschema.validate(doc, PERSON)
                n += 1
        self.assertEqual(n, 50)
        # streamed: the deltas add up to a valid document too
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, n=1, seed=9, stream=True))
        jsonschema.validate(json.loads(deltas(events)), PERSON)

    def test_zod_style_keywords_validate(self):
        """What zod emits for .email() / .uuid() / .datetime() / .date() / .regex() / .int().min().max(), number
        bounds, z.tuple (prefixItems) and z.record (propertyNames + additionalProperties): 5 sampled answers, each
        valid under jsonschema with its format checker, and each pattern checked with Python's re."""
        schema = {"type": "object", "properties": {
            "email": {"type": "string", "format": "email"},
            "id": {"type": "string", "format": "uuid"},
            "when": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2}$"},
            "age": {"type": "integer", "minimum": 18, "maximum": 99},
            "score": {"type": "number", "minimum": 0, "exclusiveMaximum": 5},
            "pair": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 5}, {"type": "integer"}],
                     "minItems": 2, "maxItems": 2},
            "counts": {"type": "object", "propertyNames": {"pattern": "^[a-z]{1,6}$"},
                       "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 9}}},
            "required": ["email", "id", "when", "day", "code", "age", "score", "pair", "counts"],
            "additionalProperties": False}
        body = {"messages": [{"role": "user", "content": "Fill the form."}], "temperature": 1.0, "max_tokens": 600,
                "n": 5, "seed": 11,
                "response_format": {"type": "json_schema", "json_schema": {"name": "form", "schema": schema}}}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
        for ch in r["choices"]:
            self.assertEqual(ch["finish_reason"], "stop", ch)
            doc = json.loads(ch["message"]["content"])
            checker.validate(doc)
            self.assertRegex(doc["code"], r"^[A-Z]{3}-\d{2}$")
            self.assertRegex(doc["when"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
            uuid.UUID(doc["id"])
            datetime.date.fromisoformat(doc["day"])

    def test_json_object_and_gbnf_grammar(self):
        body = {"messages": [{"role": "user", "content": "Answer in JSON."}], "temperature": 0.8, "seed": 5,
                "max_tokens": 60, "response_format": {"type": "json_object"}}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        text = r["choices"][0]["message"]["content"]
        self.assertTrue(text.startswith("{"), text)
        if r["choices"][0]["finish_reason"] == "stop":
            self.assertIsInstance(json.loads(text), dict)
        # a llama.cpp-style GBNF grammar, on completions too
        for path, extra in [("/v1/chat/completions", {"messages": [{"role": "user", "content": "Yes or no?"}]}),
                            ("/v1/completions", {"prompt": "Yes or no?"})]:
            for seed in range(4):
                status, r = self.srv.post(path, dict(extra, grammar='root ::= ("yes" | "no") " " [0-9]{2}',
                                                     temperature=1.0, seed=seed, max_tokens=10))
                self.assertEqual(status, 200, r)
                ch = r["choices"][0]
                text = ch["message"]["content"] if "message" in ch else ch["text"]
                self.assertRegex(text, r"^(yes|no) [0-9]{2}$")
                self.assertEqual(ch["finish_reason"], "stop")

    def test_bad_structured_requests_name_the_field(self):
        base = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        cases = [
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object", "properties": {
                "a": {"type": "string", "pattern": "^(?!x)"}}}}}}, "response_format.json_schema.schema", "pattern"),
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer",
                "multipleOf": 5}}}}, "response_format.json_schema.schema", "multipleOf"),
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nmber"}}}},
             "response_format.json_schema.schema", "nmber"),
            ({"response_format": {"type": "json_schema", "json_schema": {"schema": "x"}}},
             "response_format.json_schema.schema", None),
            ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "launch"}}},
             "tool_choice", "launch"),
            ({"tools": [WEATHER], "tool_choice": "maybe"}, "tool_choice", None),
            ({"tool_choice": "required"}, "tool_choice", None),
            ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"a": {"not": {}}}}}}], "tool_choice": "required"},
             "tools[0].function.parameters", "not"),
            ({"tools": [{"type": "function"}]}, "tools[0].function", None),
            ({"grammar": 'root ::= "a" root'}, "grammar", "cannot match"),
            ({"grammar": "root ::= [z-a]"}, "grammar", None),
            ({"grammar": "root ::= undefined-rule"}, "grammar", "never defined"),
            ({"grammar": 5}, "grammar", None),
        ]
        for extra, param, needle in cases:
            with self.subTest(extra=extra):
                status, e = self.srv.post("/v1/chat/completions", dict(base, **extra))
                self.assertEqual(status, 400, e)
                self.assertEqual(e["error"]["param"], param, e)
                if needle:
                    self.assertIn(needle, e["error"]["message"])


class SamplingFields(ServerCase):
    """logit_bias (through the one token path: bans, +100 forcing, under a grammar too), reasoning_content for the
    Qwen3 template's <think> part (made deterministic with a grammar: the random model never thinks by itself),
    forced parallel tool calls, and the legacy function-calling fields refused by name."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "2", "--ctx", "1024")

    def ids(self, body):
        """The generated token ids of a chat request (logprobs named as token ids)."""
        status, r = self.srv.post("/v1/chat/completions", dict(body, logprobs=True, return_tokens_as_token_ids=True))
        self.assertEqual(status, 200, r)
        return [int(t["token"].split(":")[1]) for t in r["choices"][0]["logprobs"]["content"]], r

    def test_logit_bias_bans_and_forces(self):
        base = chat("Tell me a story about a cat.", max_tokens=12, ignore_eos=True)
        plain, _ = self.ids(base)
        banned = {str(t): -100 for t in plain}
        got, r = self.ids(dict(base, logit_bias=banned))
        self.assertEqual(len(got), 12)
        self.assertFalse(set(got) & set(plain), (plain, got))  # not one of the greedy answer's tokens
        # sampled too (temperature 1, no truncation): the banned tokens never come
        for seed in range(3):
            got, _ = self.ids(dict(base, temperature=1.0, top_p=1.0, seed=seed, logit_bias=banned))
            self.assertFalse(set(got) & set(plain), (seed, plain, got))
        # +100 forces a token whatever the model says, sampled or greedy; logprobs stay the model's own
        forced = 12095
        for extra in ({}, {"temperature": 1.0, "seed": 4}):
            got, r = self.ids(dict(base, logit_bias={str(forced): 100}, **extra))
            self.assertEqual(got, [forced] * 12, extra)
            self.assertLess(r["choices"][0]["logprobs"]["content"][0]["logprob"], -1.0)
        # under a grammar: a bias on an allowed token moves the answer to the other choice (a ban would not: the
        # grammar can spell the word with other tokens)
        g = 'root ::= ("yes" | "no")'
        status, r = self.srv.post("/v1/chat/completions", dict(base, grammar=g))
        first = r["choices"][0]["message"]["content"]
        other = {"yes": "no", "no": "yes"}[first]
        status, t = self.srv.post("/tokenize", {"content": other})
        self.assertEqual(len(t["tokens"]), 1)
        status, r = self.srv.post("/v1/chat/completions",
                                  dict(base, grammar=g, logit_bias={str(t["tokens"][0]): 100}))
        self.assertEqual((status, r["choices"][0]["message"]["content"]), (200, other), r)

    def test_bad_logit_bias_and_function_fields_are_refused_by_name(self):
        for extra, param in [({"logit_bias": {"abc": 1}}, "logit_bias"), ({"logit_bias": {"5": 101}}, "logit_bias"),
                             ({"logit_bias": {"-1": 1}}, "logit_bias"), ({"logit_bias": {"999999999": 1}}, "logit_bias"),
                             ({"logit_bias": {"5": "x"}}, "logit_bias"), ({"logit_bias": [1]}, "logit_bias"),
                             ({"reasoning_format": "maybe"}, "reasoning_format"),
                             ({"functions": [WEATHER["function"]], "tools": [WEATHER]}, "functions"),
                             ({"function_call": "auto"}, "function_call"),
                             ({"messages": [{"role": "function", "content": "21"}]}, "messages[0].name"),
                             ({"functions": {"name": "f"}}, "functions"),
                             ({"functions": [{"name": "f", "parameters": 5}]}, "functions[0].function.parameters"),
                             ({"functions": [WEATHER["function"]], "function_call": {"name": "launch"}},
                              "function_call")]:
            with self.subTest(extra=extra):
                status, e = self.srv.post("/v1/chat/completions", chat("hi", **extra))
                self.assertEqual((status, e["error"]["param"]), (400, param), e)
        status, r = self.srv.post("/v1/completions", {"prompt": "Hi", "max_tokens": 2, "logit_bias": {"0": 5}})
        self.assertEqual(status, 200, r)

    def test_reasoning_content_split_off_and_streamed(self):
        g = 'root ::= "<think>\\n" ("yes" | "no") " maybe\\n</think>\\n\\n" "final " [ab]'
        body = chat("Think first.", grammar=g, max_tokens=40)
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        msg = r["choices"][0]["message"]
        self.assertIn(msg["reasoning_content"], ("yes maybe", "no maybe"), msg)
        self.assertRegex(msg["content"], r"^final [ab]$")
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        self.assertTrue(done)
        thought = "".join(c["delta"].get("reasoning_content", "") for e in events for c in e["choices"])
        self.assertEqual((thought, deltas(events)), (msg["reasoning_content"], msg["content"]))
        self.assertTrue(any("reasoning_content" in c["delta"] and "content" not in c["delta"]
                            for e in events for c in e["choices"]))  # its own deltas, before the content
        # kept inline on request
        status, r = self.srv.post("/v1/chat/completions", dict(body, reasoning_format="none"))
        inline = r["choices"][0]["message"]
        self.assertNotIn("reasoning_content", inline)
        self.assertEqual(inline["content"], f"<think>\n{msg['reasoning_content']}\n</think>\n\n{msg['content']}")
        # an assistant turn's reasoning_content is given to the template (Qwen3's renders it for the last turn)
        turn = {"role": "assistant", "content": "final a", "reasoning_content": "long thought " * 20}
        status, a = self.srv.post("/v1/chat/completions", chat("x", max_tokens=1, messages=[
            {"role": "user", "content": "q"}, turn, {"role": "user", "content": "r"}]))
        status, b = self.srv.post("/v1/chat/completions", chat("x", max_tokens=1, messages=[
            {"role": "user", "content": "q"}, dict(turn, reasoning_content=""), {"role": "user", "content": "r"}]))
        self.assertEqual((status, a["usage"]["prompt_tokens"] >= b["usage"]["prompt_tokens"]), (200, True))

    def test_legacy_function_calling_round_trip(self):
        """functions / function_call (the API before tools): mapped to one forced or allowed tool call, answered as
        message.function_call with finish_reason function_call, streamed as delta.function_call; the next turn's
        assistant function_call and role "function" message reach the template."""
        ask = [{"role": "user", "content": "What is the weather in Paris?"}]
        body = {"messages": ask, "functions": [WEATHER["function"], TIME["function"]], "temperature": 0,
                "max_tokens": 120, "function_call": {"name": "get_weather"}}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        ch = r["choices"][0]
        self.assertEqual(ch["finish_reason"], "function_call", ch)
        self.assertNotIn("tool_calls", ch["message"])
        fc = ch["message"]["function_call"]
        self.assertEqual(fc["name"], "get_weather")
        jsonschema.validate(json.loads(fc["arguments"]), WEATHER["function"]["parameters"])
        status, events, done, _ = self.srv.stream("/v1/chat/completions", dict(body, stream=True))
        parts = [c["delta"]["function_call"] for e in events for c in e["choices"] if "function_call" in c["delta"]]
        self.assertEqual(parts[0], {"name": "get_weather", "arguments": ""})
        self.assertEqual("".join(p.get("arguments", "") for p in parts), fc["arguments"])
        self.assertEqual([c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]],
                         ["function_call"])
        turn = ask + [{"role": "assistant", "content": None, "function_call": fc},
                      {"role": "function", "name": "get_weather", "content": '{"temp": 21}'}]
        status, r2 = self.srv.post("/v1/chat/completions", {"messages": turn, "functions": [WEATHER["function"]],
                                                            "function_call": "none", "max_tokens": 4})
        self.assertEqual(status, 200, r2)
        status, r1 = self.srv.post("/v1/chat/completions", {"messages": ask, "max_tokens": 1})
        self.assertGreater(r2["usage"]["prompt_tokens"], r1["usage"]["prompt_tokens"] + 20)  # the call and result

    def test_required_tool_choice_returns_parallel_calls(self):
        unit = {"type": "function", "function": {"name": "set_unit", "parameters": {
            "type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"],
            "additionalProperties": False}}}
        body = {"messages": [{"role": "user", "content": "Set both units."}], "tools": [unit, WEATHER],
                "tool_choice": "required", "temperature": 0, "max_tokens": 150, "ignore_eos": True}
        status, r = self.srv.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, r)
        calls = r["choices"][0]["message"]["tool_calls"]
        self.assertGreaterEqual(len(calls), 2, r)
        for c in calls:
            self.assertIn(c["function"]["name"], ("set_unit", "get_weather"))
            json.loads(c["function"]["arguments"])
        status, r = self.srv.post("/v1/chat/completions", dict(body, parallel_tool_calls=False))
        self.assertEqual(len(r["choices"][0]["message"]["tool_calls"]), 1, r)
        self.assertEqual(r["choices"][0]["finish_reason"], "tool_calls")


class Embeddings(unittest.TestCase):
    """qwen3_chat with a sentence-transformers pooling config next to it (files linked into a temp folder)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dirs = {}
        for mode, normalize in [("mean", False), ("lasttoken", True)]:
            d = os.path.join(cls.tmp.name, mode)
            os.makedirs(os.path.join(d, "1_Pooling"))
            for f in os.listdir(MODEL):
                os.symlink(os.path.abspath(os.path.join(MODEL, f)), os.path.join(d, f))
            modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                       {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
            if normalize:
                modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                                "type": "sentence_transformers.models.Normalize"})
            with open(os.path.join(d, "modules.json"), "w") as f:
                json.dump(modules, f)
            with open(os.path.join(d, "1_Pooling", "config.json"), "w") as f:
                json.dump({"word_embedding_dimension": 64, "pooling_mode_mean_tokens": mode == "mean",
                           "pooling_mode_lasttoken": mode == "lasttoken", "pooling_mode_cls_token": False}, f)
            cls.dirs[mode] = d
        w = read_safetensors(os.path.join(MODEL, "model.safetensors"))
        cls.E = w["model.embed_tokens.weight"].astype(np.float64)  # tied: the output head

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, mode, normalize):
        srv = Server(PIPIT, self.dirs[mode], "--ctx", "256")
        try:
            texts = ["The quick brown fox", "jumps over the lazy dog, twice."]
            status, r = srv.post("/v1/embeddings", {"input": texts, "model": "emb"})
            self.assertEqual(status, 200, r)
            self.assertEqual([d["index"] for d in r["data"]], [0, 1])
            status, m = srv.get("/v1/models")
            self.assertTrue(m["data"][0]["meta"]["embeddings"])
            n_tokens = 0
            for text, d in zip(texts, r["data"]):
                v = np.asarray(d["embedding"], dtype=np.float64)
                self.assertEqual(v.shape, (64,))
                ids = srv.post("/tokenize", {"content": text, "add_special": True})[1]["tokens"]
                n_tokens += len(ids)
                logits = pipit_logits(ids)
                want = logits.mean(axis=0) if mode == "mean" else logits[-1]
                got = self.E @ v
                if normalize:  # the pooled vector was scaled to unit length: compare directions
                    self.assertAlmostEqual(float(np.linalg.norm(v)), 1.0, places=5)
                    got = got * (np.linalg.norm(want) / np.linalg.norm(got))
                err = np.abs(got - want).max() / np.abs(want).max()
                self.assertLess(err, 2e-2, f"{mode}: relative error {err}")
            self.assertEqual(r["usage"]["prompt_tokens"], n_tokens)
            # base64: the same float32 values
            status, b = srv.post("/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})
            import base64
            v64 = np.frombuffer(base64.b64decode(b["data"][0]["embedding"]), dtype=np.float32)
            np.testing.assert_array_equal(v64, np.asarray(r["data"][0]["embedding"], dtype=np.float32))
            # token-id input equals text input
            ids = srv.post("/tokenize", {"content": texts[0], "add_special": True})[1]["tokens"]
            status, t = srv.post("/v1/embeddings", {"input": ids})
            np.testing.assert_allclose(t["data"][0]["embedding"], r["data"][0]["embedding"], rtol=0, atol=1e-6)
            for body, param in [({}, "input"), ({"input": ""}, "input"), ({"input": [[1, -2]]}, "input"),
                                ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
                                ({"input": "x", "dimensions": 3}, "dimensions"), ({"input": {}}, "input")]:
                status, e = srv.post("/v1/embeddings", body)
                self.assertEqual((status, e["error"]["param"]), (400, param), (body, e))
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_mean_pooling(self):
        self.check("mean", False)

    def test_last_token_pooling_normalized(self):
        self.check("lasttoken", True)


class BadGenerationConfig(unittest.TestCase):
    """A generation_config.json with defaults out of a request's range (temperature 5, top_k -3) once made every
    request that did not set them a 400; they are dropped for OpenAI's defaults, with a line at start."""

    def test_out_of_range_defaults_are_dropped(self):
        with tempfile.TemporaryDirectory() as d:
            for f in os.listdir(MODEL):
                if f != "generation_config.json":
                    os.symlink(os.path.abspath(os.path.join(MODEL, f)), os.path.join(d, f))
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                json.dump({"temperature": 5.0, "top_k": -3, "top_p": 0.9, "do_sample": True}, f)
            srv = Server(PIPIT, d)
            try:
                body = chat("Hi", max_tokens=4)
                del body["temperature"]  # the request sets no sampling field: the defaults apply
                status, r = srv.post("/v1/chat/completions", body)
                self.assertEqual(status, 200, r)
                out = srv.output()
                self.assertIn("generation_config.json: temperature 5.0 is out of range", out)
                self.assertIn("generation_config.json: top_k -3 is out of range", out)
                status, r = srv.post("/v1/chat/completions", chat("Hi", max_tokens=4, temperature=3))
                self.assertEqual((status, r["error"]["param"]), (400, "temperature"), r)
            finally:
                self.assertEqual(srv.stop(), 0)


class ModelFileChanged(unittest.TestCase):
    """The model file truncated in place under a running server: requests get a 503 naming the file (a forward pass
    over the truncated mapping would kill the server with SIGBUS), and the server keeps answering /health."""

    def test_truncated_weights_are_refused(self):
        import shutil
        with tempfile.TemporaryDirectory() as d:
            for f in os.listdir(MODEL):
                shutil.copy(os.path.join(MODEL, f), os.path.join(d, f))
            srv = Server(PIPIT, d)
            try:
                status, r = srv.post("/v1/chat/completions", chat("Hi", max_tokens=4))
                self.assertEqual(status, 200, r)
                weights = os.path.join(d, "model.safetensors")
                os.truncate(weights, os.path.getsize(weights) // 2)
                status, r = srv.post("/v1/chat/completions", chat("Hi", max_tokens=4))
                self.assertEqual(status, 503, r)
                self.assertIn("model.safetensors' changed on disk", r["error"]["message"])
                self.assertTrue(srv.alive())
                status, h = srv.get("/health")
                self.assertEqual(status, 200, h)
            finally:
                self.assertEqual(srv.stop(), 0)


class CrowdedWorkers(unittest.TestCase):
    """Issue 35.8: sockets that trickle their request heads from several addresses (each under the per-address cap)
    held every HTTP worker for the whole head timeout, so /health waited. Once 3/4 of the workers are held, a
    connection still sending its head (or idle) gets 1 s: the health check is answered within a few seconds."""

    def test_trickling_heads_from_many_addresses(self):
        import socket
        import threading
        import time
        srv = Server(PIPIT, MODEL, "--http-threads", "16", "--max-conns-per-client", "8", "--read-timeout", "30")
        socks, stop = [], threading.Event()
        try:
            for i in range(16):  # 4 addresses x 4 sockets: every worker
                s = socket.socket()
                s.bind(("127.0.0.%d" % (2 + i % 4), 0))
                s.connect((srv.host, srv.port))
                s.sendall(b"GET /health HTTP/1.1\r\n")
                socks.append(s)

            def trickle():  # one header byte per socket every 0.3 s, reconnecting what the server closes
                while not stop.is_set():
                    for k, s in enumerate(socks):
                        try:
                            s.sendall(b"X")
                        except OSError:
                            n = socket.socket()
                            try:
                                n.bind(("127.0.0.%d" % (2 + k % 4), 0))
                                n.connect((srv.host, srv.port))
                                n.sendall(b"GET /health HTTP/1.1\r\n")
                                socks[k] = n
                            except OSError:
                                pass
                    stop.wait(0.3)

            t = threading.Thread(target=trickle, daemon=True)
            t.start()
            time.sleep(0.5)
            t0 = time.time()
            status, h = srv.get("/health")
            took = time.time() - t0
            self.assertEqual(status, 200, h)
            print("health answered in %.2f s" % took)
            self.assertLess(took, 6.0, "the health check waited %.1f s behind trickling sockets" % took)
            stop.set()
            t.join()
        finally:
            stop.set()
            for s in socks:
                s.close()
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    PIPIT = sys.argv[1]
    MODEL = os.path.join(sys.argv[2], "qwen3_chat")
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)

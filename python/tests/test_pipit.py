#!/usr/bin/env python3
"""Tests of the pipit Python package (ctest python_api): generation equals the goldens, numpy logits equal the C++
path (`pipit logits`), a Qwen3 written with pipit.ops in Python reproduces the golden logits, the streaming callback
sees every piece in order, chat with images equals `pipit run --image` (and Qwen3.5 with a video `pipit run
--video`), Gemma 4 audio from a file, bytes or samples gives the golden ids, and bad input raises Python
exceptions.

Usage: test_pipit.py PIPIT_BIN TESTDATA_DIR SERVER_MODELS_DIR    (PYTHONPATH must hold build/python)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import pipit
from pipit import ops

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
import qwen3_eager  # noqa: E402

PIPIT, TESTDATA, SERVER_MODELS = sys.argv[1:4] if len(sys.argv) >= 4 else ("", "", "")
MODELS = os.path.join(TESTDATA, "models")


def golden(name, file="golden.safetensors"):
    return {k: t.numpy() for k, t in pipit.load_safetensors(os.path.join(MODELS, name, file)).items()}


def read_f32_safetensors(path):
    return {k: t.numpy() for k, t in pipit.load_safetensors(path).items()}


class Generation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = pipit.Model(os.path.join(MODELS, "stories260k"), n_threads=2)

    def test_stories_golden_text(self):
        g = golden("stories260k")
        prompt = g["input_ids"][0].tolist()
        want = g["greedy_ids"][0].tolist()
        c = self.m.generate(prompt, max_tokens=len(want), temperature=0, ignore_eos=True)
        self.assertEqual(c.tokens, want)
        self.assertEqual(c.text, self.m.detokenize(want))
        self.assertEqual(c.finish_reason, "length")
        # from text, as `python3 -c "import pipit; ..."` does it: the README's story
        text = self.m.generate("Once upon a time", max_tokens=24, temperature=0).text
        self.assertTrue(text.startswith(", there was a little girl named Lily"), text)

    def test_tokenize_roundtrip(self):
        ids = self.m.tokenize("Once upon a time")
        self.assertEqual(ids[0], self.m.bos_id)
        self.assertEqual(self.m.detokenize(ids, skip_special=True), "Once upon a time")

    def test_streaming_callback_order(self):
        seen = []
        c = self.m.generate("Once upon a time", max_tokens=20, temperature=0,
                            on_text=lambda piece, tok: seen.append((piece, tok)))
        self.assertEqual([t for _, t in seen], c.tokens)
        self.assertEqual("".join(p for p, _ in seen), c.text)
        # returning False stops at that token
        n = []
        c2 = self.m.generate("Once upon a time", max_tokens=20, temperature=0,
                             on_text=lambda piece, tok: n.append(tok) or len(n) < 5)
        self.assertEqual(len(n), 5)
        self.assertEqual(c2.tokens, c.tokens[:5])

    def test_stop_string_and_sampling_seed(self):
        c = self.m.generate("Once upon a time", max_tokens=40, temperature=0, stop=["Lily"])
        self.assertEqual(c.finish_reason, "stop")
        self.assertNotIn("Lily", c.text)
        a = self.m.generate("Once upon a time", max_tokens=16, temperature=1.0, seed=7).tokens
        b = self.m.generate("Once upon a time", max_tokens=16, temperature=1.0, seed=7).tokens
        self.assertEqual(a, b)

    def test_default_seed_and_generation_config(self):
        # no seed: a new one per call, reported; passing it back gives the same tokens
        a = self.m.generate("Once upon a time", max_tokens=24, temperature=1.0)
        b = self.m.generate("Once upon a time", max_tokens=24, temperature=1.0)
        self.assertNotEqual(a.seed, b.seed)
        self.assertEqual(self.m.generate("Once upon a time", max_tokens=24, temperature=1.0, seed=a.seed).tokens,
                         a.tokens)
        # sampling left unset takes the model's generation_config.json: do_sample false -> greedy
        with tempfile.TemporaryDirectory() as d:
            st = os.path.join(MODELS, "stories260k")
            for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
                if os.path.exists(os.path.join(st, name)):
                    os.symlink(os.path.join(st, name), os.path.join(d, name))
            with open(os.path.join(d, "generation_config.json"), "w") as f:
                json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, f)
            m = pipit.Model(d, n_threads=2)
            greedy = self.m.generate("Once upon a time", max_tokens=24, temperature=0).tokens
            for seed in (1, 2):
                self.assertEqual(m.generate("Once upon a time", max_tokens=24, seed=seed).tokens, greedy)
            self.assertNotEqual(m.generate("Once upon a time", max_tokens=24, temperature=1.0, seed=2).tokens,
                                greedy)

    def test_logit_bias(self):
        plain = self.m.generate("Once upon a time", max_tokens=16, temperature=0).tokens
        banned = self.m.generate("Once upon a time", max_tokens=16, temperature=0, logit_bias={plain[0]: -100})
        self.assertNotIn(plain[0], banned.tokens)
        forced = self.m.generate("Once upon a time", max_tokens=8, temperature=0, logit_bias={300: 100})
        self.assertEqual(forced.tokens, [300] * 8)
        with self.assertRaises(ValueError):
            self.m.generate("x", max_tokens=2, logit_bias={512: 1})
        with self.assertRaises(ValueError):
            self.m.generate("x", max_tokens=2, logit_bias={5: 101})

    def test_lookup_keeps_seeded_tokens(self):
        # speculative decoding by prompt lookup: the same tokens as plain decoding, greedy and seeded
        prompt = "Once upon a time, there was a little girl. Once upon a time, there was a little"
        accepted = 0
        for seed in (1, 2, 3):
            for temp in (0.0, 0.8):
                plain = self.m.generate(prompt, max_tokens=40, temperature=temp, top_k=0, seed=seed)
                spec = self.m.generate(prompt, max_tokens=40, temperature=temp, top_k=0, seed=seed, lookup=4)
                self.assertEqual(spec.tokens, plain.tokens, (seed, temp))
                self.assertGreater(spec.drafted, 0)
                accepted += spec.accepted
        self.assertGreater(accepted, 0)

    def test_mtp_keeps_seeded_tokens(self):
        # speculative decoding with the model's own MTP head (Qwen3.5's mtp.*): the tiny golden checkpoint with
        # stories260k's tokenizer (the same 512-id vocabulary size) linked beside it
        with tempfile.TemporaryDirectory() as d:
            q, st = os.path.join(MODELS, "qwen3_5_vl"), os.path.join(MODELS, "stories260k")
            for src, name in ((q, "config.json"), (q, "model.safetensors"), (st, "tokenizer.json")):
                os.symlink(os.path.join(src, name), os.path.join(d, name))
            m = pipit.Model(d, n_threads=2, kv_type="f32")
            s_plain, s_mtp = m.session(), m.session()
            for temp in (0.0, 0.8):
                for k in (1, 3):
                    plain = m.generate("Once upon a time", max_tokens=32, temperature=temp, seed=5)
                    spec = m.generate("Once upon a time", max_tokens=32, temperature=temp, seed=5, mtp=k)
                    self.assertEqual(spec.tokens, plain.tokens, (temp, k))
                    self.assertGreater(spec.drafted, 0)
                # a session over two turns: the head follows its context
                a = s_plain.generate("Once upon a time", max_tokens=16, temperature=temp, seed=5).tokens
                b = s_mtp.generate("Once upon a time", max_tokens=16, temperature=temp, seed=5, mtp=1).tokens
                self.assertEqual(a, b)
                a = s_plain.generate(" the dog", max_tokens=16, temperature=temp, seed=6).tokens
                b = s_mtp.generate(" the dog", max_tokens=16, temperature=temp, seed=6, mtp=1).tokens
                self.assertEqual(a, b)
            with self.assertRaises(pipit.Error):
                self.m.generate("x", max_tokens=4, mtp=1)  # stories260k has no MTP head

    def test_grammar_json_schema_and_logprobs(self):
        c = self.m.generate("Once upon a time", max_tokens=32, seed=3, grammar='root ::= "yes" | "no"')
        self.assertIn(c.text, ("yes", "no"))
        self.assertEqual(c.finish_reason, "stop")
        schema = {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}}, "required": ["mood"],
                  "additionalProperties": False}
        c = self.m.generate("Once upon a time", max_tokens=64, seed=5, json_schema=schema)
        self.assertEqual(c.finish_reason, "stop", c.text)
        self.assertIn(json.loads(c.text)["mood"], ("happy", "sad"))
        with self.assertRaises(pipit.Error):
            self.m.generate("Once", grammar="root ::= (")
        c = self.m.generate("Once upon a time", max_tokens=6, temperature=0, logprobs=3)
        self.assertEqual(len(c.logprobs), len(c.tokens))
        for tok, (t, lp, top) in zip(c.tokens, c.logprobs):
            self.assertEqual(t, tok)
            self.assertEqual(len(top), 3)
            self.assertEqual(top[0][0], tok)  # greedy: the most likely one
            self.assertLessEqual(lp, 0.0)

    def test_session_continues(self):
        s = self.m.session(n_ctx=128)
        ids = self.m.tokenize("Once upon a time")
        last = s.eval(ids)
        self.assertEqual(last.shape, (1, self.m.n_vocab))
        self.assertEqual(s.n_past, len(ids))
        full = self.m.logits(ids)
        np.testing.assert_array_equal(last[0], full[-1])
        c = s.generate(", there", max_tokens=4, temperature=0)
        self.assertEqual(s.n_past, len(ids) + len(self.m.tokenize(", there", add_special=False)) + 3)
        self.assertEqual(len(c.tokens), 4)


class Logits(unittest.TestCase):
    def test_equal_to_cli_and_golden(self):
        for name in ("qwen3", "llama"):
            g = golden(name)
            m = pipit.Model(os.path.join(MODELS, name), n_threads=2, kv_type="f32")  # the goldens' exact path
            got = m.logits(g["input_ids"][0])
            self.assertEqual(got.shape, g["logits"][0].shape)
            self.assertLessEqual(np.abs(got - g["logits"][0]).max(), 1e-3, name)
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "out.safetensors")
                subprocess.run([PIPIT, "logits", "-m", os.path.join(MODELS, name), "-t", "2", "--kv-type", "f32",
                                "--input", os.path.join(MODELS, name, "golden.safetensors"), "--output", out],
                               check=True)
                cli = read_f32_safetensors(out)["logits"][0]
            np.testing.assert_array_equal(got, cli)  # the same engine path: bit for bit


def cpu_has_bf16_dot():
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "bf16" in flags


class Precision(unittest.TestCase):
    def test_fast_is_bf16_within_bound(self):
        # the tiny llama checkpoint stores bf16 matrices: "fast" multiplies them with bf16 activations
        g = golden("llama")
        ids = g["input_ids"][0]
        exact = pipit.Model(os.path.join(MODELS, "llama"), n_threads=2, kv_type="f32").logits(ids)
        fast = pipit.Model(os.path.join(MODELS, "llama"), n_threads=2, kv_type="f32", precision="fast").logits(ids)
        ref = g["logits"][0]
        rel = lambda x: float(np.sqrt(np.mean((x - ref) ** 2) / np.mean(ref ** 2)))  # noqa: E731
        print(f"[precision] llama relative RMS logit error: exact {rel(exact):.2g}, fast {rel(fast):.2g}")
        self.assertLessEqual(rel(fast), 0.015)  # tests/models/precision_fast_test.cpp's bound
        if cpu_has_bf16_dot():
            self.assertGreater(np.abs(fast - exact).max(), 0.0)  # the option reached the loader
        with self.assertRaisesRegex(ValueError, "precision 'bf16'"):
            pipit.Model(os.path.join(MODELS, "llama"), precision="bf16")

    def test_mmap_gives_the_same_tokens(self):
        # mmap=True keeps the weights in the file mapping instead of copying them: same greedy tokens, same logits
        path = os.path.join(MODELS, "stories260k")
        copied, mapped = pipit.Model(path, n_threads=1), pipit.Model(path, n_threads=1, mmap=True)
        opts = dict(max_tokens=12, temperature=0)
        self.assertEqual(mapped.generate("Once upon a time", **opts).tokens,
                         copied.generate("Once upon a time", **opts).tokens)
        ids = [1, 403, 407, 261, 378]
        np.testing.assert_array_equal(mapped.logits(ids), copied.logits(ids))
        with self.assertRaisesRegex(ValueError, "mmap must be True or False"):
            pipit.Model(path, mmap="yes")


class EagerModel(unittest.TestCase):
    def test_python_qwen3_reproduces_golden(self):
        w, cfg = qwen3_eager.load(os.path.join(MODELS, "qwen3"))
        g = golden("qwen3")
        logits = qwen3_eager.forward(w, cfg, g["input_ids"][0])
        diff = np.abs(logits - g["logits"][0]).max()
        print(f"[eager qwen3] max |logits - golden| = {diff:.3g}")
        self.assertLessEqual(diff, 1e-3)
        # and the same numbers as the C++ model
        cpp = pipit.Model(os.path.join(MODELS, "qwen3"), n_threads=2, kv_type="f32").logits(g["input_ids"][0])
        self.assertLessEqual(np.abs(logits - cpp).max(), 1e-4)


class Ops(unittest.TestCase):
    rng = np.random.default_rng(0)

    def r(self, *shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def test_float_ops_match_numpy(self):
        x, w = self.r(5, 33), self.r(33)
        ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
        np.testing.assert_allclose(ops.rms_norm(x, w, 1e-6), ref, atol=1e-5)
        np.testing.assert_allclose(ops.rms_norm(x, w, 1e-6, offset=1.0), ref / w * (1 + w), atol=1e-5)
        b = self.r(33)
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        np.testing.assert_allclose(ops.layer_norm(x, w, b, 1e-5), (x - mu) / np.sqrt(var + 1e-5) * w + b, atol=1e-5)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(ops.softmax(x), e / e.sum(-1, keepdims=True), atol=1e-6)
        np.testing.assert_allclose(ops.silu(x), x / (1 + np.exp(-x)), atol=1e-5)
        np.testing.assert_allclose(ops.swiglu(x, w * np.ones_like(x)), x / (1 + np.exp(-x)) * w, atol=1e-5)
        from math import erf
        np.testing.assert_allclose(ops.gelu(x), 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2))), atol=1e-5)
        t = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
        np.testing.assert_allclose(ops.gelu_tanh(x), t, atol=1e-5)
        np.testing.assert_allclose(ops.quick_gelu(x), x / (1 + np.exp(-1.702 * x)), atol=1e-5)
        W, bias = self.r(7, 33), self.r(7)
        np.testing.assert_allclose(ops.matmul(x, W, bias), x @ W.T + bias, atol=1e-4)
        np.testing.assert_allclose(ops.matmul(x.reshape(1, 5, 33), W), (x @ W.T).reshape(1, 5, 7), atol=1e-4)
        table = self.r(10, 4)
        np.testing.assert_array_equal(ops.embedding(table, [3, 0, 9]), table[[3, 0, 9]])

    def test_rope_and_attention_match_numpy(self):
        n, H, Hkv, D = 6, 4, 2, 8
        x, pos = self.r(n, H, D), np.arange(3, 3 + n)
        inv = (1.0 / 10000 ** (np.arange(0, D, 2) / D)).astype(np.float32)
        ang = pos[:, None] * inv[None, :]
        c, s = np.cos(np.concatenate([ang, ang], -1))[:, None], np.sin(np.concatenate([ang, ang], -1))[:, None]
        rot = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], -1)
        np.testing.assert_allclose(ops.rope(x, pos, inv), x * c + rot * s, atol=1e-5)
        q, k, v = self.r(n, H, D), self.r(n + 2, Hkv, D), self.r(n + 2, Hkv, D)

        def ref(window=0, causal=True):
            out = np.zeros_like(q)
            for t in range(n):
                p = t + 2  # queries are the last n of the n + 2 keys
                for h in range(H):
                    lo = max(0, p - window + 1) if window else 0
                    kk, vv = k[lo:p + 1, h // (H // Hkv)], v[lo:p + 1, h // (H // Hkv)]
                    sc = kk @ q[t, h] / np.sqrt(D)
                    e = np.exp(sc - sc.max())
                    out[t, h] = e @ vv / e.sum()
            return out
        np.testing.assert_allclose(ops.attention(q, k, v), ref(), atol=1e-5)
        np.testing.assert_allclose(ops.attention(q, k, v, window=3), ref(window=3), atol=1e-5)
        kb, vb = self.r(n, Hkv, D), self.r(n, Hkv, D)
        sc = np.einsum("thd,shd->hts", q, np.repeat(kb, H // Hkv, 1)) / np.sqrt(D)
        e = np.exp(sc - sc.max(-1, keepdims=True))
        full = np.einsum("hts,shd->thd", e / e.sum(-1, keepdims=True), np.repeat(vb, H // Hkv, 1))
        np.testing.assert_allclose(ops.attention_segments(q, kb, vb), full, atol=1e-5)

    def test_quantized_matmul(self):
        x, W = self.r(4, 512), self.r(48, 512)
        for dt, bound in (("q8_0", 0.01), ("q4_0", 0.15), ("q4_k", 0.12), ("q5_k", 0.06), ("q6_k", 0.03),
                          ("bf16", 0.01), ("f16", 0.001)):
            wq = pipit.Tensor(W, dt)
            self.assertEqual((wq.dtype, wq.shape), (dt, (48, 512)))
            deq = wq.numpy()
            y = ops.matmul(x, wq)
            # against the dequantized weights: only the int8 activation blocks differ (bound: rel RMS)
            ref = x @ deq.T
            rel = np.sqrt(((y - ref) ** 2).mean() / (ref ** 2).mean())
            self.assertLess(rel, 0.01, dt)
            # and the weights' own error against the float ones
            rel_w = np.sqrt(((deq - W) ** 2).mean() / (W ** 2).mean())
            self.assertLess(rel_w, bound, dt)
        # a loaded model's weights, in the dtype its file holds, are pipit.Tensors too
        m = pipit.Model(os.path.join(MODELS, "qwen3"))
        t = m.weight("model.layers.0.mlp.up_proj.weight")
        self.assertEqual((t.dtype, t.shape), ("bf16", (256, 64)))
        self.assertIn("model.norm.weight", m.weight_names())


class Errors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = pipit.Model(os.path.join(MODELS, "stories260k"), n_threads=1)

    def test_library_errors_are_pipit_error(self):
        with self.assertRaisesRegex(pipit.Error, "no such file"):
            pipit.Model("/nonexistent/model")
        with self.assertRaisesRegex(pipit.Error, "does not fit|context"):
            self.m.session(n_ctx=8).eval(list(range(1, 20)))
        with self.assertRaisesRegex(pipit.Error, "vision"):
            self.m.generate("hi", images=[os.path.join(MODELS, "qwen2_vl", "img_100x75.png")], max_tokens=2)
        with self.assertRaisesRegex(pipit.Error, "tokenizer"):
            pipit.Model(os.path.join(MODELS, "qwen3")).tokenize("hello")
        with self.assertRaisesRegex(pipit.Error, "goes with a .gguf model"):
            pipit.Model(os.path.join(MODELS, "qwen2_vl"), mmproj="mmproj.gguf")

    def test_bad_arguments_are_value_errors(self):
        with self.assertRaises(ValueError):
            self.m.detokenize([1, 10 ** 6])
        with self.assertRaises(ValueError):
            self.m.session().eval([1.5, 2.0])
        with self.assertRaises(ValueError):
            self.m.session().eval([-3])
        with self.assertRaises(ValueError):
            self.m.generate("hi", max_tokens=-1)
        with self.assertRaises(TypeError):
            self.m.generate("hi", max_tokenz=3)
        bad = [lambda: ops.matmul(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)),
               lambda: ops.rms_norm(np.ones((2, 3)), np.ones(4)),
               lambda: ops.attention(np.ones((2, 3, 4)), np.ones((2, 2, 4)), np.ones((2, 2, 4))),
               lambda: ops.attention(np.ones((2, 2, 4)), np.ones((2, 2, 4)), np.ones((2, 2, 4)), pos=[0, 5]),
               lambda: ops.rope(np.ones((2, 2, 4)), [0, 1], np.ones(3)),
               lambda: ops.embedding(np.ones((4, 2)), [4]),
               lambda: ops.matmul(np.ones((1, 8)), "weights"),
               lambda: pipit.Tensor(np.ones((2, 100)), "q4_k"),
               lambda: pipit.Tensor(np.ones((2, 32)), "q9_9"),
               lambda: pipit.Tensor(np.ones((2, 256)), "iq4_xs")]
        for f in bad:
            with self.assertRaises(ValueError):
                f()

    def test_callback_exception_propagates(self):
        def boom(piece, tok):
            raise ZeroDivisionError("from the callback")
        with self.assertRaises(ZeroDivisionError):
            self.m.generate("Once upon a time", max_tokens=8, on_text=boom)
        # the model is still usable
        self.assertEqual(len(self.m.generate("Once", max_tokens=3, temperature=0).tokens), 3)


@unittest.skipUnless(os.path.isdir(os.path.join(SERVER_MODELS, "qwen2_vl_chat")), "server_models fixture missing")
class ChatWithImages(unittest.TestCase):
    def test_chat_image_equals_cli(self):
        model = os.path.join(SERVER_MODELS, "qwen2_vl_chat")
        img = os.path.join(MODELS, "qwen2_vl", "img_100x75.png")
        m = pipit.Model(model, n_threads=2)
        self.assertTrue(m.has_vision)
        pieces = []
        c = m.chat("Describe the picture.", images=[img], max_tokens=8, temperature=0, ignore_eos=True,
                   on_text=lambda p, t: pieces.append(p))
        self.assertEqual(len(c.tokens), 8)
        self.assertEqual("".join(pieces), c.text)
        self.assertGreater(c.n_prompt, 30)  # the image's tokens are in the prompt
        cli = subprocess.run([PIPIT, "run", "-m", model, "-t", "2", "--image", img, "-p", "Describe the picture.",
                              "-n", "8", "--temp", "0", "--ignore-eos"], check=True, capture_output=True)
        self.assertEqual(cli.stdout.rstrip(b"\n"), c.text.encode())
        # the same through message parts
        c2 = m.chat([{"role": "user", "content": [{"type": "image", "image": img},
                                                  {"type": "text", "text": "Describe the picture."}]}],
                    max_tokens=8, temperature=0, ignore_eos=True)
        self.assertEqual(c2.tokens, c.tokens)
        with self.assertRaises(pipit.Error):  # more images than placeholders
            m.chat([{"role": "user", "content": "no placeholder"}], images=[img], max_tokens=2)

    def test_session_chat_keeps_the_cache(self):
        """Session.chat: the whole conversation each turn, only what the KV cache lacks evaluated (the image's
        rows kept), the answer of a fresh Model.chat (issue 36)."""
        m = pipit.Model(os.path.join(SERVER_MODELS, "qwen2_vl_chat"), n_threads=2, kv_type="f32")
        img = os.path.join(MODELS, "qwen2_vl", "img_100x75.png")
        msgs = [{"role": "user", "content": [{"type": "image", "image": img},
                                             {"type": "text", "text": "Describe the picture."}]}]
        s = m.session()
        opts = dict(max_tokens=6, temperature=0.8, seed=3, repeat_penalty=1.3, ignore_eos=True)
        c1 = s.chat(msgs, **opts)
        self.assertEqual(s.n_reused, 0)
        self.assertEqual(c1.tokens, m.chat(msgs, **opts).tokens)
        msgs += [{"role": "assistant", "content": c1.text}, {"role": "user", "content": "And the colours?"}]
        c2 = s.chat(msgs, **opts)
        self.assertGreater(s.n_reused, 12)  # the image's 12 tokens and the text around them
        self.assertEqual(c2.tokens, m.chat(msgs, **opts).tokens)
        s.reset()
        c3 = s.chat(msgs, **opts)
        self.assertEqual(s.n_reused, 0)
        self.assertEqual(c3.tokens, c2.tokens)


class Gemma4Images(unittest.TestCase):
    """Gemma 4 with an image (the tiny checkpoint with the toy tokenizer of tests/data/gemma4_tokenizer): logits of
    the golden image prompt (one <|image|> placeholder -> <|image> + 63 soft tokens + <image|>) and the greedy
    continuation equal the goldens; chat through the template equals `pipit run --image`."""

    def test_golden_logits_greedy_and_chat(self):
        src = os.path.join(MODELS, "gemma4")
        img = os.path.join(src, "img_200x150.png")
        with tempfile.TemporaryDirectory() as d:
            for f in ("config.json", "generation_config.json", "preprocessor_config.json", "model.safetensors"):
                os.symlink(os.path.join(src, f), os.path.join(d, f))
            for f in ("tokenizer.json", "tokenizer_config.json"):
                with open(os.path.join(HERE, "..", "..", "tests", "data", "gemma4_tokenizer", f)) as fi, \
                        open(os.path.join(d, f), "w") as fo:
                    fo.write(fi.read())
            g = golden("gemma4")
            with open(os.path.join(src, "prompts.json")) as f:
                ids = json.load(f)["image"]["input_ids_unexpanded"]
            m = pipit.Model(d, n_threads=2, kv_type="f32")  # the f32 cache the goldens were made for
            self.assertTrue(m.has_vision)
            logits = m.logits(ids, images=[img])
            self.assertEqual(logits.shape, g["image.logits"].shape[1:])
            self.assertLess(float(np.abs(logits - g["image.logits"][0]).max()), 1e-3)
            r = m.generate("<bos><|turn>user\n<|image|>Describe this image.<turn|>\n<|turn>model\nSure, here",
                           images=[img], max_tokens=32, temperature=0, ignore_eos=True)
            self.assertEqual(r.tokens, g["image.greedy_ids"][0].tolist())
            c = m.chat("Describe this image.", images=[img], max_tokens=6, temperature=0, ignore_eos=True)
            cli = subprocess.run([PIPIT, "run", "-m", d, "-t", "2", "--image", img, "-p", "Describe this image.",
                                  "-n", "6", "--temp", "0", "--ignore-eos", "--kv-type", "f32", "--json"], check=True,
                                 capture_output=True)
            out = json.loads(cli.stdout)
            self.assertEqual(out["tokens"], c.tokens)
            self.assertEqual(out["timings"]["prompt_tokens"], c.n_prompt)
            self.assertEqual(c.n_prompt, 78)


class ChatWithVideo(unittest.TestCase):
    """Qwen3.5 with a video given as frames equals `pipit run --video` (the tiny qwen3_5_vl checkpoint with
    stories260k's tokenizer, the Qwen special tokens at the checkpoint's ids, and the Qwen-VL chat template)."""

    def test_chat_video_equals_cli(self):
        src = os.path.join(MODELS, "qwen3_5_vl")
        d = os.path.join(SERVER_MODELS, "qwen3_5_vl_chat")  # made by tests/e2e/make_server_models.py
        with tempfile.TemporaryDirectory() as tmp:
            frames = [os.path.join(src, "video_frame%02d.png" % i) for i in range(8)]
            m = pipit.Model(d, n_threads=2)
            c = m.chat([{"role": "user", "content": [{"type": "video", "video": frames, "fps": 4},
                                                     {"type": "text", "text": "What happens?"}]}],
                       max_tokens=6, temperature=0, ignore_eos=True)
            self.assertEqual(len(c.tokens), 6)
            cli = subprocess.run([PIPIT, "run", "-m", d, "-t", "2", "--video", ",".join(frames), "--video-fps", "4",
                                  "-p", "What happens?", "-n", "6", "--temp", "0", "--ignore-eos", "--json"],
                                 check=True, capture_output=True)
            out = json.loads(cli.stdout)
            self.assertEqual(out["tokens"], c.tokens)
            self.assertEqual(out["timings"]["prompt_tokens"], c.n_prompt)
            # the same frames as a lossless video file (FFV1 in AVI at 4 fps, written with PyAV): decoded by FFmpeg's
            # libraries at the file's own frame rate, the same tokens from Python and the CLI
            clip = os.path.join(tmp, "clip.avi")
            write_lossless_clip(frames, 4, clip)
            cv = m.chat([{"role": "user", "content": [{"type": "video", "video": clip},
                                                      {"type": "text", "text": "What happens?"}]}],
                        max_tokens=6, temperature=0, ignore_eos=True)
            self.assertEqual(cv.tokens, c.tokens)
            cli = subprocess.run([PIPIT, "run", "-m", d, "-t", "2", "--video", clip, "-p", "What happens?", "-n", "6",
                                  "--temp", "0", "--ignore-eos", "--json"], check=True, capture_output=True)
            self.assertEqual(json.loads(cli.stdout)["tokens"], c.tokens)
            with self.assertRaises(pipit.Error):  # no such file
                m.chat([{"role": "user", "content": [{"type": "video", "video": os.path.join(tmp, "none.mp4")}]}],
                       max_tokens=2)
            with self.assertRaises(ValueError):  # frames without a frame rate
                m.chat([{"role": "user", "content": [{"type": "video", "video": frames, "fps": 0}]}], max_tokens=2)


def write_lossless_clip(frames, fps, path):
    """PNG frames -> an FFV1 video in AVI (lossless RGB), with PyAV (Debian's python3-av; test fixtures only)."""
    import av
    import numpy as np
    from PIL import Image
    with av.open(path, "w") as c:
        s = c.add_stream("ffv1", rate=fps)
        with Image.open(frames[0]) as first:
            s.width, s.height, s.pix_fmt = first.width, first.height, "bgr0"
        for f in frames:
            with Image.open(f) as im:
                rgb = np.asarray(im.convert("RGB"))
            for p in s.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


class Audio(unittest.TestCase):
    """Gemma 4 audio (the tiny checkpoint with the toy tokenizer of tests/data/gemma4_tokenizer): the golden audio
    prompt gives the golden greedy ids from the wav file, its bytes and its samples; chat with an audio part equals
    `pipit run --audio`; bad clips raise."""

    GOLDEN = [490, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 210, 239, 94, 291,
              234, 210, 210, 210, 210, 239, 66, 309, 255, 392, 66, 66, 66, 66, 66, 66]
    RAW = "<bos><|turn>user\n<|audio|>Transcribe this audio.<turn|>\n<|turn>model\nSure, here"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        src = os.path.join(MODELS, "gemma4")
        for f in ("config.json", "generation_config.json", "preprocessor_config.json", "processor_config.json",
                  "model.safetensors"):
            os.symlink(os.path.join(src, f), os.path.join(cls.tmp.name, f))
        for f in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(HERE, "..", "..", "tests", "data", "gemma4_tokenizer", f), "rb") as i, \
                    open(os.path.join(cls.tmp.name, f), "wb") as o:
                o.write(i.read())
        cls.wav = os.path.join(src, "tone_1200ms.wav")
        cls.m = pipit.Model(cls.tmp.name, n_threads=2, kv_type="f32")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_golden_ids_from_file_bytes_and_pcm(self):
        self.assertTrue(self.m.has_audio)
        with open(self.wav, "rb") as f:
            data = f.read()
        pcm = golden("gemma4")["audio.audio.waveform"]
        for clip in (self.wav, data, pcm):
            c = self.m.generate(self.m.tokenize(self.RAW, add_special=False), audio=[clip], max_tokens=32,
                                temperature=0, ignore_eos=True)
            self.assertEqual(c.tokens, self.GOLDEN)

    def test_chat_equals_cli(self):
        c = self.m.chat("Transcribe this audio.", audio=[self.wav], max_tokens=6, temperature=0, ignore_eos=True)
        cli = subprocess.run([PIPIT, "run", "-m", self.tmp.name, "-t", "2", "--audio", self.wav, "-p",
                              "Transcribe this audio.", "-n", "6", "--temp", "0", "--ignore-eos", "--json"],
                             check=True, capture_output=True)
        out = json.loads(cli.stdout)
        self.assertEqual(out["tokens"], c.tokens)
        self.assertEqual(out["timings"]["prompt_tokens"], c.n_prompt)
        c2 = self.m.chat([{"role": "user", "content": [{"type": "audio", "audio": self.wav},
                                                       {"type": "text", "text": "Transcribe this audio."}]}],
                         max_tokens=6, temperature=0, ignore_eos=True)
        self.assertEqual(c2.tokens, c.tokens)

    def test_bad_clips_raise(self):
        with open(self.wav, "rb") as f:
            data = f.read()
        with self.assertRaisesRegex(pipit.Error, "truncated"):
            self.m.generate("<bos>Transcribe", audio=[data[: len(data) // 2]], max_tokens=2)
        with self.assertRaisesRegex(pipit.Error, "at most 30.0 s"):
            self.m.generate("<bos>Transcribe", audio=[np.zeros(16000 * 31, np.float32)], max_tokens=2)
        with self.assertRaises(ValueError):
            self.m.generate("<bos>Transcribe", audio=[np.zeros((2, 100), np.float32)], max_tokens=2)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)

#!/usr/bin/env python3
"""`pipit perplexity` and `pipit embed` (issue 36's quality tools) on stories260k:

- perplexity equals an independent computation: the same chunks (BOS first, llama-perplexity's layout) through
  `pipit logits`, the negative log-likelihood of each chunk's second half in numpy (float64);
- on llama.cpp's own GGUF files (tests/data/llamacpp_gguf) it is llama-perplexity's figure within 1%
  (tests/data/text/README.md has the figures and the commands);
- --kl-divergence: a model against itself gives 0 and 100% top-1 agreement; a Q4_0 file against the f32 checkpoint
  gives the f32 perplexity as the reference's and a positive divergence;
- embed: unit vectors with --normalize, a text's cosine with itself 1, the same vector as the C API / server path for
  the same pooling (checked through --json against a second run), a model without pooling config is refused.

usage: quality_tools_test.py PIPIT TESTDATA SOURCE_DIR
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

PIPIT, TESTDATA, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
STORIES = os.path.join(TESTDATA, "models", "stories260k")
TEXT = os.path.join(SRC, "tests", "data", "text", "story.txt")
GGUF = os.path.join(SRC, "tests", "data", "llamacpp_gguf")
# llama-perplexity (llama.cpp de3ff81) on story.txt, -c 128 -b 128: tests/data/text/README.md
LLAMA_PPL = {"stories260k-Q4_0.gguf": 4.5825, "stories260k-Q5_K_M.gguf": 4.3299}


def run(*args):
    r = subprocess.run([PIPIT, *args], capture_output=True, text=True, timeout=600)
    return r


def ppl_json(*args):
    r = run("perplexity", "-t", "2", "--json", *args)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout)


def write_ids(path, ids):
    header = json.dumps({"input_ids": {"dtype": "I32", "shape": [1, len(ids)], "data_offsets": [0, 4 * len(ids)]}})
    header += " " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode() + np.asarray(ids, np.int32).tobytes())


def read_tensor(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))[name]
        f.seek(8 + n + h["data_offsets"][0])
        raw = f.read(h["data_offsets"][1] - h["data_offsets"][0])
    return np.frombuffer(raw, np.float32).reshape(h["shape"])


class Perplexity(unittest.TestCase):
    def test_equals_independent_computation(self):
        c, chunks = 128, 3
        got = ppl_json("-m", STORIES, "-f", TEXT, "-c", str(c), "--chunks", str(chunks))
        with open(TEXT) as f:
            text = f.read()
        tok = run("tokenize", "-m", STORIES, "-p", text)
        self.assertEqual(tok.returncode, 0, tok.stderr)
        ids = json.loads(tok.stdout)["ids"] if tok.stdout.lstrip().startswith("{") else \
            [int(x) for x in tok.stdout.replace(",", " ").replace("[", " ").replace("]", " ").split()]
        bos = ids[0]
        self.assertTrue(got["add_bos"])
        nll = []
        with tempfile.TemporaryDirectory() as d:
            for k in range(chunks):
                chunk = ids[k * c:(k + 1) * c]
                chunk[0] = bos
                write_ids(os.path.join(d, "in.safetensors"), chunk)
                r = run("logits", "-m", STORIES, "-t", "2", "--input", os.path.join(d, "in.safetensors"), "--output",
                        os.path.join(d, "out.safetensors"))
                self.assertEqual(r.returncode, 0, r.stderr)
                logits = read_tensor(os.path.join(d, "out.safetensors"), "logits")[0].astype(np.float64)
                for j in range(c // 2, c - 1):
                    row = logits[j]
                    lse = row.max() + np.log(np.exp(row - row.max()).sum())
                    nll.append(lse - row[ids[k * c + j + 1]])
        want = float(np.exp(np.mean(nll)))
        self.assertEqual(got["tokens_scored"], len(nll))
        self.assertAlmostEqual(got["ppl"], want, delta=1e-5 * want)
        print("[ measure ] ppl %.6f, independent %.6f" % (got["ppl"], want))

    def test_llamacpp_figures_within_one_percent(self):
        for name, want in LLAMA_PPL.items():
            got = ppl_json("-m", os.path.join(GGUF, name), "-f", TEXT, "-c", "128")
            self.assertEqual(got["chunks"], 24)
            self.assertLess(abs(got["ppl"] / want - 1), 0.01, name)
            print("[ measure ] %s: pipit %.4f, llama-perplexity %.4f (%+.2f%%)" %
                  (name, got["ppl"], want, 100 * (got["ppl"] / want - 1)))

    def test_kl_divergence(self):
        same = ppl_json("-m", STORIES, "--kl-divergence", STORIES, "-f", TEXT, "-c", "128", "--chunks", "4")
        self.assertLess(same["kld_mean"], 1e-9)
        self.assertEqual(same["same_top1"], 1.0)
        self.assertAlmostEqual(same["ppl"], same["ref_ppl"], places=9)
        f32 = ppl_json("-m", STORIES, "-f", TEXT, "-c", "128", "--chunks", "4")
        q4 = ppl_json("-m", os.path.join(GGUF, "stories260k-Q4_0.gguf"), "--kl-divergence", STORIES, "-f", TEXT,
                      "-c", "128", "--chunks", "4")
        self.assertAlmostEqual(q4["ref_ppl"], f32["ppl"], delta=1e-6 * f32["ppl"])
        self.assertGreater(q4["kld_mean"], 1e-4)
        self.assertLess(q4["kld_mean"], 0.5)
        self.assertLess(q4["same_top1"], 1.0)
        self.assertGreater(q4["same_top1"], 0.5)
        print("[ measure ] Q4_0 vs f32: KLD %.5f, same top-1 %.3f" % (q4["kld_mean"], q4["same_top1"]))

    def test_errors(self):
        r = run("perplexity", "-m", STORIES, "-f", TEXT, "-c", "100000")
        self.assertEqual(r.returncode, 1)
        self.assertIn("fewer than one chunk", r.stderr)
        r = run("perplexity", "-m", STORIES, "-f", "/nonexistent.txt")
        self.assertEqual(r.returncode, 1)
        r = run("perplexity", "-m", STORIES, "--kl-divergence", os.path.join(TESTDATA, "models", "qwen2_vl"), "-f", TEXT)
        self.assertEqual(r.returncode, 1)
        self.assertIn("vocabulary", r.stderr)


class Embed(unittest.TestCase):
    def test_vectors(self):
        texts = ["Lily saw a bird.", "A girl found a small bird.", "Lily saw a bird."]
        args = ["embed", "-m", STORIES, "-t", "2", "--pooling", "mean", "--normalize", "--json"]
        for t in texts:
            args += ["-p", t]
        r = run(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        v = np.asarray(out["embeddings"], np.float64)
        self.assertEqual(v.shape[0], 3)
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
        np.testing.assert_allclose(v[0], v[2], atol=1e-6)  # the same text, after another: a fresh context each
        self.assertLess(float(v[0] @ v[1]), 0.9999)
        # last-token pooling without normalization is the final norm's last row: a different, unnormalized vector
        r = run("embed", "-m", STORIES, "-t", "2", "--pooling", "last", "--json", "-p", texts[0])
        w = np.asarray(json.loads(r.stdout)["embeddings"][0])
        self.assertGreater(abs(np.linalg.norm(w) - 1), 1e-3)
        r = run("embed", "-m", STORIES, "-p", "x")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--pooling", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)

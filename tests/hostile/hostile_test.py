#!/usr/bin/env python3
"""The standing hostile-input suite: bad checkpoints, bad files, bad images, bad audio and absurd numbers through the
real CLI.

usage: hostile_test.py PIPIT TESTDATA [--sanitized] [--json OUT] [--only CLASS] [-j N]

Every case runs `pipit ...` as a child process and must end within a time bound, with its peak RSS (getrusage of the
child, wait4) under a bound, and either
  - "error" cases: exit status 1 and exactly one line on stderr containing "error" (and, where the case says so, the
    name of the setting or field at fault), or
  - "either" cases (a mutation that may be harmless, e.g. rms_norm_eps = 0): exit 0, or exit 1 with one line.
Nothing may die by a signal, exit >= 128, print a sanitizer report or "internal error", or hang. The bad files are
generated into a temporary directory from the tiny checkpoints in TESTDATA/models. Prints the cases tried, rejected
and failed per class; exits 1 when any case failed.
"""
import argparse
import json
import os
import pty
import re
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fuzz"))
import make_seeds  # noqa: E402  (the GGUF writer)
import sweep3_cases  # noqa: E402  (issue 35's classes: outputs, zerodim, nesting, internal)

# The config size rules of models/hf_config.cpp (HfConfig::validate_sizes), to know which mutations must be refused
# with the field named. A field not listed here may still be refused by the model (then any one-line error will do).
DIM, HEAD_DIM, HEADS, LAYERS, VOCAB = 1 << 20, 1 << 14, 1 << 14, 1 << 14, 1 << 24
SIZE_RULES = {}
for k in ["hidden_size", "intermediate_size", "moe_intermediate_size", "shared_expert_intermediate_size", "embed_dim",
          "out_hidden_size", "projection_dim", "hidden_dim", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
          "qk_nope_head_dim", "v_head_dim", "num_channels", "in_chans", "in_channels", "hidden_size_per_layer_input"]:
    SIZE_RULES[k] = (0, DIM)
SIZE_RULES["head_dim"] = SIZE_RULES["global_head_dim"] = (0, HEAD_DIM)
for k in ["num_attention_heads", "num_key_value_heads", "num_heads", "num_global_key_value_heads"]:
    SIZE_RULES[k] = (0, HEADS)
for k in ["num_hidden_layers", "num_layers", "depth", "sliding_window_pattern", "no_rope_layer_interval",
          "decoder_sparse_step", "first_k_dense_replace", "num_kv_shared_layers"]:
    SIZE_RULES[k] = (0, LAYERS)
SIZE_RULES["vocab_size"] = SIZE_RULES["vocab_size_per_layer_input"] = (0, VOCAB)
for k in ["num_experts", "num_local_experts", "num_experts_per_tok", "n_routed_experts", "n_shared_experts",
          "experts_per_token", "top_k_experts"]:
    SIZE_RULES[k] = (0, 1 << 16)
for k in ["max_position_embeddings", "original_max_position_embeddings", "sliding_window", "window_size"]:
    SIZE_RULES[k] = (0, 1 << 30)
for k in ["image_size", "patch_size", "spatial_patch_size", "temporal_patch_size", "spatial_merge_size"]:
    SIZE_RULES[k] = (0, 1 << 15)
for k in ["bos_token_id", "eos_token_id", "pad_token_id", "image_token_id", "image_token_index", "video_token_id",
          "vision_start_token_id", "vision_end_token_id", "audio_token_id", "boi_token_id", "eoi_token_id",
          "boa_token_id", "eoa_token_id"]:
    SIZE_RULES[k] = (-1, (1 << 31) - 1)

# "every config field set to 0, negative, 2^31, 2^40, 1e15, wrong JSON type"
CONFIG_VALUES = [0, -1, 2 ** 31, 2 ** 40, 1e15, 2.5, "64", [64], True]
OTHER_VALUES = [0, -1, 1e15, "64", [64]]


def violates(key, v):
    """True when HfConfig::validate_sizes must refuse value v for key (naming the field)."""
    if key not in SIZE_RULES or v is None:
        return False
    lo, hi = SIZE_RULES[key]
    if isinstance(v, bool) or isinstance(v, (str, dict)):
        return True
    if isinstance(v, list):  # token ids may be lists (eos_token_id is, in many configs)
        return SIZE_RULES[key][0] != -1 or any(violates(key, x) for x in v)
    return v != int(v) or v < lo or v > hi


class Case:
    """expect: "error" (exit 1, one line), "either" (that or exit 0) or "ok" (exit 0); check: a function run after the
    case that returns why the state it left is wrong ("" when right); stdout: a path to give the child as stdout."""
    def __init__(self, cls, name, argv, expect="error", needle=None, env=None, timeout=None, check=None, stdout=None):
        self.cls, self.name, self.argv, self.expect, self.needle = cls, name, argv, expect, needle
        self.env, self.timeout, self.check, self.stdout = env or {}, timeout, check, stdout


class Suite:
    def __init__(self, pipit, testdata, sanitized, tmp):
        self.pipit, self.td, self.sanitized, self.tmp = pipit, testdata, sanitized, tmp
        self.cases = []
        # Bounds: a tiny model loads in ~20 ms and uses ~20 MB; sanitizers are 2-5x slower and map shadow memory.
        self.time_bound = 60.0 if sanitized else 20.0
        self.rss_bound_mb = 0 if sanitized else 400  # 0: not checked (ASan's shadow memory is not the program's)
        self.n = 0

    def model(self, name):
        return os.path.join(self.td, "models", name)

    def case_timeout(self, c):
        """A case's own bound (work that must stay fast: 5-10 s) or the suite's; sanitized, both 3x (the same factor
        as time_bound's 20 -> 60 s: ASan/UBSan code runs 2-5x slower)."""
        return c.timeout * (3 if self.sanitized else 1) if c.timeout else self.time_bound

    def fresh(self, tag):
        self.n += 1
        d = os.path.join(self.tmp, "%s_%d" % (tag, self.n))
        os.makedirs(d)
        return d

    def copy_model(self, name, skip=()):
        """A directory with the model's files linked (not copied), so a case can replace one of them."""
        d = self.fresh(name)
        src = self.model(name)
        for f in os.listdir(src):
            if f in skip or not os.path.isfile(os.path.join(src, f)) or f.startswith(("golden", "README", "report")):
                continue
            if f.endswith((".json", ".safetensors", ".jinja")):
                os.symlink(os.path.join(src, f), os.path.join(d, f))
        return d

    def add(self, *a, **k):
        self.cases.append(Case(*a, **k))


# ---- file builders ----

def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return path


def safetensors_bytes(header, body):
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    return struct.pack("<Q", len(hb)) + hb + body


def split_safetensors(b):
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:], n


def png_bytes(w, h, rows=None, color_type=2, ihdr_w=None, ihdr_h=None):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    ch = {0: 1, 2: 3, 6: 4}[color_type]
    raw = rows if rows is not None else b"".join(b"\0" + bytes((x * 7 + y) % 256 for x in range(w * ch))
                                                 for y in range(h))
    ihdr = struct.pack(">IIBBBBB", ihdr_w if ihdr_w is not None else w, ihdr_h if ihdr_h is not None else h, 8,
                       color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def gguf_boundaries(b):
    """Offsets where a GGUF file's sections end: header, each key/value, each tensor info, data start, tensors."""
    out, p = [4, 8, 16, 24], 24
    n_t, n_kv = struct.unpack("<QQ", b[8:24])

    def string(p):
        n = struct.unpack("<Q", b[p:p + 8])[0]
        return p + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def value(p, t):
        if t == 8:
            return string(p)
        if t == 9:
            et, n = struct.unpack("<IQ", b[p:p + 12])
            p += 12
            for _ in range(n):
                p = value(p, et)
            return p
        return p + sizes[t]
    for _ in range(n_kv):
        p = string(p)
        t = struct.unpack("<I", b[p:p + 4])[0]
        p = value(p + 4, t)
        out.append(p)
    offs = []
    for _ in range(n_t):
        p = string(p)
        nd = struct.unpack("<I", b[p:p + 4])[0]
        p += 4 + 8 * nd
        offs.append(struct.unpack("<Q", b[p + 4:p + 12])[0])
        p += 12
        out.append(p)
    base = (p + 31) // 32 * 32
    out += [base] + [base + o for o in offs] + [base + o + 1 for o in offs]
    return sorted(set(x for x in out if 0 < x < len(b)))


# ---- case generators, one per class ----

def config_cases(s):
    """Every config field (top level and nested objects) of five families set to each CONFIG_VALUES entry."""
    ids = s.fresh("input")
    inp = write(os.path.join(ids, "ids.safetensors"),
                safetensors_bytes({"input_ids": {"dtype": "I32", "shape": [1, 4], "data_offsets": [0, 16]}},
                                  struct.pack("<4i", 1, 5, 9, 13)))
    targets = [("llama", "logits"), ("qwen3_moe", "logits"), ("gemma3_text", "logits"), ("qwen2_vl", "vision")]
    for model, how in targets:
        base = json.loads(read(os.path.join(s.model(model), "config.json")))

        def paths(obj, pre):
            for k, v in obj.items():
                if isinstance(v, dict):
                    yield from paths(v, pre + [k])
                yield pre + [k]
        for path in list(paths(base, [])):
            # size fields get every value; the rest (floats, strings, flags) the ones most likely to break a reader
            for v in CONFIG_VALUES if path[-1] in SIZE_RULES else OTHER_VALUES:
                cfg = json.loads(json.dumps(base))
                o = cfg
                for k in path[:-1]:
                    o = o[k]
                if o.get(path[-1]) == v and type(o.get(path[-1])) is type(v):
                    continue
                o[path[-1]] = v
                d = s.copy_model(model, skip=("config.json",))
                write(os.path.join(d, "config.json"), json.dumps(cfg))
                if how == "logits":
                    argv = ["logits", "-m", d, "--input", inp, "--output", "/dev/null", "-t", "1"]
                else:
                    argv = ["vision", "-m", d, "--image", os.path.join(s.model(model), "img_100x75.png"), "-o",
                            "/dev/null", "-t", "1"]
                key = path[-1]
                must = violates(key, v) or path == ["model_type"]
                s.add("config", "%s %s=%s" % (model, ".".join(path), json.dumps(v)), argv,
                      "error" if must else "either", key if violates(key, v) else None)
    # whole-file damage
    for name, text in [("not json", "{"), ("array", "[1,2]"), ("empty", ""), ("null", "null"), ("string", '"x"'),
                       ("no model_type", '{"hidden_size": 64}'), ("unknown model_type", '{"model_type": "gpt9"}'),
                       ("deep nesting", "[" * 100000 + "]" * 100000),
                       ("deep object", '{"model_type": "llama", "a": ' + '{"b": ' * 5000 + "1" + "}" * 5001),
                       ("nul bytes", '{"model_type": "llama"\0}'), ("utf-8 garbage", b'{"model_type": "\xff\xfe"}')]:
        d = s.copy_model("llama", skip=("config.json",))
        write(os.path.join(d, "config.json"), text)
        s.add("config", "llama config.json " + name, ["logits", "-m", d, "--input", inp, "--output", "/dev/null"])
    return inp


def tensor_cases(s, inp):
    """Lies in the safetensors header of the llama checkpoint: shapes, dtypes, offsets, header length and JSON."""
    src = read(os.path.join(s.model("llama"), "model.safetensors"))
    hdr, body, _ = split_safetensors(src)
    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight",
             "lm_head.weight"]
    muts = []
    for n in names:
        t = hdr[n]
        b0, b1 = t["data_offsets"]
        for shape in [[0], [-1], [2 ** 31, 64], [2 ** 40], [2 ** 63], [], [1] * 9, "x", [1.5], t["shape"][::-1] + [1],
                      [t["shape"][0] + 1] + t["shape"][1:]]:
            muts.append(("%s shape=%s" % (n, json.dumps(shape)), n, "shape", shape, False))
        for dt in ["F64", "I8", "I32", "U8", "BOOL", "XX", 5, "", None, "F32"]:
            muts.append(("%s dtype=%s" % (n, json.dumps(dt)), n, "dtype", dt, False))
        for off in [[0, 2 ** 40], [2 ** 63, 2 ** 63 + 4], [-1, b1 - b0 - 1], [b1, b0], [0, 0], "x", [b0],
                    [b0 + len(body), b1 + len(body)], [b0 + 1, b1 + 1], [b0, b1 + 2], [2 ** 64 - 8, 8]]:
            # a shift by one byte inside the data is a different, valid tensor: either outcome is right
            muts.append(("%s data_offsets=%s" % (n, json.dumps(off)), n, "data_offsets", off, off == [b0 + 1, b1 + 1]))
    for label, n, field, val, either in muts:
        h = json.loads(json.dumps(hdr))
        h[n][field] = val
        d = s.copy_model("llama", skip=("model.safetensors",))
        write(os.path.join(d, "model.safetensors"), safetensors_bytes(h, body))
        s.add("tensors", label, ["logits", "-m", d, "--input", inp, "--output", "/dev/null"],
              "either" if either else "error")
    hb_len = struct.unpack("<Q", src[:8])[0]
    raw_hdr = src[8:8 + hb_len]
    for label, data in [("header length 0", struct.pack("<Q", 0) + src[8:]),
                        ("header length 2^63", struct.pack("<Q", 2 ** 63) + src[8:]),
                        ("header length file+1", struct.pack("<Q", len(src) - 7) + src[8:]),
                        ("header cut into the JSON", struct.pack("<Q", len(raw_hdr.rstrip()) - 1) + src[8:]),
                        ("header []", struct.pack("<Q", 2) + b"[]"),
                        ("header null", struct.pack("<Q", 4) + b"null"),
                        ("header not a tensor", safetensors_bytes({"a": 1}, b"")),
                        ("header deep nesting", struct.pack("<Q", 200000) + b"[" * 100000 + b"]" * 100000),
                        ("duplicate tensor", struct.pack("<Q", hb_len * 2 + 1) + raw_hdr[:-1] + b"," + raw_hdr[1:] +
                         b" " + body),
                        ("only metadata", safetensors_bytes({"__metadata__": {"format": "pt"}}, b"")),

                        ("zero bytes", b""), ("random bytes", bytes((i * 131 + 7) % 256 for i in range(4096)))]:
        d = s.copy_model("llama", skip=("model.safetensors",))
        write(os.path.join(d, "model.safetensors"), data)
        s.add("tensors", label, ["logits", "-m", d, "--input", inp, "--output", "/dev/null"])
    # __metadata__ is free-form to readers that only need the tensors: ignoring a malformed one is right too
    d = s.copy_model("llama", skip=("model.safetensors",))
    write(os.path.join(d, "model.safetensors"), safetensors_bytes(dict(hdr, __metadata__=[1]), body))
    s.add("tensors", "metadata not an object", ["logits", "-m", d, "--input", inp, "--output", "/dev/null"], "either")


def truncation_cases(s, inp):
    """Each file format cut at every section boundary (and one byte either side of some)."""
    # safetensors: preamble, header, each tensor's first and last byte
    src = read(os.path.join(s.model("llama"), "model.safetensors"))
    hdr, body, n = split_safetensors(src)
    cuts = {0, 1, 7, 8, 8 + n // 2, 8 + n - 1, 8 + n}
    for k, t in hdr.items():
        if k != "__metadata__":
            b0, b1 = t["data_offsets"]
            cuts |= {8 + n + b0 + 1, 8 + n + b1 - 1}
    cuts |= {len(src) - 1}
    for c in sorted(cuts):
        d = s.copy_model("llama", skip=("model.safetensors",))
        write(os.path.join(d, "model.safetensors"), src[:c])
        s.add("truncated", "safetensors at %d/%d" % (c, len(src)),
              ["logits", "-m", d, "--input", inp, "--output", "/dev/null"])
    # .pipit: converted from the llama checkpoint once (q8, so quantized blocks are cut too)
    d = s.fresh("pipit")
    pip = os.path.join(d, "llama.pipit")
    s.setup.append(["convert", s.model("llama"), "-o", pip, "-q", "q8", "--quiet"])
    s.pipit_file = pip
    # gguf: the llama-metadata seed of the fuzz corpus
    g = make_seeds.gguf_llama_seed()
    for c in [0, 1, 3] + gguf_boundaries(g) + [len(g) - 1]:
        d = s.fresh("gguf")
        s.add("truncated", "gguf at %d/%d" % (c, len(g)),
              ["logits", "-m", write(os.path.join(d, "m.gguf"), g[:c]), "--input", inp, "--output", "/dev/null"])
    d = s.fresh("gguf")
    s.add("truncated", "gguf seed whole (tensors missing)",
          ["logits", "-m", write(os.path.join(d, "m.gguf"), g), "--input", inp, "--output", "/dev/null"])
    # tokenizer.json and config.json cut
    tj = read(os.path.join(s.model("stories260k"), "tokenizer.json"))
    for frac in [0, 1, 2, 4, 6, 7]:
        c = len(tj) * frac // 8
        d = s.copy_model("stories260k", skip=("tokenizer.json",))
        write(os.path.join(d, "tokenizer.json"), tj[:c])
        s.add("truncated", "tokenizer.json at %d/%d" % (c, len(tj)), ["run", "-m", d, "-p", "x", "-n", "2"])
    cj = read(os.path.join(s.model("llama"), "config.json"))
    for frac in [1, 3, 5, 7]:
        c = len(cj) * frac // 8
        d = s.copy_model("llama", skip=("config.json",))
        write(os.path.join(d, "config.json"), cj[:c])
        s.add("truncated", "config.json at %d/%d" % (c, len(cj)),
              ["logits", "-m", d, "--input", inp, "--output", "/dev/null"])


def pipit_truncation_cases(s, inp):
    """After the setup conversion: the .pipit file cut at its preamble fields, header, data start and tensors."""
    b = read(s.pipit_file)
    hb, doff, dbytes = struct.unpack("<QQQ", b[16:40])
    h = json.loads(b[40:40 + hb])
    cuts = {0, 8, 12, 16, 24, 32, 39, 40, 40 + hb // 2, 40 + hb - 1, 40 + hb, doff - 1, doff, len(b) - 1}
    for t in h["tensors"]:
        cuts |= {doff + t["offset"] + 1, doff + t["offset"] + t["nbytes"] - 1}
    for c in sorted(x for x in cuts if 0 <= x < len(b)):
        d = s.fresh("pipitcut")
        s.add("truncated", ".pipit at %d/%d" % (c, len(b)),
              ["logits", "-m", write(os.path.join(d, "m.pipit"), b[:c]), "--input", inp, "--output", "/dev/null"])
    # lies in the .pipit header: shape, dtype, nbytes, offset of the first matrix
    t0 = next(t for t in h["tensors"] if len(t["shape"]) == 2)
    for field, val in [("shape", [2 ** 40, 2 ** 40]), ("shape", [-1, 32]), ("dtype", "q5_k"), ("nbytes", 2 ** 62),
                       ("offset", 2 ** 62), ("offset", 1), ("shape", [1, 1, 1, 1, 1])]:
        hh = json.loads(json.dumps(h))
        next(t for t in hh["tensors"] if t["name"] == t0["name"])[field] = val
        nh = json.dumps(hh, sort_keys=True).encode()
        if 40 + len(nh) > doff:
            continue
        nb = b[:16] + struct.pack("<Q", len(nh)) + b[24:40] + nh + b"\0" * (doff - 40 - len(nh)) + b[doff:]
        d = s.fresh("pipitlie")
        s.add("tensors", ".pipit %s %s=%s" % (t0["name"], field, json.dumps(val)),
              ["logits", "-m", write(os.path.join(d, "m.pipit"), nb), "--input", inp, "--output", "/dev/null"])


def image_cases(s):
    """Bad images through `pipit vision` on the Qwen2-VL test model (and the CLIP path of llava)."""
    d = s.fresh("img")
    good = read(os.path.join(s.model("qwen2_vl"), "img_100x75.png"))
    jpg_dir = os.path.join(HERE, "..", "data", "jpeg")
    jpgs = sorted(f for f in os.listdir(jpg_dir) if f.endswith(".jpg"))
    jpg = read(os.path.join(jpg_dir, jpgs[0])) if jpgs else b""
    imgs = [("empty file", b""), ("random bytes", bytes((i * 37 + 11) % 256 for i in range(3000))),
            ("text as png", b"hello, not an image\n"), ("gif header", b"GIF89a" + b"\0" * 100),
            ("bmp header", b"BM" + b"\0" * 100),
            ("png width 2^31-1", png_bytes(4, 4, ihdr_w=2 ** 31 - 1)),
            ("png height 0", png_bytes(4, 4, ihdr_h=0)), ("png 0x0", png_bytes(4, 4, ihdr_w=0, ihdr_h=0)),
            ("png 100000x100000 header", png_bytes(4, 4, ihdr_w=100000, ihdr_h=100000)),
            ("png 20000x20000 (bomb)", png_bytes(20000, 1, ihdr_h=20000)),
            ("png 1x1000 (aspect ratio)", png_bytes(1, 1000, color_type=0)),
            ("png bad zlib", png_bytes(4, 4)[:41] + b"\xff" * 20 + png_bytes(4, 4)[61:]),
            ("png rows short", png_bytes(8, 8, rows=b"\0" * 10))]
    for frac in [1, 2, 3, 5, 7]:
        imgs.append(("png cut at %d/8" % frac, good[:len(good) * frac // 8]))
        if jpg:
            imgs.append(("jpeg cut at %d/8" % frac, jpg[:len(jpg) * frac // 8]))
    if jpg:
        imgs.append(("jpeg SOF 65535x65535", jpg.replace(b"\xff\xc0", b"\xff\xc0", 1)[:2] + jpg[2:]))
        sof = jpg.find(b"\xff\xc0")
        if sof > 0:
            big = bytearray(jpg)
            big[sof + 5:sof + 9] = struct.pack(">HH", 65535, 65535)
            imgs.append(("jpeg SOF 65535x65535", bytes(big)))
            zero = bytearray(jpg)
            zero[sof + 5:sof + 9] = struct.pack(">HH", 0, 0)
            imgs.append(("jpeg SOF 0x0", bytes(zero)))
    for name, data in imgs:
        ext = ".jpg" if name.startswith("jpeg") else ".png"
        p = write(os.path.join(d, re.sub(r"[^a-z0-9]+", "_", name) + ext), data)
        s.add("images", name, ["vision", "-m", s.model("qwen2_vl"), "--image", p, "-o", "/dev/null", "-t", "1"])
    for name, path in [("directory", d), ("/dev/zero", "/dev/zero"), ("missing", os.path.join(d, "nope.png"))]:
        s.add("images", name, ["vision", "-m", s.model("qwen2_vl"), "--image", path, "-o", "/dev/null"])
    s.add("images", "llava CLIP path, 1x1000 png", ["vision", "-m", s.model("llava"), "--image",
                                                     write(os.path.join(d, "tall.png"), png_bytes(1, 1000, color_type=0)),
                                                     "-o", "/dev/null"], "either")
    s.add("images", "image on a text model", ["run", "-m", s.model("stories260k"), "-p", "x", "--image",
                                               os.path.join(s.model("qwen2_vl"), "img_100x75.png")])
    # preprocessor_config.json sizes
    pp = json.loads(read(os.path.join(s.model("qwen2_vl"), "preprocessor_config.json")))
    for k, v in [("min_pixels", 2 ** 40), ("max_pixels", 2 ** 40), ("min_pixels", -1), ("patch_size", 0),
                 ("merge_size", 2 ** 31), ("image_mean", "x"), ("temporal_patch_size", 1e15), ("resample", 99)]:
        q = dict(pp)
        q[k] = v
        m = s.copy_model("qwen2_vl", skip=("preprocessor_config.json",))
        write(os.path.join(m, "preprocessor_config.json"), json.dumps(q))
        s.add("images", "preprocessor_config %s=%s" % (k, json.dumps(v)),
              ["vision", "-m", m, "--image", os.path.join(s.model("qwen2_vl"), "img_100x75.png"), "-o", "/dev/null"],
              needle=k)


def wav_bytes(n_frames, rate=16000, channels=1, bits=16, data=None, declared=None):
    """A PCM WAV: header declaring `declared` data bytes (default: what n_frames need) and `data` (default zeros)."""
    size = n_frames * channels * bits // 8
    data = b"\0" * size if data is None else data
    d = size if declared is None else declared
    fmt = struct.pack("<HHIIHH", 1, channels, rate & 0xFFFFFFFF, (rate * channels * bits // 8) & 0xFFFFFFFF,
                      channels * bits // 8, bits)
    return b"RIFF" + struct.pack("<I", (36 + d) & 0xFFFFFFFF) + b"WAVEfmt " + struct.pack("<I", 16) + fmt + \
        b"data" + struct.pack("<I", d & 0xFFFFFFFF) + data


def audio_cases(s):
    """Bad audio through `pipit run --audio` on the tiny Gemma 4 (with the toy tokenizer of tests/data), and bad
    processor_config.json audio settings. A clip's cost is bounded before it is read: the 10-hour file (sparse) must
    be refused from its header within the time and RSS bounds."""
    m = s.copy_model("gemma4")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(HERE, "..", "data", "gemma4_tokenizer", f), os.path.join(m, f))
    d = s.fresh("audio")
    good = read(os.path.join(s.model("gemma4"), "tone_1200ms.wav"))
    run = lambda path: ["run", "-m", m, "-p", "Transcribe", "-n", "1", "-t", "1", "--audio", path]  # noqa: E731
    clips = [("empty file", b"", "cannot read it as audio"),
             ("random bytes", bytes((i * 37 + 11) % 256 for i in range(3000)), "cannot read it as audio"),
             ("text as wav", b"hello, not audio\n", "cannot read it as audio"),
             ("wav 0 samples", wav_bytes(0), "0 samples"),
             ("wav header 10 hours, 1.2 s of data", good[:40] + struct.pack("<I", 16000 * 2 * 36000) + good[44:],
              "truncated"),
             ("wav header 4 GB data", good[:40] + struct.pack("<I", 0xFFFFFFFF) + good[44:], "truncated"),
             ("wav 31 s", wav_bytes(16000 * 31), "at most 30.0 s"),
             ("wav 0 channels", wav_bytes(100, channels=0, data=b"\0" * 200), None),
             ("wav 100 channels", wav_bytes(100, channels=100), None),
             ("wav rate 0", wav_bytes(100, rate=0), None),
             ("wav rate 2^31", wav_bytes(100, rate=2 ** 31 - 1), None),
             ("wav rate 100 Hz", wav_bytes(100, rate=100), "sample rate"),
             ("wav 8 samples (too short for a frame)", wav_bytes(8), "too short"),
             ("flac header only", b"fLaC" + b"\0" * 40, None),
             ("ogg header only", b"OggS" + b"\0" * 60, None),
             ("mp3 id3 only", b"ID3\x04\0\0\0\0\0\0", None)]
    for frac in [1, 2, 3, 5, 7]:
        clips.append(("wav cut at %d/8" % frac, good[:len(good) * frac // 8], "truncated"))
    for name, data, needle in clips:
        p = write(os.path.join(d, re.sub(r"[^a-z0-9]+", "_", name) + ".wav"), data)
        s.add("audio", name, run(p), needle=needle)
    big = write(os.path.join(d, "ten_hours.wav"), wav_bytes(0, declared=16000 * 2 * 36000)[:44])
    os.truncate(big, 44 + 16000 * 2 * 36000)  # sparse: 1.15 GB that take no space
    s.add("audio", "wav 10 hours (sparse file)", run(big), needle="at most 30.0 s")
    for name, path in [("directory", d), ("/dev/zero", "/dev/zero"), ("missing", os.path.join(d, "nope.wav"))]:
        s.add("audio", name, run(path))
    s.add("audio", "audio on a text model", ["run", "-m", s.model("stories260k"), "-p", "x", "--audio",
                                              os.path.join(s.model("gemma4"), "tone_1200ms.wav")], needle="audio")
    # processor_config.json audio settings
    pc = json.loads(read(os.path.join(s.model("gemma4"), "processor_config.json")))
    wav = os.path.join(s.model("gemma4"), "tone_1200ms.wav")
    for k, v in [("audio_seq_length", 0), ("audio_seq_length", -5), ("audio_ms_per_token", 10 ** 12),
                 ("feature_extractor.feature_size", 0), ("feature_extractor.feature_size", 64),
                 ("feature_extractor.fft_length", 7), ("feature_extractor.frame_length", 10 ** 9),
                 ("feature_extractor.hop_length", 0), ("feature_extractor.sampling_rate", 8000),
                 ("feature_extractor.mel_floor", 0), ("feature_extractor.max_frequency", 1e9),
                 ("feature_extractor.preemphasis", 0.97), ("feature_extractor.per_bin_mean", [0.0]),
                 ("feature_extractor.dither", "x")]:
        q = json.loads(json.dumps(pc))
        o, key = (q["feature_extractor"], k.split(".")[1]) if "." in k else (q, k)
        o[key] = v
        mm = s.copy_model("gemma4", skip=("processor_config.json",))
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(HERE, "..", "data", "gemma4_tokenizer", f), os.path.join(mm, f))
        write(os.path.join(mm, "processor_config.json"), json.dumps(q))
        s.add("audio", "processor_config %s=%s" % (k, json.dumps(v)),
              ["run", "-m", mm, "-p", "Transcribe", "-n", "1", "-t", "1", "--audio", wav], needle=key)


def prompt_cases(s):
    """Prompt files and model paths a user could plausibly get wrong."""
    st = s.model("stories260k")
    d = s.fresh("prompt")
    sparse = os.path.join(d, "huge.txt")
    with open(sparse, "wb") as f:
        f.truncate(10 << 30)  # 10 GiB, sparse: nothing is written
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    for name, path, needle in [("directory", d, "directory"), ("/dev/zero", "/dev/zero", "67.1 MB"),
                               ("10 GiB file", sparse, "10.7 GB"), ("missing file", os.path.join(d, "nope"), "nope")]:
        s.add("prompts", "-f " + name, ["run", "-m", st, "-f", path, "-n", "2"], needle=needle)
    s.add("prompts", "-f /dev/null (empty prompt)", ["run", "-m", st, "-f", "/dev/null", "-n", "2"], "either")
    for name, data in [("nul bytes", b"Once\0upon\0a time"), ("invalid utf-8", b"\xff\xfe\xc0\x80 once"),
                       ("only newlines", b"\n" * 1000), ("control chars", bytes(range(1, 32)) * 10)]:
        s.add("prompts", "-f " + name, ["run", "-m", st, "-f", write(os.path.join(d, name.replace(" ", "_")), data),
                                        "-n", "2"], "either")
    s.add("prompts", "prompt longer than -c", ["run", "-m", st, "-p", "Once upon a time " * 50, "-c", "16", "-n", "2"],
          needle="context")
    s.add("prompts", "prompt longer than the model", ["run", "-m", st, "-p", "Once upon a time " * 400, "-n", "2"],
          needle="context")
    s.add("prompts", "-p empty", ["run", "-m", st, "-p", "", "-n", "2"], "either")
    # -m pointing at the wrong thing
    empty_dir = s.fresh("emptydir")
    for name, path in [("missing", os.path.join(d, "nope")), ("/dev/zero", "/dev/zero"), ("/dev/null", "/dev/null"),
                       ("empty directory", empty_dir), ("a text file", write(os.path.join(d, "m.txt"), "hello")),
                       ("empty .gguf", write(os.path.join(d, "e.gguf"), b"")),
                       ("empty .pipit", write(os.path.join(d, "e.pipit"), b"")),
                       ("random .gguf", write(os.path.join(d, "r.gguf"), b"GGUF" + bytes(range(256)) * 4)),
                       ("random .safetensors", write(os.path.join(d, "r.safetensors"), bytes(range(256)) * 4)),
                       ("fifo", fifo)]:
        s.add("prompts", "-m " + name, ["run", "-m", path, "-p", "x", "-n", "2"])


def cli_cases(s):
    """Absurd numbers on the command line."""
    st = s.model("stories260k")
    run = ["run", "-m", st, "-p", "Once upon a time", "-n", "2"]
    for v in ["0", "-1", "513", "10000000", "16777216", "16777217", str(2 ** 31), str(2 ** 63), "1e15", "abc", "",
              "99999999999999999999999"]:
        s.add("cli", "-c " + v, run + ["-c", v], needle="-c")
    for v in ["0", "-1", "100000", str(2 ** 40), "x"]:
        s.add("cli", "-t " + v, run + ["-t", v], needle="-t")
    for v in ["-2", "x", "1e3"]:  # -1 is llama.cpp's "until the context is full"
        s.add("cli", "-n " + v, run[:-2] + ["-n", v], needle="-n")
    s.add("cli", "-n 2^40", run[:-2] + ["-n", str(2 ** 40), "-c", "64"], "either")
    for opt, vals in [("--temp", ["nan", "inf", "-inf", "1e400", "x"]), ("--top-p", ["nan", "inf"]),
                      ("--top-k", [str(2 ** 40 + 1), "x"]), ("--min-p", ["nan"]), ("--repeat-penalty", ["0", "-1", "nan"]),
                      ("--seed", ["x", str(2 ** 70)]), ("--kv-type", ["q4", "", "f64"])]:
        for v in vals:
            s.add("cli", opt + " " + v, run + [opt, v], "either" if (opt, v) == ("--top-k", str(2 ** 40 + 1)) else "error",
                  needle=opt)
    s.add("cli", "--kv-type q8 on head_dim 8", run + ["--kv-type", "q8"], needle="head_dim")
    s.add("cli", "unknown option", run + ["--frobnicate", "3"], needle="--frobnicate")
    s.add("cli", "unknown command", ["frobnicate"], needle="frobnicate")
    s.add("cli", "missing option value", ["run", "-m", st, "-p"])
    for args in [["-p", str(2 ** 40)], ["-n", "-5"], ["-b", "0"], ["-b", str(2 ** 40)], ["-r", "0"], ["-t", "0,99999"],
                 ["-c", str(2 ** 31)], ["-p", "64", "-c", "16"]]:
        s.add("cli", "bench " + " ".join(args), ["bench", "-m", st, "-n", "1", "-r", "1", "-t", "1"] + args)
    # the memory plan: a machine with little memory left (PIPIT_MEM_AVAILABLE) cannot hold the asked-for context
    qw = s.model("qwen3")
    for c, mem in [("4096", "1000000"), ("4096", "5000000")]:
        s.add("cli", "memory plan -c %s with %s bytes available" % (c, mem),
              ["logits", "-m", qw, "--input", os.path.join(qw, "golden.safetensors"), "--output", "/dev/null", "-c", c],
              needle="fits", env={"PIPIT_MEM_AVAILABLE": mem})
    s.add("cli", "-c above max_position_embeddings", run + ["-c", "3000000"], needle="max_position_embeddings 512")
    for c in ["0", "-1", str(2 ** 31)]:
        s.add("cli", "logits -c " + c, ["logits", "-m", qw, "--input", os.path.join(qw, "golden.safetensors"),
                                        "--output", "/dev/null", "-c", c], needle="-c")


# ---- running ----

def run_one(s, c):
    argv = [s.pipit] + c.argv
    env = dict(os.environ, **c.env)
    timeout = s.case_timeout(c)
    out_f = tempfile.TemporaryFile()
    err_f = tempfile.TemporaryFile()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            os.dup2(os.open(c.stdout, os.O_WRONLY) if c.stdout else out_f.fileno(), 1)
            os.dup2(err_f.fileno(), 2)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    timer = threading.Timer(timeout, lambda: os.killpg(pid, signal.SIGKILL))
    timer.start()
    _, status, ru = os.wait4(pid, 0)
    timer.cancel()
    sec = time.monotonic() - t0
    err_f.seek(0)
    err = err_f.read(65536).decode("utf-8", "replace")
    out_f.close()
    err_f.close()
    return status, ru.ru_maxrss / 1024.0, sec, err


def judge(s, c, status, rss, sec, err):
    """'' when the case passed, else why not."""
    if sec >= s.case_timeout(c) - 0.05 and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "hang: killed after %.0f s" % sec
    if os.WIFSIGNALED(status):
        return "crash: signal %d" % os.WTERMSIG(status)
    code = os.WEXITSTATUS(status)
    if code >= 128:
        return "crash: exit %d" % code
    if re.search(r"AddressSanitizer|LeakSanitizer|runtime error:|internal error|terminate called", err):
        return "crash: " + err.strip().splitlines()[0][:200]
    if s.rss_bound_mb and rss > s.rss_bound_mb:
        return "rss %.0f MB over the %d MB bound" % (rss, s.rss_bound_mb)
    lines = [x for x in err.splitlines() if x.strip()]
    why = c.check() if c.check else ""
    if why:
        return why
    if c.expect == "ok":
        return "" if code == 0 else "exit %d, expected 0: %r" % (code, err[:300])
    if c.expect == "either" and code == 0:
        return ""
    if code != 1:
        return "exit %d, expected 1" % code
    if len(lines) != 1:
        return "%d lines on stderr, expected 1: %r" % (len(lines), err[:300])
    if "error" not in lines[0]:
        return "no 'error' in %r" % lines[0]
    if c.needle and c.needle.lower() not in lines[0].lower():
        return "the message does not name %r: %r" % (c.needle, lines[0])
    return ""


def interrupt_case(s):
    """A long prefill on a terminal: progress lines appear on stderr, and Ctrl-C stops it with one line, exit 130."""
    d = s.copy_model("stories260k", skip=("config.json",))
    cfg = json.loads(read(os.path.join(s.model("stories260k"), "config.json")))
    cfg["max_position_embeddings"] = 1 << 20  # so that a long context is allowed; the model is the same
    write(os.path.join(d, "config.json"), json.dumps(cfg))
    prompt = write(os.path.join(d, "prompt.txt"), "Once upon a time there was a little girl. " * 6000)
    argv = [s.pipit, "run", "-m", d, "-f", prompt, "-c", "100000", "--kv-type", "f16", "-n", "4", "-t", "1"]
    master, slave = pty.openpty()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(slave, 2)
        os.execv(argv[0], argv)
    os.close(slave)
    buf, sent, done, status = b"", None, 0, 0
    deadline = t0 + s.time_bound * 3
    while time.monotonic() < deadline:
        try:
            import select
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                chunk = os.read(master, 4096)
                if not chunk:
                    break
                buf += chunk
        except OSError:
            break
        if sent is None and b"tok/s" in buf:
            sent = time.monotonic()
            os.kill(pid, signal.SIGINT)
        done, status, _ = os.wait4(pid, os.WNOHANG)
        if done:
            break
    if not done:  # the terminal closed (the child is exiting) or the deadline passed
        timer = threading.Timer(max(1.0, deadline - time.monotonic()), lambda: os.kill(pid, signal.SIGKILL))
        timer.start()
        _, status, _ = os.wait4(pid, 0)
        timer.cancel()
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            return "hang: no exit within %.0f s (progress seen: %s)" % (time.monotonic() - t0, sent is not None)
    try:
        while True:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            buf += chunk
    except OSError:
        pass
    os.close(master)
    text = buf.decode("utf-8", "replace")
    if sent is None:
        return "no progress line on the terminal: %r" % text[-300:]
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 130:
        return "status %r after Ctrl-C, expected exit 130" % status
    if time.monotonic() - sent > 10:
        return "took %.1f s to stop after Ctrl-C" % (time.monotonic() - sent)
    last = [x for x in re.split(r"[\r\n]+", text) if x.strip()][-1]
    if "interrupted" not in last:
        return "last line %r does not say interrupted" % last
    print("  Ctrl-C: progress %r, then %r" % ([x for x in re.split(r"[\r\n]+", text) if "tok/s" in x][0].strip(),
                                              last.strip()))
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pipit")
    ap.add_argument("testdata")
    ap.add_argument("--sanitized", action="store_true", help="built with ASan/UBSan: longer time bound, no RSS bound")
    ap.add_argument("--json", help="write the per-class figures here")
    ap.add_argument("--only", help="run only this class")
    ap.add_argument("-j", type=int, default=2)
    a = ap.parse_args()
    # thousands of small directories: tmpfs when there is one (a loaded disk made generation alone take a minute)
    tmp = tempfile.mkdtemp(prefix="pipit_hostile_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        s = Suite(os.path.abspath(a.pipit), a.testdata, a.sanitized, tmp)
        s.setup = []
        inp = config_cases(s)
        tensor_cases(s, inp)
        truncation_cases(s, inp)
        image_cases(s)
        audio_cases(s)
        prompt_cases(s)
        cli_cases(s)
        sweep3_cases.add_all(s, inp)
        for argv in s.setup:
            st, _, _, err = run_one(s, Case("setup", "setup", argv, timeout=300))
            if st != 0:
                print("setup failed: pipit %s: %s" % (" ".join(argv), err))
                return 1
        pipit_truncation_cases(s, inp)
        sweep3_cases.pipit_header_cases(s)
        cases = [c for c in s.cases if not a.only or c.cls == a.only]
        t0 = time.monotonic()
        results = {}
        with ThreadPoolExecutor(max_workers=a.j) as ex:
            for c, r in zip(cases, ex.map(lambda c: (run_one(s, c)), cases)):
                results[id(c)] = (r, judge(s, c, *r))
        classes = {}
        worst_rss, worst_sec = 0.0, 0.0
        for c in cases:
            (status, rss, sec, err), why = results[id(c)]
            k = classes.setdefault(c.cls, {"tried": 0, "rejected": 0, "ran": 0, "failed": 0, "max_rss_mb": 0.0,
                                           "max_s": 0.0})
            k["tried"] += 1
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
            k["rejected" if code == 1 else "ran" if code == 0 else "failed"] += 0 if why else 1
            k["max_rss_mb"] = max(k["max_rss_mb"], rss)
            k["max_s"] = max(k["max_s"], sec)
            worst_rss, worst_sec = max(worst_rss, rss), max(worst_sec, sec)
            if why:
                k["failed"] += 1
                print("FAIL [%s] %s: %s\n     pipit %s" % (c.cls, c.name, why, " ".join(c.argv)[:300]))
        if not a.only or a.only == "interrupt":
            why = interrupt_case(s)
            classes["interrupt"] = {"tried": 1, "rejected": 0, "ran": 0 if why else 1, "failed": 1 if why else 0,
                                    "max_rss_mb": 0.0, "max_s": 0.0}
            if why:
                print("FAIL [interrupt] long prefill + Ctrl-C: " + why)
        total = sum(k["tried"] for k in classes.values())
        failed = sum(k["failed"] for k in classes.values())
        print("%-10s %6s %9s %5s %7s %12s %9s" % ("class", "tried", "rejected", "ran", "failed", "max RSS MB",
                                                   "max s"))
        for name, k in classes.items():
            print("%-10s %6d %9d %5d %7d %12.1f %9.2f" % (name, k["tried"], k["rejected"], k["ran"], k["failed"],
                                                          k["max_rss_mb"], k["max_s"]))
        print("%d cases in %.1f s, %d failed%s" % (total, time.monotonic() - t0, failed,
                                                   " (sanitized build)" if a.sanitized else ""))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"classes": classes, "total": total, "failed": failed}, f, indent=1)
        return 1 if failed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Small valid seed files for the fuzz targets (scripts/fuzz.sh): one directory per target under OUT_DIR.

usage: make_seeds.py OUT_DIR
pipit/        a .pipit with an f32, a q8_0 and an i32 tensor (written here from the spec in format/pipit_format.h)
safetensors/  a two-tensor safetensors file
gguf/         GGUF v3 files: llama metadata + a SentencePiece vocab + F32/Q8_0 tensors (q/k permuted, rope_freqs),
              and a gpt2-style vocab with merges
pickle/       data.pkl of a torch.save state dict and the whole zip (needs python3-torch; skipped without it)
image/        the committed test images under 4 KB (tests/data/jpeg, tests/data/resize): JPEG and PNG
video/        tiny clips (H.264 in MP4, VP9 in WebM, FFV1 in MKV, MPEG-4 in AVI) written with PyAV (python3-av;
              skipped without it)
"""
import glob
import json
import os
import shutil
import struct
import sys


def pipit_seed(version=2):
    """Version 2 keeps the texts as raw bytes after the tensors; version 1 as JSON strings in the header."""
    tensors = [("a", "f32", [3, 5], 60), ("b", "q8_0", [2, 64], 136), ("c", "i32", [4], 16)]
    entries, off = [], 0
    for name, dt, shape, n in tensors:
        entries.append({"name": name, "dtype": dt, "shape": shape, "offset": off, "nbytes": n})
        off = (off + n + 63) // 64 * 64
    data_bytes = entries[-1]["offset"] + entries[-1]["nbytes"]
    header = {"format": "pipit", "version": version, "arch": "llama", "config": {"model_type": "llama"},
              "quantization": {"quant": "q8_0"}, "tensors": entries}
    texts = {"tokenizer": b'{"model": {"type": "BPE", "vocab": {}, "merges": []}}', "chat_template": b"{{ x }}"}
    text_at = {}
    if version == 1:
        header.update({k: v.decode() for k, v in texts.items()})
    else:
        for k, v in texts.items():
            at = (data_bytes + 63) // 64 * 64
            header.setdefault("texts", {})[k] = {"offset": at, "nbytes": len(v)}
            text_at[at] = v
            data_bytes = at + len(v)
    header = json.dumps(header, sort_keys=True).encode()
    data_offset = (40 + len(header) + 63) // 64 * 64
    out = b"PIPIT\0\r\n" + struct.pack("<IIQQQ", version, 0, len(header), data_offset, data_bytes) + header
    out += b"\0" * (data_offset - len(out))
    body = bytearray(data_bytes)
    for e in entries:
        body[e["offset"]:e["offset"] + e["nbytes"]] = bytes((i * 7 + 3) % 251 for i in range(e["nbytes"]))
    for at, v in text_at.items():
        body[at:at + len(v)] = v
    return out + bytes(body)


def safetensors_seed():
    h = {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
         "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]}, "__metadata__": {"format": "pt"}}
    hb = json.dumps(h).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    return struct.pack("<Q", len(hb)) + hb + bytes(range(32))


class Gguf:
    def __init__(self):
        self.kv, self.n_kv, self.tensors = b"", 0, []

    @staticmethod
    def s(x):
        x = x.encode()
        return struct.pack("<Q", len(x)) + x

    def add(self, key, typ, payload):
        self.kv += self.s(key) + struct.pack("<I", typ) + payload
        self.n_kv += 1

    def u32(self, k, v): self.add(k, 4, struct.pack("<I", v))
    def f32(self, k, v): self.add(k, 6, struct.pack("<f", v))
    def str(self, k, v): self.add(k, 8, self.s(v))
    def boolean(self, k, v): self.add(k, 7, struct.pack("<B", v))

    def arr(self, k, typ, items):
        fmt = {4: "<I", 5: "<i", 6: "<f"}
        body = b"".join(self.s(x) if typ == 8 else struct.pack(fmt[typ], x) for x in items)
        self.add(k, 9, struct.pack("<IQ", typ, len(items)) + body)

    def tensor(self, name, typ, ne, data):
        self.tensors.append((name, typ, ne, data))

    def bytes(self, align=32):
        out = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), self.n_kv) + self.kv
        off, offs = 0, []
        for name, typ, ne, data in self.tensors:
            out += self.s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
            out += struct.pack("<IQ", typ, off)
            offs.append(off)
            off = (off + len(data) + align - 1) // align * align
        out += b"\0" * ((align - len(out) % align) % align)
        base = len(out)
        for (name, typ, ne, data), o in zip(self.tensors, offs):
            out += b"\0" * (base + o - len(out)) + data
        return out


def gguf_llama_seed():
    g = Gguf()
    g.str("general.architecture", "llama")
    for k, v in [("embedding_length", 32), ("block_count", 1), ("feed_forward_length", 32),
                 ("attention.head_count", 2), ("attention.head_count_kv", 1), ("context_length", 64)]:
        g.u32("llama." + k, v)
    g.f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    g.f32("llama.rope.freq_base", 10000.0)
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(4)] + ["\u2581", "a", "b", "\u2581a", "ab"]
    g.str("tokenizer.ggml.model", "llama")
    g.arr("tokenizer.ggml.tokens", 8, toks)
    g.arr("tokenizer.ggml.scores", 6, [0.0] * 7 + [-1.0, -2.0, -3.0, -4.0, -5.0])
    g.arr("tokenizer.ggml.token_type", 5, [2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1])
    g.u32("tokenizer.ggml.bos_token_id", 1)
    g.boolean("tokenizer.ggml.add_bos_token", 1)
    g.tensor("token_embd.weight", 0, [32, 12], bytes(32 * 12 * 4))
    g.tensor("blk.0.attn_q.weight", 8, [32, 32], bytes(32 * 34))
    g.tensor("blk.0.attn_k.weight", 0, [32, 16], bytes(range(256)) * 8)
    g.tensor("rope_freqs.weight", 0, [8], struct.pack("<8f", 1, 1, 1, 1.5, 2, 4, 4, 4))
    g.tensor("output_norm.weight", 0, [32], bytes(128))
    return g.bytes()


def gguf_gpt2_seed():
    g = Gguf()
    g.str("general.architecture", "qwen2")
    g.str("tokenizer.ggml.model", "gpt2")
    g.str("tokenizer.ggml.pre", "qwen2")
    g.arr("tokenizer.ggml.tokens", 8, ["a", "b", "ab", "\u0120", "\u0120ab", "<|im_start|>"])
    g.arr("tokenizer.ggml.token_type", 5, [1, 1, 1, 1, 1, 3])
    g.arr("tokenizer.ggml.merges", 8, ["a b", "\u0120 ab"])
    g.str("tokenizer.chat_template", "{{ x }}")
    return g.bytes()


def gguf_gemma4_vocab_seed():
    # Gemma 4's BPE vocabulary (tokenizer.ggml.model "gemma4": "▁" for spaces, <0xXX> byte fallback, merges)
    g = Gguf()
    g.str("general.architecture", "qwen2")
    g.str("tokenizer.ggml.model", "gemma4")
    g.arr("tokenizer.ggml.tokens", 8, ["<pad>", "<eos>", "<bos>", "<0x61>", "a", "\u2581", "\u2581a", "<turn|>"])
    g.arr("tokenizer.ggml.token_type", 5, [3, 3, 3, 6, 1, 1, 1, 3])
    g.arr("tokenizer.ggml.merges", 8, ["\u2581 a"])
    g.u32("tokenizer.ggml.bos_token_id", 2)
    g.u32("tokenizer.ggml.eos_token_id", 1)
    g.str("tokenizer.chat_template", "{{ bos_token }}")
    return g.bytes()


def pickle_seeds(out):
    try:
        import torch
    except ImportError:
        print("python3-torch not found: no pickle seeds")
        return
    import collections
    import zipfile
    sd = collections.OrderedDict()
    base = torch.arange(24, dtype=torch.float32)
    sd["a.weight"] = base[:12].reshape(3, 4)
    sd["b.weight"] = base[12:].reshape(4, 3).t()
    sd["c.bias"] = torch.ones(3, dtype=torch.bfloat16)
    sd["n"] = torch.nn.Parameter(torch.zeros(2, dtype=torch.float16), requires_grad=False)
    sd["ids"] = torch.arange(3)
    path = os.path.join(out, "state.pt")
    torch.save(sd, path)
    with zipfile.ZipFile(path) as z:
        pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
        open(os.path.join(out, "data.pkl"), "wb").write(z.read(pkl))


def video_seeds(out):
    try:
        import av
        import numpy as np
    except ImportError:
        return
    for name, codec, pix in [("h264.mp4", "libx264", "yuv420p"), ("vp9.webm", "libvpx-vp9", "yuv420p"),
                             ("ffv1.mkv", "ffv1", "bgr0"), ("mpeg4.avi", "mpeg4", "yuv420p")]:
        try:
            with av.open(os.path.join(out, name), "w") as c:
                s = c.add_stream(codec, rate=5)
                s.width, s.height, s.pix_fmt, s.gop_size = 16, 16, pix, 3
                for i in range(8):
                    a = np.full((16, 16, 3), i * 30, np.uint8)
                    for p in s.encode(av.VideoFrame.from_ndarray(a, format="rgb24")):
                        c.mux(p)
                for p in s.encode():
                    c.mux(p)
        except Exception:  # an encoder this FFmpeg lacks
            if os.path.exists(os.path.join(out, name)):
                os.remove(os.path.join(out, name))


def main():
    out = sys.argv[1]
    for d in ("pipit", "safetensors", "gguf", "pickle", "image", "video"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    open(os.path.join(out, "pipit", "small.pipit"), "wb").write(pipit_seed())
    open(os.path.join(out, "pipit", "small_v1.pipit"), "wb").write(pipit_seed(version=1))
    open(os.path.join(out, "safetensors", "small.safetensors"), "wb").write(safetensors_seed())
    open(os.path.join(out, "gguf", "llama.gguf"), "wb").write(gguf_llama_seed())
    open(os.path.join(out, "gguf", "gpt2.gguf"), "wb").write(gguf_gpt2_seed())
    open(os.path.join(out, "gguf", "gemma4_vocab.gguf"), "wb").write(gguf_gemma4_vocab_seed())
    pickle_seeds(os.path.join(out, "pickle"))
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
    for f in glob.glob(os.path.join(data, "jpeg", "*.jpg")) + glob.glob(os.path.join(data, "resize", "*.png")):
        if os.path.getsize(f) < 4096:
            shutil.copy(f, os.path.join(out, "image", os.path.basename(f)))
    video_seeds(os.path.join(out, "video"))


if __name__ == "__main__":
    main()

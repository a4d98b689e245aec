#!/usr/bin/env python3
"""Makes the files of tests/e2e/llamacpp_gguf_test.py (issue 13's acceptance): GGUF files quantized by llama.cpp's own
llama-quantize with its default mixes (not --pure), their dequantize-then-f32 references, and llama.cpp's greedy text.

usage: make_llamacpp_gguf.py LLAMA_CPP_SRC LLAMA_CPP_BUILD TESTDATA OUT_DIR

Two models, both with stories260k's real SentencePiece vocabulary (512 pieces, scores from original/tok512.bin,
tokenizer.ggml.model "llama", BOS added):
  stories260k  - the trained llama checkpoint (hidden 64: no row is a multiple of 256, so every K-type takes
                 llama.cpp's fallbacks; q/k rows permuted the way convert_hf_to_gguf.py's LlamaModel does);
  qwen3_tiny   - a random Qwen3-shaped model, hidden 256, ffn 256, 1 layer, 4 q / 2 kv heads of 64, tied embeddings,
                 so Q4_K / Q5_K / Q6_K / IQ4_XS are really used (rows are whole 256-blocks).
Both are written as F32 GGUF (gguf-py's writer), then `llama-quantize SRC DST TYPE` for Q4_0 Q4_K_M Q5_K_M Q6_K IQ4_XS.
Reference for each quantized file: gguf-py's numpy dequantizer (gguf/quants.py, llama.cpp's own) on every tensor ->
the same model in F32 -> `pipit logits` (pipit's f32 path, checked <= 1e-3 against HF goldens elsewhere) on fixed ids.
llama.cpp's greedy text: `llama-simple -m FILE -n N PROMPT` (greedy sampler) on the quantized file (LLAMA_SIMPLE: its
path when the build has no examples: g++ examples/simple/simple.cpp against libllama works), and the same
run's token ids from llama_greedy.cpp (examples/simple's steps, built here against the llama.cpp build).
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

SRC, BUILD, TESTDATA, OUT = (sys.argv[1:5] + [None] * 4)[:4]
sys.path.insert(0, os.path.join(SRC or "/tmp/lc/src", "gguf-py"))
import gguf  # noqa: E402
from gguf import quants  # noqa: E402

PIPIT = os.environ.get("PIPIT", "build/pipit")
TYPES = ["Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS"]
PROMPT = "Once upon a time"
N_GEN = 24
# Ids for the logits comparison: BOS then 9 seeded ids of the vocabulary (any ids do for logits; seeded so the
# files are reproducible).
IDS = [1] + [int(x) for x in np.random.default_rng(7).integers(3, 512, size=9)]
STORIES = os.path.join(TESTDATA or "", "models", "stories260k")


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = {"F32": np.float32, "I32": np.int32, "F16": np.float16, "BF16": None}[v["dtype"]]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).reshape(v["shape"])
    return out


def write_safetensors(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k, a in tensors.items():
        a = np.ascontiguousarray(a)
        dt = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32"}[a.dtype]
        hdr[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def vocab():
    tj = json.load(open(os.path.join(STORIES, "tokenizer.json")))
    v = tj["model"]["vocab"]
    toks = [None] * len(v)
    for t, i in v.items():
        toks[i] = t
    b = open(os.path.join(STORIES, "original", "tok512.bin"), "rb").read()
    o, scores = 4, []
    for _ in toks:
        s, n = struct.unpack("<fi", b[o:o + 8])
        scores.append(s)
        o += 8 + n
    types = []
    for i, t in enumerate(toks):
        if i == 0:
            types.append(gguf.TokenType.UNKNOWN)
        elif i in (1, 2):
            types.append(gguf.TokenType.CONTROL)
        elif t.startswith("<0x") and len(t) == 6:
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
    return toks, scores, types


def write_gguf(path, arch, hp, tensors):
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(path))
    w.add_context_length(hp["ctx"])
    w.add_embedding_length(hp["hidden"])
    w.add_block_count(hp["layers"])
    w.add_feed_forward_length(hp["ff"])
    w.add_head_count(hp["nq"])
    w.add_head_count_kv(hp["nkv"])
    w.add_layer_norm_rms_eps(hp["eps"])
    w.add_rope_freq_base(hp["theta"])
    w.add_rope_dimension_count(hp["hd"])
    w.add_key_length(hp["hd"])
    w.add_value_length(hp["hd"])
    w.add_vocab_size(512)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    toks, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    for name, a in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


LAYER = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
         "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
         "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
         "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
         "mlp.down_proj.weight": "ffn_down.weight"}


def gguf_names(hf):
    out = {}
    for k, a in hf.items():
        if k == "model.embed_tokens.weight":
            out["token_embd.weight"] = a
        elif k == "model.norm.weight":
            out["output_norm.weight"] = a
        elif k == "lm_head.weight":
            continue  # tied
        else:
            p = k.split(".")
            out[f"blk.{p[2]}.{LAYER['.'.join(p[3:])]}"] = a
    return out


def permute(w, n_head):  # HF rotate-half rows -> llama.cpp's interleaved rows (LlamaModel.permute)
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def stories():
    cfg = json.load(open(os.path.join(STORIES, "config.json")))
    hf = read_safetensors(os.path.join(STORIES, "model.safetensors"))
    t = gguf_names({k: v.astype(np.float32) for k, v in hf.items()})
    for k in list(t):
        if k.endswith("attn_q.weight"):
            t[k] = permute(t[k], cfg["num_attention_heads"])
        if k.endswith("attn_k.weight"):
            t[k] = permute(t[k], cfg["num_key_value_heads"])
    hp = dict(ctx=512, hidden=64, layers=5, ff=172, nq=8, nkv=4, eps=1e-5, theta=10000.0, hd=8)
    return "llama", hp, t


def qwen3_tiny():
    H, F, L, V, hd, nq, nkv = 256, 256, 1, 512, 64, 4, 2
    g = np.random.default_rng(1234)
    emb = g.normal(0, 1.0, (V, H))
    emb[:259] *= 0.1  # unk/BOS/EOS and byte pieces: small rows of the tied head, so greedy text is words
    t = {"token_embd.weight": emb}
    for l in range(L):
        p = f"blk.{l}."
        for n in ("attn_norm", "ffn_norm"):
            t[p + n + ".weight"] = g.normal(1.0, 0.05, H)
        for n in ("attn_q_norm", "attn_k_norm"):
            t[p + n + ".weight"] = g.normal(1.0, 0.05, hd)
        t[p + "attn_q.weight"] = g.normal(0, 0.15, (nq * hd, H))
        t[p + "attn_k.weight"] = g.normal(0, 0.15, (nkv * hd, H))
        t[p + "attn_v.weight"] = g.normal(0, 0.15, (nkv * hd, H))
        t[p + "attn_output.weight"] = g.normal(0, 0.15, (H, nq * hd))
        t[p + "ffn_gate.weight"] = g.normal(0, 0.15, (F, H))
        t[p + "ffn_up.weight"] = g.normal(0, 0.15, (F, H))
        t[p + "ffn_down.weight"] = g.normal(0, 0.15, (H, F))
    t["output_norm.weight"] = g.normal(1.0, 0.05, H)
    hp = dict(ctx=4096, hidden=H, layers=L, ff=F, nq=nq, nkv=nkv, eps=1e-6, theta=1000000.0, hd=hd)
    return "qwen3", hp, t


def main():
    os.makedirs(OUT, exist_ok=True)
    tmp = os.path.join(OUT, "tmp")
    os.makedirs(tmp, exist_ok=True)
    write_safetensors(os.path.join(tmp, "ids.safetensors"), {"input_ids": np.array([IDS], dtype=np.int32)})
    summary = {}
    greedy = os.path.join(tmp, "llama_greedy")
    lib = os.path.join(BUILD, "bin")
    subprocess.run(["g++", "-O1", "-std=c++17", "-I" + os.path.join(SRC, "include"), "-I" + os.path.join(SRC, "ggml", "include"),
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama_greedy.cpp"), "-o", greedy,
                    "-L" + lib, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + lib], check=True)
    for name, make in (("stories260k", stories), ("qwen3_tiny", qwen3_tiny)):
        arch, hp, t = make()
        src = os.path.join(tmp, f"{name}-F32.gguf")
        write_gguf(src, arch, hp, t)
        for qt in TYPES:
            dst = os.path.join(OUT, f"{name}-{qt}.gguf")
            subprocess.run([os.path.join(BUILD, "bin", "llama-quantize"), src, dst, qt, "1"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            r = gguf.GGUFReader(dst)
            deq, kinds = {}, {}
            for ti in r.tensors:
                shape = [int(x) for x in reversed(ti.shape.tolist())]
                a = quants.dequantize(ti.data, ti.tensor_type) if ti.tensor_type not in (
                    gguf.GGMLQuantizationType.F32,) else np.array(ti.data)
                deq[ti.name] = np.asarray(a, dtype=np.float32).reshape(shape)
                kinds[ti.name] = ti.tensor_type.name
            ref = os.path.join(tmp, f"{name}-{qt}-dequant-F32.gguf")
            write_gguf(ref, arch, hp, deq)
            lg = os.path.join(tmp, f"{name}-{qt}-logits.safetensors")
            subprocess.run([PIPIT, "logits", "-m", ref, "-t", "1", "--kv-type", "f32", "--input", os.path.join(tmp, "ids.safetensors"),
                            "--output", lg], check=True, stdout=subprocess.DEVNULL)
            logits = read_safetensors(lg)["logits"]
            # llama-simple prints the prompt's pieces (BOS as "<s>", "▁" as a space), then each greedy token's
            # piece, then a newline; the continuation is what follows the prompt's echo.
            p = subprocess.run([os.environ.get("LLAMA_SIMPLE", os.path.join(BUILD, "bin", "llama-simple")), "-m", dst, "-n", str(N_GEN), PROMPT],
                               capture_output=True, check=True)
            out = p.stdout.decode("utf-8")
            echo = "<s> " + PROMPT
            assert out.startswith(echo) and out.endswith("\n"), out
            text = out[len(echo):-1]
            # the same greedy run with its token ids (llama_greedy.cpp: examples/simple's steps, ids as JSON)
            g = json.loads(subprocess.run([greedy, dst, str(N_GEN), PROMPT], capture_output=True, check=True).stdout)
            write_safetensors(os.path.join(OUT, f"{name}-{qt}.ref.safetensors"),
                              {"input_ids": np.array([IDS], dtype=np.int32), "logits": logits.astype(np.float32)})
            summary[f"{name}-{qt}"] = {"types": sorted(set(kinds.values())), "tensor_types": kinds,
                                        "llama_text": text, "llama_prompt_ids": g["prompt_ids"], "llama_ids": g["ids"], "bytes": os.path.getsize(dst)}
            print(name, qt, os.path.getsize(dst), sorted(set(kinds.values())), repr(text), flush=True)
    json.dump({"prompt": PROMPT, "n_gen": N_GEN, "files": summary}, open(os.path.join(OUT, "llamacpp.json"), "w"),
              indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

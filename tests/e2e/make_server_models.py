#!/usr/bin/env python3
"""Makes the checkpoints the server tests and the load benchmark chat with: tiny random-weight HF models whose
vocabulary is the real Qwen3 tokenizer (151669 ids), with its tokenizer files and chat template, so prompts go
through the real chat template and tokenizer while a forward pass stays cheap.

  qwen3_chat/    Qwen3ForCausalLM with the dimensions of testdata/models/qwen3 (hidden 64, 3 layers), vocab 151669.
  qwen2_vl_chat/ Qwen2VLForConditionalGeneration (hidden 64, 2 layers, tied embeddings; a 1-block vision tower of
                 width 32), the Qwen2-VL chat template and image processor, image tokens at the real Qwen ids.
  qwen3_vl_chat/ testdata/models/qwen3_vl (the shared tiny Qwen3-VL: DeepStack tower, vocab 1024) with the toy
                 tokenizer of tests/data/vl_tokenizer (Qwen's special tokens at the checkpoint's ids, Qwen-VL template).
  qwen3_5_vl_chat/ testdata/models/qwen3_5_vl (tiny Qwen3.5 with images and video, vocab 512) with stories260k's
                 tokenizer, Qwen's special tokens at the checkpoint's ids, and the Qwen-VL chat template.

Usage: make_server_models.py OUT_DIR TESTDATA_DIR
Deterministic (fixed seeds); needs only numpy. Writes each folder atomically (a temp folder, then rename), so
concurrent test runs see either nothing or a complete checkpoint.
"""
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

VOCAB = 151669  # tokenizer.json: highest id + 1, added tokens included
STAMP = "2"     # bump when a model changes: folders with another stamp are rebuilt


def bf16_bytes(a):
    """float32 -> bfloat16 bytes, round to nearest even (as torch does)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r.tobytes()


def write_safetensors(path, tensors):
    """tensors: name -> float32 array, stored as BF16; names sorted, header padded to 8 bytes."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = bf16_bytes(tensors[name])
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def qwen3_weights(rng, cfg):
    H, F, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, nkv, hd, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["vocab_size"]

    def w(*shape, std=0.25):
        return rng.standard_normal(shape).astype(np.float32) * std

    def norm(n):
        return 1.0 + w(n, std=0.05)

    # Embeddings (tied to the output) large enough that logits are peaked: greedy picks are clear, not near-ties.
    t = {"model.embed_tokens.weight": w(V, H, std=0.5), "model.norm.weight": norm(H)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = w(nh * hd, H)
        t[p + "self_attn.k_proj.weight"] = w(nkv * hd, H)
        t[p + "self_attn.v_proj.weight"] = w(nkv * hd, H)
        t[p + "self_attn.o_proj.weight"] = w(H, nh * hd)
        t[p + "self_attn.q_norm.weight"] = norm(hd)
        t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "mlp.gate_proj.weight"] = w(F, H)
        t[p + "mlp.up_proj.weight"] = w(F, H)
        t[p + "mlp.down_proj.weight"] = w(H, F)
    return t


def make_qwen3_chat(out, testdata):
    src = os.path.join(testdata, "models", "qwen3", "config.json")
    with open(src) as f:
        cfg = json.load(f)
    cfg.update({"vocab_size": VOCAB, "bos_token_id": 151643, "eos_token_id": 151645, "max_position_embeddings": 4096})
    rng = np.random.default_rng(20250607)
    write_safetensors(os.path.join(out, "model.safetensors"), qwen3_weights(rng, cfg))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": True,
                   "temperature": 0.6, "top_p": 0.95, "top_k": 20}, f, indent=2)
    tok = os.path.join(testdata, "tokenizers", "qwen3")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, name), os.path.join(out, name))


def qwen2_vl_weights(rng, cfg):
    t = qwen3_weights(rng, dict(cfg, head_dim=cfg["hidden_size"] // cfg["num_attention_heads"]))
    for name in [k for k in t if "q_norm" in k or "k_norm" in k]:
        del t[name]  # Qwen2: q/k/v biases instead of q/k norms
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg["hidden_size"] // nh
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn."
        t[p + "q_proj.bias"] = rng.standard_normal(nh * hd).astype(np.float32) * 0.1
        t[p + "k_proj.bias"] = rng.standard_normal(nkv * hd).astype(np.float32) * 0.1
        t[p + "v_proj.bias"] = rng.standard_normal(nkv * hd).astype(np.float32) * 0.1
    v = cfg["vision_config"]
    E, R, M = v["embed_dim"], v["mlp_ratio"], v["spatial_merge_size"] ** 2

    def w(*shape, std=0.1):
        return rng.standard_normal(shape).astype(np.float32) * std

    t["visual.patch_embed.proj.weight"] = w(E, 3, v["temporal_patch_size"], v["patch_size"], v["patch_size"], std=0.02)
    for i in range(v["depth"]):
        p = f"visual.blocks.{i}."
        t.update({p + "attn.qkv.weight": w(3 * E, E), p + "attn.qkv.bias": w(3 * E),
                  p + "attn.proj.weight": w(E, E), p + "attn.proj.bias": w(E),
                  p + "mlp.fc1.weight": w(E * R, E), p + "mlp.fc1.bias": w(E * R),
                  p + "mlp.fc2.weight": w(E, E * R), p + "mlp.fc2.bias": w(E),
                  p + "norm1.weight": 1 + w(E), p + "norm1.bias": w(E),
                  p + "norm2.weight": 1 + w(E), p + "norm2.bias": w(E)})
    t.update({"visual.merger.ln_q.weight": 1 + w(E), "visual.merger.ln_q.bias": w(E),
              "visual.merger.mlp.0.weight": w(E * M, E * M), "visual.merger.mlp.0.bias": w(E * M),
              "visual.merger.mlp.2.weight": w(v["hidden_size"], E * M, std=0.5),
              "visual.merger.mlp.2.bias": w(v["hidden_size"])})
    return t


def make_qwen2_vl_chat(out, testdata):
    src = os.path.join(testdata, "models", "qwen2_vl")
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    text = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True,
            "bos_token_id": 151643, "eos_token_id": 151645, "max_position_embeddings": 4096,
            "rope_scaling": {"mrope_section": [2, 3, 3], "rope_type": "default", "type": "mrope"}}
    cfg.update(text)
    cfg["text_config"].update(text)
    cfg.update({"image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
                "vision_end_token_id": 151653, "vision_token_id": 151654})
    cfg["vision_config"].update({"depth": 1, "embed_dim": 32, "num_heads": 2, "mlp_ratio": 2, "hidden_size": 64})
    rng = np.random.default_rng(20250608)
    write_safetensors(os.path.join(out, "model.safetensors"), qwen2_vl_weights(rng, cfg))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": False}, f, indent=2)
    shutil.copy(os.path.join(src, "preprocessor_config.json"), os.path.join(out, "preprocessor_config.json"))
    tok = os.path.join(testdata, "tokenizers", "qwen3")
    shutil.copy(os.path.join(tok, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    with open(os.path.join(tok, "tokenizer_config.json")) as f:
        tc = json.load(f)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chat_templates",
                           "qwen2_vl.jinja")) as f:
        tc["chat_template"] = f.read()
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)


def make_qwen3_vl_chat(out, testdata):
    src = os.path.join(testdata, "models", "qwen3_vl")
    for f in ("config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json"):
        shutil.copy(os.path.join(src, f), os.path.join(out, f))
    tok = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vl_tokenizer")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), os.path.join(out, f))


def make_qwen3_5_vl_chat(out, testdata):
    src = os.path.join(testdata, "models", "qwen3_5_vl")
    for f in ("config.json", "generation_config.json", "preprocessor_config.json", "video_preprocessor_config.json",
              "model.safetensors"):
        shutil.copy(os.path.join(src, f), os.path.join(out, f))
    # HF gives an added token the vocab's id for its content: the special tokens take the places of the vocab pieces
    # at those ids (single characters, which then fall back to bytes); merges using those pieces are dropped
    with open(os.path.join(testdata, "models", "stories260k", "tokenizer.json")) as f:
        tok = json.load(f)
    vocab, gone = tok["model"]["vocab"], set()
    for i, c in [(480, "<|endoftext|>"), (481, "<|im_start|>"), (482, "<|im_end|>"), (489, "<|vision_start|>"),
                 (490, "<|vision_end|>"), (492, "<|image_pad|>"), (493, "<|video_pad|>")]:
        k = next(k for k, v in vocab.items() if v == i)
        gone.add(k)
        del vocab[k]
        vocab[c] = i
        tok["added_tokens"].append({"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                                    "normalized": False, "special": True})
    tok["model"]["merges"] = [m for m in tok["model"]["merges"] if not set(m.split(" ", 1)) & gone]
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    vl = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vl_tokenizer")
    with open(os.path.join(vl, "tokenizer_config.json")) as f:
        template = json.load(f)["chat_template"]
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": None, "eos_token": "<|im_end|>", "chat_template": template}, f)


def build(out_root, name, fn, testdata):
    final = os.path.join(out_root, name)
    stamp = os.path.join(final, "STAMP")
    if os.path.exists(stamp) and open(stamp).read() == STAMP:
        return
    shutil.rmtree(final, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix=name + ".", dir=out_root)
    fn(tmp, testdata)
    with open(os.path.join(tmp, "STAMP"), "w") as f:
        f.write(STAMP)
    try:
        os.rename(tmp, final)
    except OSError:  # another run finished first
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out_root, testdata = sys.argv[1], sys.argv[2]
    os.makedirs(out_root, exist_ok=True)
    build(out_root, "qwen3_chat", make_qwen3_chat, testdata)
    build(out_root, "qwen2_vl_chat", make_qwen2_vl_chat, testdata)
    build(out_root, "qwen3_vl_chat", make_qwen3_vl_chat, testdata)
    build(out_root, "qwen3_5_vl_chat", make_qwen3_5_vl_chat, testdata)
    print(f"[make_server_models] models in {out_root}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A Qwen3 decoder written in Python with pipit's eager ops: how a new model is prototyped before it moves to
models/*.cpp. Every op is the engine's kernel (matmul on bf16 / quantized weights, RMSNorm, RoPE, attention, SwiGLU),
so the logits match the C++ model's. Reference: HF modeling_qwen3.py (Qwen3DecoderLayer, Qwen3Attention).

    python3 qwen3_eager.py MODEL_DIR 1 5 9 ...     # prints the argmax token of every position
"""
import json
import os
import sys

import numpy as np

import pipit
from pipit import ops


def forward(w, cfg, ids):
    """Logits [len(ids), vocab] of one pass over ids from position 0. w: name -> pipit.Tensor (HF names)."""
    n, eps = len(ids), cfg["rms_norm_eps"]
    n_head, n_kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    inv_freq, attn_factor = pipit.rope_freqs(cfg, hd)
    pos = np.arange(n, dtype=np.int32)
    x = ops.embedding(w["model.embed_tokens.weight"], ids)                       # [n, n_embd]
    for il in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{il}."
        h = ops.rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = ops.matmul(h, w[p + "self_attn.q_proj.weight"]).reshape(n, n_head, hd)
        k = ops.matmul(h, w[p + "self_attn.k_proj.weight"]).reshape(n, n_kv, hd)
        v = ops.matmul(h, w[p + "self_attn.v_proj.weight"]).reshape(n, n_kv, hd)
        q = ops.rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)               # per head, over head_dim
        k = ops.rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = ops.rope(q, pos, inv_freq, attn_factor)
        k = ops.rope(k, pos, inv_freq, attn_factor)
        a = ops.attention(q, k, v)                                               # causal, GQA
        x = x + ops.matmul(a.reshape(n, n_head * hd), w[p + "self_attn.o_proj.weight"])
        h = ops.rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = ops.swiglu(ops.matmul(h, w[p + "mlp.gate_proj.weight"]), ops.matmul(h, w[p + "mlp.up_proj.weight"]))
        x = x + ops.matmul(g, w[p + "mlp.down_proj.weight"])
    x = ops.rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])               # tied embeddings
    return ops.matmul(x, head)


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    return pipit.load_safetensors(os.path.join(model_dir, "model.safetensors")), cfg


if __name__ == "__main__":
    weights, config = load(sys.argv[1])
    print(forward(weights, config, [int(t) for t in sys.argv[2:]]).argmax(-1).tolist())

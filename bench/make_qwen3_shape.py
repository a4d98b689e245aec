#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like Qwen3-0.6B, 1.7B or 4B (bf16, ~1.2 / 3.4 / 8.0 GB) for the
load-time and speed benchmarks (bench/make_bench_models.sh turns it into GGUF files for llama.cpp).

usage: make_qwen3_shape.py OUT_DIR [--size 0.6b|1.7b|4b] [--layers N]

0.6b: hidden 1024, 28 layers, 16 query / 8 key-value heads, head_dim 128, intermediate 3072, vocab 151936, tied
embeddings. 1.7b: hidden 2048, intermediate 6144, otherwise the same. 4b (the Hub's Qwen3-4B config.json): hidden
2560, 36 layers, 32 query heads, intermediate 9728, otherwise the same. Weights ~ N(0, 0.02), norms 1. Written as one model.safetensors (header then tensors, sorted by name),
plus config.json and generation_config.json. Needs only numpy (Debian python3-numpy). Do not write it into the repo.
"""
import json
import os
import struct
import sys

import numpy as np

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB = 1024, 28, 16, 8, 128, 3072, 151936
SIZES = {"0.6b": (1024, 3072, 28, 16), "1.7b": (2048, 6144, 28, 16), "4b": (2560, 9728, 36, 32)}  # hidden, intermediate, layers, query heads


def shapes(n_layers):
    s = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,)}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        s.update({
            p + "input_layernorm.weight": (HIDDEN,),
            p + "post_attention_layernorm.weight": (HIDDEN,),
            p + "self_attn.q_proj.weight": (HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.k_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.v_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.o_proj.weight": (HIDDEN, HEADS * HEAD_DIM),
            p + "self_attn.q_norm.weight": (HEAD_DIM,),
            p + "self_attn.k_norm.weight": (HEAD_DIM,),
            p + "mlp.gate_proj.weight": (FF, HIDDEN),
            p + "mlp.up_proj.weight": (FF, HIDDEN),
            p + "mlp.down_proj.weight": (HIDDEN, FF),
        })
    return dict(sorted(s.items()))


def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even."""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def write_random_safetensors(path, sh):
    """One bf16 safetensors file of the tensors `sh` (name -> shape, written in that order): matrices ~ N(0, 0.02),
    1-d tensors 1 (norm weights), or 0 when the name ends in "bias". Returns the bytes of tensor data."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, s in sh.items():
        n = int(np.prod(s)) * 2
        header[name] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, s in sh.items():
            if len(s) == 1:
                x = np.zeros(s, dtype=np.float32) if name.endswith("bias") else np.ones(s, dtype=np.float32)
            else:
                x = rng.standard_normal(s, dtype=np.float32) * np.float32(0.02)
            f.write(to_bf16(x).tobytes())
    return off


def main():
    global HIDDEN, FF, LAYERS, HEADS
    out = sys.argv[1]
    if "--size" in sys.argv:
        HIDDEN, FF, LAYERS, HEADS = SIZES[sys.argv[sys.argv.index("--size") + 1]]
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else LAYERS
    os.makedirs(out, exist_ok=True)
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": HIDDEN,
        "intermediate_size": FF, "num_hidden_layers": n_layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB, "tie_word_embeddings": True,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 40960, "hidden_act": "silu",
        "attention_bias": False, "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
    }
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 151643, "eos_token_id": 151645}, open(os.path.join(out, "generation_config.json"), "w"))

    sh = shapes(n_layers)
    size = write_random_safetensors(os.path.join(out, "model.safetensors"), sh)
    print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {size / 1e9:.2f} GB (numpy {np.__version__})")

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like openai/gpt-oss-20b but with fewer layers, experts in MXFP4 as
the Hub ships them (*_blocks / *_scales U8 tensors, quantization_config quant_method mxfp4), for `pipit bench` and
for llama.cpp's converter (convert_hf_to_gguf.py reads the same layout).

usage: make_gpt_oss_shape.py OUT_DIR [--layers N]     (default 4: 2 sliding-window + 2 full-attention layers)

Shape (gpt-oss-20b config.json): hidden 2880, 64 query / 8 key-value heads of 64, 32 experts of intermediate 2880,
top-4, vocab 201088, untied lm_head, sliding window 128 on even layers, YaRN (factor 32, original context 4096,
truncate false), attention biases and sinks. Non-expert weights bf16 ~ N(0, 0.02) (norms 1, biases 0, sinks 0);
expert blocks uniform random bytes with exponents 118..122 (values ~ +-0.01..0.1). ~4 GB at 4 layers (embedding and
lm_head alone are 2.3 GB). No tokenizer: the bench draws random tokens. Needs only numpy (and make_qwen3_shape.py
beside it). Do not write it into the repo.
"""
import json
import os
import struct
import sys

import numpy as np

from make_qwen3_shape import to_bf16  # same folder

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FF, EXPERTS, TOPK, VOCAB = 2880, 64, 8, 64, 2880, 32, 4, 201088


def tensors(n_layers):
    """name -> (dtype, shape): 'bf16' or 'u8' (mxfp4 blocks / scales)."""
    t = {"model.embed_tokens.weight": ("bf16", (VOCAB, HIDDEN)), "model.norm.weight": ("bf16", (HIDDEN,)),
         "lm_head.weight": ("bf16", (VOCAB, HIDDEN))}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        t.update({
            p + "input_layernorm.weight": ("bf16", (HIDDEN,)),
            p + "post_attention_layernorm.weight": ("bf16", (HIDDEN,)),
            p + "self_attn.q_proj.weight": ("bf16", (HEADS * HEAD_DIM, HIDDEN)),
            p + "self_attn.q_proj.bias": ("bf16", (HEADS * HEAD_DIM,)),
            p + "self_attn.k_proj.weight": ("bf16", (KV_HEADS * HEAD_DIM, HIDDEN)),
            p + "self_attn.k_proj.bias": ("bf16", (KV_HEADS * HEAD_DIM,)),
            p + "self_attn.v_proj.weight": ("bf16", (KV_HEADS * HEAD_DIM, HIDDEN)),
            p + "self_attn.v_proj.bias": ("bf16", (KV_HEADS * HEAD_DIM,)),
            p + "self_attn.o_proj.weight": ("bf16", (HIDDEN, HEADS * HEAD_DIM)),
            p + "self_attn.o_proj.bias": ("bf16", (HIDDEN,)),
            p + "self_attn.sinks": ("bf16", (HEADS,)),
            p + "mlp.router.weight": ("bf16", (EXPERTS, HIDDEN)),
            p + "mlp.router.bias": ("bf16", (EXPERTS,)),
            p + "mlp.experts.gate_up_proj_blocks": ("u8", (EXPERTS, 2 * FF, HIDDEN // 32, 16)),
            p + "mlp.experts.gate_up_proj_scales": ("u8", (EXPERTS, 2 * FF, HIDDEN // 32)),
            p + "mlp.experts.gate_up_proj_bias": ("bf16", (EXPERTS, 2 * FF)),
            p + "mlp.experts.down_proj_blocks": ("u8", (EXPERTS, HIDDEN, FF // 32, 16)),
            p + "mlp.experts.down_proj_scales": ("u8", (EXPERTS, HIDDEN, FF // 32)),
            p + "mlp.experts.down_proj_bias": ("bf16", (EXPERTS, HIDDEN)),
        })
    return t


def main():
    out = sys.argv[1]
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 4
    os.makedirs(out, exist_ok=True)
    cfg = {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": HIDDEN,
        "intermediate_size": FF, "num_hidden_layers": n_layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "num_local_experts": EXPERTS,
        "num_experts_per_tok": TOPK, "experts_per_token": TOPK, "vocab_size": VOCAB, "tie_word_embeddings": False,
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)],
        "sliding_window": 128, "rope_theta": 150000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                         "original_max_position_embeddings": 4096},
        "initial_context_length": 4096, "rms_norm_eps": 1e-5, "attention_bias": True, "swiglu_limit": 7.0,
        "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 199998, "eos_token_id": 200002,
        "pad_token_id": 199999,
        "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
            "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
    }
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 199998, "eos_token_id": [200002, 199999]},
              open(os.path.join(out, "generation_config.json"), "w"))
    t = tensors(n_layers)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, (dt, s) in t.items():
        n = int(np.prod(s)) * (2 if dt == "bf16" else 1)
        header[name] = {"dtype": "BF16" if dt == "bf16" else "U8", "shape": list(s), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name, (dt, s) in t.items():
            if dt == "u8":
                if name.endswith("_scales"):
                    x = rng.integers(118, 123, size=s, dtype=np.uint8)
                else:
                    x = rng.integers(0, 256, size=s, dtype=np.uint8)
                f.write(x.tobytes())
            elif len(s) == 1 or name.endswith("_bias"):
                ones = not (name.endswith("bias") or name.endswith("sinks"))
                f.write(to_bf16(np.full(s, 1.0 if ones else 0.0, dtype=np.float32)).tobytes())
            else:
                rows = s[0]
                for r0 in range(0, rows, 8192):  # bounded memory for the 201088-row tables
                    x = rng.standard_normal((min(8192, rows - r0),) + tuple(s[1:]), dtype=np.float32) * np.float32(0.02)
                    f.write(to_bf16(x).tobytes())
    print(f"wrote {out}: {n_layers} layers, {off / 1e9:.2f} GB of tensors")


if __name__ == "__main__":
    main()

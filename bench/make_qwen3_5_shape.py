#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like the text model of Qwen3.5-0.8B (bf16, ~1.5 GB) for the speed
benchmarks: `pipit bench` on it, or llama.cpp on its GGUF conversion (arch qwen35).

usage: make_qwen3_5_shape.py OUT_DIR [--layers N] [--mtp]

Qwen/Qwen3.5-0.8B's text_config: hidden 1024, 24 layers (3 Gated DeltaNet : 1 gated full attention), full
attention 8 query / 2 key-value heads of head_dim 256 (q_proj also gives the output gate), partial rotary 0.25,
linear attention 16 key / 16 value heads of 128 dims, conv kernel 4, intermediate 3584, vocab 248320, tied
embeddings. Written as Qwen3_5ForCausalLM (model_type qwen3_5_text, tensors model.*; no vision tower; --mtp adds the
multi-token-prediction head as the Hub files carry it: mtp.fc [1024, 2048], mtp.pre_fc_norm_{embedding,hidden},
mtp.norm and one full-attention layer mtp.layers.0.*, mtp_num_hidden_layers 1).
Weights ~ N(0, 0.02), 1-D tensors 1 (norm weights; A_log = 1 and dt_bias = 1 give every head the same moderate
decay). Needs only numpy (and make_qwen3_shape.py beside it). Do not write it into the repo.
"""
import json
import os
import sys

import numpy as np

from make_qwen3_shape import write_random_safetensors  # same folder: the bf16 safetensors writer

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB = 1024, 24, 8, 2, 256, 3584, 248320
LK_HEADS, LV_HEADS, LK_DIM, LV_DIM, CONV = 16, 16, 128, 128, 4


def layer_types(n):
    return ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)]


def shapes(n_layers, mtp=False):
    s = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,)}
    conv_dim = 2 * LK_HEADS * LK_DIM + LV_HEADS * LV_DIM
    layers = [(f"model.layers.{i}.", kind) for i, kind in enumerate(layer_types(n_layers))]
    if mtp:
        layers.append(("mtp.layers.0.", "full_attention"))
        s.update({"mtp.fc.weight": (HIDDEN, 2 * HIDDEN), "mtp.pre_fc_norm_embedding.weight": (HIDDEN,),
                  "mtp.pre_fc_norm_hidden.weight": (HIDDEN,), "mtp.norm.weight": (HIDDEN,)})
    for p, kind in layers:
        s.update({
            p + "input_layernorm.weight": (HIDDEN,),
            p + "post_attention_layernorm.weight": (HIDDEN,),
            p + "mlp.gate_proj.weight": (FF, HIDDEN),
            p + "mlp.up_proj.weight": (FF, HIDDEN),
            p + "mlp.down_proj.weight": (HIDDEN, FF),
        })
        if kind == "full_attention":
            a = p + "self_attn."
            s.update({
                a + "q_proj.weight": (2 * HEADS * HEAD_DIM, HIDDEN),
                a + "k_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
                a + "v_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
                a + "o_proj.weight": (HIDDEN, HEADS * HEAD_DIM),
                a + "q_norm.weight": (HEAD_DIM,),
                a + "k_norm.weight": (HEAD_DIM,),
            })
        else:
            a = p + "linear_attn."
            s.update({
                a + "in_proj_qkv.weight": (conv_dim, HIDDEN),
                a + "in_proj_z.weight": (LV_HEADS * LV_DIM, HIDDEN),
                a + "in_proj_b.weight": (LV_HEADS, HIDDEN),
                a + "in_proj_a.weight": (LV_HEADS, HIDDEN),
                a + "conv1d.weight": (conv_dim, 1, CONV),
                a + "A_log": (LV_HEADS,),
                a + "dt_bias": (LV_HEADS,),
                a + "norm.weight": (LV_DIM,),
                a + "out_proj.weight": (HIDDEN, LV_HEADS * LV_DIM),
            })
    return dict(sorted(s.items()))


def main():
    out = sys.argv[1]
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else LAYERS
    mtp = "--mtp" in sys.argv
    os.makedirs(out, exist_ok=True)
    cfg = {
        "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": HIDDEN,
        "intermediate_size": FF, "num_hidden_layers": n_layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB, "tie_word_embeddings": True,
        "rms_norm_eps": 1e-6, "max_position_embeddings": 262144, "hidden_act": "silu", "attention_bias": False,
        "attn_output_gate": True, "full_attention_interval": 4, "layer_types": layer_types(n_layers),
        "linear_num_key_heads": LK_HEADS, "linear_num_value_heads": LV_HEADS, "linear_key_head_dim": LK_DIM,
        "linear_value_head_dim": LV_DIM, "linear_conv_kernel_dim": CONV, "mamba_ssm_dtype": "float32",
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "rope_type": "default",
                            "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        "dtype": "bfloat16", "bos_token_id": 248044, "eos_token_id": 248044,
    }
    if mtp:
        cfg.update(mtp_num_hidden_layers=1, mtp_use_dedicated_embeddings=False)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 248044, "eos_token_id": 248044}, open(os.path.join(out, "generation_config.json"), "w"))
    sh = shapes(n_layers, mtp)
    size = write_random_safetensors(os.path.join(out, "model.safetensors"), sh)
    print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {size / 1e9:.2f} GB (numpy {np.__version__})")


if __name__ == "__main__":
    main()

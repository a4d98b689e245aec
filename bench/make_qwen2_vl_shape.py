#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like Qwen2-VL-2B-Instruct (bf16, ~4.4 GB) for `pipit bench --image`:
the vision tower's encode time and the multimodal prefill at a realistic size.

usage: make_qwen2_vl_shape.py OUT_DIR [--layers N] [--depth N] [--qwen3]

Language model: hidden 1536, 28 layers, 12 query / 2 key-value heads (head_dim 128), intermediate 8960, vocab
151936, q/k/v biases, tied embeddings, M-RoPE sections [16, 24, 24]. Vision tower: 32 blocks of width 1280 (16
heads, MLP 5120, quick_gelu, LayerNorm), 14x14x2 patches, a 2x2 PatchMerger to 1536. Weights ~ N(0, 0.02), norm
weights 1, biases 0. Tensor names as the Hub checkpoint (model.*, visual.*, no lm_head: tied). Also writes
config.json and a preprocessor_config.json with HF's defaults. No tokenizer: the bench draws random text tokens.

--qwen3: shaped like Qwen3-VL-2B-Instruct instead (its Hub config.json): language model hidden 2048, 28 layers, 16
query / 8 key-value heads (head_dim 128, q/k norms, no biases), intermediate 6144, interleaved M-RoPE [24, 20, 20],
rope_theta 5e6; vision tower 24 blocks of width 1024 (16 heads, MLP 4096, gelu_pytorch_tanh, LayerNorm), 16x16x2
patches with a bias, a 48x48 learned position table, DeepStack mergers after blocks 5, 11, 17. Names model.visual.*,
model.language_model.* as the Hub checkpoint.
Needs only numpy (and make_qwen3_shape.py beside it). Do not write it into the repo.
"""
import json
import os
import sys

import numpy as np

from make_qwen3_shape import write_random_safetensors  # same folder: the bf16 safetensors writer

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB = 1536, 28, 12, 2, 128, 8960, 151936
V_DEPTH, V_DIM, V_HEADS, V_MLP, PATCH, TEMPORAL, MERGE = 32, 1280, 16, 5120, 14, 2, 2


def shapes(n_layers, depth):
    s = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,)}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        s.update({
            p + "input_layernorm.weight": (HIDDEN,),
            p + "post_attention_layernorm.weight": (HIDDEN,),
            p + "self_attn.q_proj.weight": (HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.q_proj.bias": (HEADS * HEAD_DIM,),
            p + "self_attn.k_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.k_proj.bias": (KV_HEADS * HEAD_DIM,),
            p + "self_attn.v_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
            p + "self_attn.v_proj.bias": (KV_HEADS * HEAD_DIM,),
            p + "self_attn.o_proj.weight": (HIDDEN, HEADS * HEAD_DIM),
            p + "mlp.gate_proj.weight": (FF, HIDDEN),
            p + "mlp.up_proj.weight": (FF, HIDDEN),
            p + "mlp.down_proj.weight": (HIDDEN, FF),
        })
    s["visual.patch_embed.proj.weight"] = (V_DIM, 3, TEMPORAL, PATCH, PATCH)
    for i in range(depth):
        p = f"visual.blocks.{i}."
        s.update({
            p + "norm1.weight": (V_DIM,), p + "norm1.bias": (V_DIM,),
            p + "norm2.weight": (V_DIM,), p + "norm2.bias": (V_DIM,),
            p + "attn.qkv.weight": (3 * V_DIM, V_DIM), p + "attn.qkv.bias": (3 * V_DIM,),
            p + "attn.proj.weight": (V_DIM, V_DIM), p + "attn.proj.bias": (V_DIM,),
            p + "mlp.fc1.weight": (V_MLP, V_DIM), p + "mlp.fc1.bias": (V_MLP,),
            p + "mlp.fc2.weight": (V_DIM, V_MLP), p + "mlp.fc2.bias": (V_DIM,),
        })
    merged = V_DIM * MERGE * MERGE
    s.update({
        "visual.merger.ln_q.weight": (V_DIM,), "visual.merger.ln_q.bias": (V_DIM,),
        "visual.merger.mlp.0.weight": (merged, merged), "visual.merger.mlp.0.bias": (merged,),
        "visual.merger.mlp.2.weight": (HIDDEN, merged), "visual.merger.mlp.2.bias": (HIDDEN,),
    })
    return dict(sorted(s.items()))


Q3 = dict(hidden=2048, layers=28, heads=16, kv_heads=8, head_dim=128, ff=6144, v_depth=24, v_dim=1024, v_heads=16,
          v_mlp=4096, patch=16, deepstack=[5, 11, 17], n_pos=2304)


def qwen3_shapes(n_layers, depth):
    H, D = Q3["hidden"], Q3["head_dim"]
    lm, vis = "model.language_model.", "model.visual."
    s = {lm + "embed_tokens.weight": (VOCAB, H), lm + "norm.weight": (H,)}
    for i in range(n_layers):
        p = f"{lm}layers.{i}."
        s.update({
            p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
            p + "self_attn.q_proj.weight": (Q3["heads"] * D, H), p + "self_attn.k_proj.weight": (Q3["kv_heads"] * D, H),
            p + "self_attn.v_proj.weight": (Q3["kv_heads"] * D, H), p + "self_attn.o_proj.weight": (H, Q3["heads"] * D),
            p + "self_attn.q_norm.weight": (D,), p + "self_attn.k_norm.weight": (D,),
            p + "mlp.gate_proj.weight": (Q3["ff"], H), p + "mlp.up_proj.weight": (Q3["ff"], H),
            p + "mlp.down_proj.weight": (H, Q3["ff"]),
        })
    E, F, P = Q3["v_dim"], Q3["v_mlp"], Q3["patch"]
    s[vis + "patch_embed.proj.weight"] = (E, 3, TEMPORAL, P, P)
    s[vis + "patch_embed.proj.bias"] = (E,)
    s[vis + "pos_embed.weight"] = (Q3["n_pos"], E)
    for i in range(depth):
        p = f"{vis}blocks.{i}."
        s.update({
            p + "norm1.weight": (E,), p + "norm1.bias": (E,), p + "norm2.weight": (E,), p + "norm2.bias": (E,),
            p + "attn.qkv.weight": (3 * E, E), p + "attn.qkv.bias": (3 * E,),
            p + "attn.proj.weight": (E, E), p + "attn.proj.bias": (E,),
            p + "mlp.linear_fc1.weight": (F, E), p + "mlp.linear_fc1.bias": (F,),
            p + "mlp.linear_fc2.weight": (E, F), p + "mlp.linear_fc2.bias": (E,),
        })
    merged = E * MERGE * MERGE
    mergers = [(vis + "merger.", E)] + [(f"{vis}deepstack_merger_list.{k}.", merged)
                                       for k in range(len(deepstack_of(depth)))]
    for p, norm in mergers:
        s.update({
            p + "norm.weight": (norm,), p + "norm.bias": (norm,),
            p + "linear_fc1.weight": (merged, merged), p + "linear_fc1.bias": (merged,),
            p + "linear_fc2.weight": (H, merged), p + "linear_fc2.bias": (H,),
        })
    return dict(sorted(s.items()))


def deepstack_of(depth):  # the Hub's indexes that exist in a tower of this depth
    return [i for i in Q3["deepstack"] if i < depth]


def qwen3_config(n_layers, depth):
    return {
        "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "tie_word_embeddings": True,
        "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
        "vision_end_token_id": 151653,
        "text_config": {
            "model_type": "qwen3_vl_text", "hidden_size": Q3["hidden"], "intermediate_size": Q3["ff"],
            "num_hidden_layers": n_layers, "num_attention_heads": Q3["heads"], "num_key_value_heads": Q3["kv_heads"],
            "head_dim": Q3["head_dim"], "vocab_size": VOCAB, "rms_norm_eps": 1e-6, "hidden_act": "silu",
            "attention_bias": False, "max_position_embeddings": 262144, "rope_theta": 5000000.0,
            "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20], "rope_type": "default"},
            "tie_word_embeddings": True, "bos_token_id": 151643, "eos_token_id": 151645, "dtype": "bfloat16",
        },
        "vision_config": {
            "model_type": "qwen3_vl", "depth": depth, "hidden_size": Q3["v_dim"], "hidden_act": "gelu_pytorch_tanh",
            "intermediate_size": Q3["v_mlp"], "num_heads": Q3["v_heads"], "in_channels": 3,
            "patch_size": Q3["patch"], "spatial_merge_size": MERGE, "temporal_patch_size": TEMPORAL,
            "out_hidden_size": Q3["hidden"], "num_position_embeddings": Q3["n_pos"],
            "deepstack_visual_indexes": deepstack_of(depth),
        },
    }


def main():
    out = sys.argv[1]
    if "--qwen3" in sys.argv:
        n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else Q3["layers"]
        depth = int(sys.argv[sys.argv.index("--depth") + 1]) if "--depth" in sys.argv else Q3["v_depth"]
        os.makedirs(out, exist_ok=True)
        json.dump(qwen3_config(n_layers, depth), open(os.path.join(out, "config.json"), "w"), indent=2)
        json.dump({"bos_token_id": 151643, "eos_token_id": 151645},
                  open(os.path.join(out, "generation_config.json"), "w"))
        # Qwen3-VL's processor: patch 16, mean/std 0.5, and the Hub's pixel bounds
        json.dump({"min_pixels": 65536, "max_pixels": 16777216, "patch_size": Q3["patch"],
                   "temporal_patch_size": TEMPORAL, "merge_size": MERGE, "image_mean": [0.5, 0.5, 0.5],
                   "image_std": [0.5, 0.5, 0.5], "do_rescale": True, "do_normalize": True, "do_resize": True,
                   "do_convert_rgb": True, "resample": 3, "rescale_factor": 1 / 255,
                   "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen3VLProcessor"},
                  open(os.path.join(out, "preprocessor_config.json"), "w"), indent=2)
        sh = qwen3_shapes(n_layers, depth)
        size = write_random_safetensors(os.path.join(out, "model.safetensors"), sh)
        print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {size / 1e9:.2f} GB (numpy {np.__version__})")
        return
    out = sys.argv[1]
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else LAYERS
    depth = int(sys.argv[sys.argv.index("--depth") + 1]) if "--depth" in sys.argv else V_DEPTH
    os.makedirs(out, exist_ok=True)
    cfg = {
        "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "hidden_size": HIDDEN,
        "intermediate_size": FF, "num_hidden_layers": n_layers, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "vocab_size": VOCAB, "tie_word_embeddings": True, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "max_position_embeddings": 32768, "hidden_act": "silu", "torch_dtype": "bfloat16",
        "bos_token_id": 151643, "eos_token_id": 151645, "image_token_id": 151655, "video_token_id": 151656,
        "vision_start_token_id": 151652, "vision_end_token_id": 151653, "vision_token_id": 151654,
        "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": n_layers,
        "vision_config": {"depth": depth, "embed_dim": V_DIM, "hidden_size": HIDDEN, "hidden_act": "quick_gelu",
                          "mlp_ratio": V_MLP // V_DIM, "num_heads": V_HEADS, "in_channels": 3, "in_chans": 3,
                          "patch_size": PATCH, "spatial_patch_size": PATCH, "spatial_merge_size": MERGE,
                          "temporal_patch_size": TEMPORAL, "model_type": "qwen2_vl"},
    }
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 151643, "eos_token_id": 151645}, open(os.path.join(out, "generation_config.json"), "w"))
    json.dump({"min_pixels": 3136, "max_pixels": 12845056, "patch_size": PATCH, "temporal_patch_size": TEMPORAL,
               "merge_size": MERGE, "image_mean": [0.48145466, 0.4578275, 0.40821073],
               "image_std": [0.26862954, 0.26130258, 0.27577711], "do_rescale": True, "do_normalize": True,
               "do_resize": True, "do_convert_rgb": True, "resample": 3, "rescale_factor": 1 / 255,
               "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2VLProcessor"},
              open(os.path.join(out, "preprocessor_config.json"), "w"), indent=2)

    sh = shapes(n_layers, depth)
    size = write_random_safetensors(os.path.join(out, "model.safetensors"), sh)
    print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {size / 1e9:.2f} GB (numpy {np.__version__})")

if __name__ == "__main__":
    main()

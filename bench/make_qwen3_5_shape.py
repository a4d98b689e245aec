#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like the text model of Qwen3.5-0.8B (bf16, ~1.5 GB) for the speed
benchmarks: `pipit bench` on it, or llama.cpp on its GGUF conversion (arch qwen35).

usage: make_qwen3_5_shape.py OUT_DIR [--layers N] [--mtp] [--vision]

Qwen/Qwen3.5-0.8B's text_config: hidden 1024, 24 layers (3 Gated DeltaNet : 1 gated full attention), full
attention 8 query / 2 key-value heads of head_dim 256 (q_proj also gives the output gate), partial rotary 0.25,
linear attention 16 key / 16 value heads of 128 dims, conv kernel 4, intermediate 3584, vocab 248320, tied
embeddings. Written as Qwen3_5ForCausalLM (model_type qwen3_5_text, tensors model.*; no vision tower; --mtp adds the
multi-token-prediction head as the Hub files carry it: mtp.fc [1024, 2048], mtp.pre_fc_norm_{embedding,hidden},
mtp.norm and one full-attention layer mtp.layers.0.*, mtp_num_hidden_layers 1).
Weights ~ N(0, 0.02), 1-D tensors 1 (norm weights; A_log = 1 and dt_bias = 1 give every head the same moderate
decay).
--vision: the whole Qwen3_5ForConditionalGeneration as the Hub's Qwen3.5-0.8B ships it (names model.language_model.*,
model.visual.*): its vision tower (12 blocks of width 768, 12 heads, MLP 3072, gelu_pytorch_tanh, LayerNorm with
biases, 16x16x2 patches with a bias, a 48x48 learned position table, no DeepStack) and the 2x2 merger to 1024, plus
the Hub's preprocessor_config.json / video_preprocessor_config.json and the multimodal token ids.
Needs only numpy (and make_qwen3_shape.py beside it). Do not write it into the repo.
"""
import json
import os
import sys

import numpy as np

from make_qwen3_shape import write_random_safetensors  # same folder: the bf16 safetensors writer

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB = 1024, 24, 8, 2, 256, 3584, 248320
LK_HEADS, LV_HEADS, LK_DIM, LV_DIM, CONV = 16, 16, 128, 128, 4
V_DEPTH, V_DIM, V_HEADS, V_MLP, PATCH, TEMPORAL, MERGE, V_POS = 12, 768, 12, 3072, 16, 2, 2, 2304
IMAGE_ID, VIDEO_ID, VISION_START_ID, VISION_END_ID = 248056, 248057, 248053, 248054


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


def vision_shapes():
    v = "model.visual."
    s = {v + "patch_embed.proj.weight": (V_DIM, 3, TEMPORAL, PATCH, PATCH), v + "patch_embed.proj.bias": (V_DIM,),
         v + "pos_embed.weight": (V_POS, V_DIM)}
    for i in range(V_DEPTH):
        b = f"{v}blocks.{i}."
        s.update({b + "norm1.weight": (V_DIM,), b + "norm1.bias": (V_DIM,), b + "norm2.weight": (V_DIM,),
                  b + "norm2.bias": (V_DIM,), b + "attn.qkv.weight": (3 * V_DIM, V_DIM),
                  b + "attn.qkv.bias": (3 * V_DIM,),
                  b + "attn.proj.weight": (V_DIM, V_DIM), b + "attn.proj.bias": (V_DIM,),
                  b + "mlp.linear_fc1.weight": (V_MLP, V_DIM), b + "mlp.linear_fc1.bias": (V_MLP,),
                  b + "mlp.linear_fc2.weight": (V_DIM, V_MLP), b + "mlp.linear_fc2.bias": (V_DIM,)})
    merged = V_DIM * MERGE * MERGE
    s.update({v + "merger.norm.weight": (V_DIM,), v + "merger.norm.bias": (V_DIM,),
              v + "merger.linear_fc1.weight": (merged, merged), v + "merger.linear_fc1.bias": (merged,),
              v + "merger.linear_fc2.weight": (HIDDEN, merged), v + "merger.linear_fc2.bias": (HIDDEN,)})
    return s


def write_processor_configs(out):
    common = {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
              "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "merge_size": MERGE, "patch_size": PATCH,
              "processor_class": "Qwen3VLProcessor", "resample": 3, "rescale_factor": 1 / 255,
              "temporal_patch_size": TEMPORAL}
    image = dict(common, image_processor_type="Qwen2VLImageProcessor",
                 size={"longest_edge": 16777216, "shortest_edge": 65536})
    video = dict(common, video_processor_type="Qwen3VLVideoProcessor", do_sample_frames=True, fps=2, min_frames=4,
                 max_frames=768, return_metadata=False, size={"longest_edge": 25165824, "shortest_edge": 4096})
    json.dump(image, open(os.path.join(out, "preprocessor_config.json"), "w"), indent=2)
    json.dump(video, open(os.path.join(out, "video_preprocessor_config.json"), "w"), indent=2)


def main():
    out = sys.argv[1]
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else LAYERS
    mtp = "--mtp" in sys.argv
    vision = "--vision" in sys.argv
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
    sh = shapes(n_layers, mtp)
    if vision:
        text = dict(cfg, model_type="qwen3_5_text")
        del text["architectures"]
        cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": text,
               "tie_word_embeddings": True, "image_token_id": IMAGE_ID, "video_token_id": VIDEO_ID,
               "vision_start_token_id": VISION_START_ID, "vision_end_token_id": VISION_END_ID,
               "vision_config": {"model_type": "qwen3_5", "depth": V_DEPTH, "hidden_size": V_DIM, "num_heads": V_HEADS,
                                 "intermediate_size": V_MLP, "hidden_act": "gelu_pytorch_tanh", "in_channels": 3,
                                 "patch_size": PATCH, "temporal_patch_size": TEMPORAL, "spatial_merge_size": MERGE,
                                 "num_position_embeddings": V_POS, "out_hidden_size": HIDDEN,
                                 "deepstack_visual_indexes": [], "initializer_range": 0.02}}
        sh = {k.replace("model.", "model.language_model.", 1) if k.startswith("model.") else k: v
              for k, v in sh.items()}
        sh = dict(sorted({**sh, **vision_shapes()}.items()))
        write_processor_configs(out)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 248044, "eos_token_id": 248044}, open(os.path.join(out, "generation_config.json"), "w"))
    size = write_random_safetensors(os.path.join(out, "model.safetensors"), sh)
    print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {size / 1e9:.2f} GB (numpy {np.__version__})")


if __name__ == "__main__":
    main()

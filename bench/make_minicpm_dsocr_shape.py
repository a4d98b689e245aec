#!/usr/bin/env python3
"""Writes a random-weight HF checkpoint shaped like MiniCPM4-0.5B or DeepSeek-OCR's decoder (DeepSeek-3B-MoE), with
fewer layers, for `pipit bench` / run / chat (issue 11). The Qwen3 tokenizer files of TOKENIZER_DIR are copied in
and the vocabulary is Qwen3's (151669), so text prompts and the chat template work; the real models' vocabularies
(73448, 129280) would only change the size of the embedding and the head.

usage: make_minicpm_dsocr_shape.py OUT_DIR --arch minicpm|deepseek_ocr [--layers N] [--tokenizer TOKENIZER_DIR]
                                   [--vision]

minicpm:      hidden 1024, 16 query / 2 key-value heads (head_dim 64), intermediate 4096, scale_emb 12,
              scale_depth 1.4, dim_model_base 256, LongRoPE (32768 / 32768: short factors), tied embeddings.
deepseek_ocr: hidden 1280, 10 heads (MHA, head_dim 128), layer 0 dense (intermediate 6848), the others MoE: 64
              routed experts of 896, top-6, 2 shared experts, softmax router without renormalisation, untied head.
--vision (deepseek_ocr): the whole DeepSeek-OCR, with the DeepEncoder at its real size (SAM ViT-B 768 x 12 blocks,
              12 heads, global blocks 2/5/8/11, neck 256, downsample 512/1024; CLIP-L 1024 x 24, 16 heads, 4096;
              projector 2048 -> 1280; image_newline, view_seperator), config.json's vision_config as the Hub file's,
              for `pipit bench --image` (image-to-first-token).
Weights ~ N(0, 0.02), norms 1 (bench/make_qwen3_shape.py's writer). Needs only numpy. Do not write it into the repo.
"""
import json
import os
import shutil
import sys

from make_qwen3_shape import write_random_safetensors  # same folder: the bf16 safetensors writer

VOCAB = 151669


def attn(p, hidden, heads, kv_heads, head_dim):
    return {
        p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
        p + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
        p + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
        p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
        p + "input_layernorm.weight": (hidden,),
        p + "post_attention_layernorm.weight": (hidden,),
    }


def mlp(p, hidden, ff):
    return {p + "gate_proj.weight": (ff, hidden), p + "up_proj.weight": (ff, hidden),
            p + "down_proj.weight": (hidden, ff)}


def minicpm(n_layers):
    H, NH, NKV, FF = 1024, 16, 2, 4096
    cfg = {
        "architectures": ["MiniCPMForCausalLM"], "model_type": "minicpm", "hidden_size": H, "intermediate_size": FF,
        "num_hidden_layers": n_layers, "num_attention_heads": NH, "num_key_value_heads": NKV, "vocab_size": VOCAB,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 32768, "hidden_act": "silu",
        "tie_word_embeddings": True, "scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 256,
        "rope_scaling": {"rope_type": "longrope", "long_factor": [1.0 + 0.1 * i for i in range(32)],
                         "short_factor": [1.0 + 0.01 * i for i in range(32)],
                         "original_max_position_embeddings": 32768},
        "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
    }
    s = {"model.embed_tokens.weight": (VOCAB, H), "model.norm.weight": (H,)}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        s.update(attn(p, H, NH, NKV, H // NH))
        s.update(mlp(p + "mlp.", H, FF))
    return cfg, s


def deepseek_ocr(n_layers):
    H, NH, FF, FE, E, SH = 1280, 10, 6848, 896, 64, 2
    lang = {
        "hidden_size": H, "intermediate_size": FF, "moe_intermediate_size": FE, "num_hidden_layers": n_layers,
        "num_attention_heads": NH, "num_key_value_heads": NH, "n_routed_experts": E, "n_shared_experts": SH,
        "num_experts_per_tok": 6, "first_k_dense_replace": 1, "topk_method": "greedy", "n_group": 1,
        "topk_group": 1, "use_mla": False, "kv_lora_rank": None, "q_lora_rank": None, "qk_nope_head_dim": 0,
        "qk_rope_head_dim": 0, "v_head_dim": 0, "vocab_size": VOCAB, "max_position_embeddings": 8192,
        "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
    }
    cfg = dict(lang, architectures=["DeepseekOCRForCausalLM"], model_type="deepseek_vl_v2", language_config=lang)
    s = {"model.embed_tokens.weight": (VOCAB, H), "model.norm.weight": (H,), "lm_head.weight": (VOCAB, H)}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        s.update(attn(p, H, NH, NH, H // NH))
        if i < 1:
            s.update(mlp(p + "mlp.", H, FF))
        else:
            s[p + "mlp.gate.weight"] = (E, H)
            for e in range(E):
                s.update(mlp(p + f"mlp.experts.{e}.", H, FE))
            s.update(mlp(p + "mlp.shared_experts.", H, FE * SH))
    return cfg, s


def deepencoder():
    s = {}
    p = "model.sam_model."
    W = 768
    s[p + "patch_embed.proj.weight"] = (W, 3, 16, 16)
    s[p + "patch_embed.proj.bias"] = (W,)
    s[p + "pos_embed"] = (1, 64, 64, W)
    for i in range(12):
        q = f"{p}blocks.{i}."
        n = 64 if i in (2, 5, 8, 11) else 14
        for t in ("norm1", "norm2"):
            s[q + t + ".weight"], s[q + t + ".bias"] = (W,), (W,)
        s[q + "attn.qkv.weight"], s[q + "attn.qkv.bias"] = (3 * W, W), (3 * W,)
        s[q + "attn.proj.weight"], s[q + "attn.proj.bias"] = (W, W), (W,)
        s[q + "attn.rel_pos_h"] = s[q + "attn.rel_pos_w"] = (2 * n - 1, W // 12)
        s[q + "mlp.lin1.weight"], s[q + "mlp.lin1.bias"] = (4 * W, W), (4 * W,)
        s[q + "mlp.lin2.weight"], s[q + "mlp.lin2.bias"] = (W, 4 * W), (W,)
    s[p + "neck.0.weight"] = (256, W, 1, 1)
    s[p + "neck.1.weight"] = s[p + "neck.1.bias"] = s[p + "neck.3.weight"] = s[p + "neck.3.bias"] = (256,)
    s[p + "neck.2.weight"] = (256, 256, 3, 3)
    s[p + "net_2.weight"] = (512, 256, 3, 3)
    s[p + "net_3.weight"] = (1024, 512, 3, 3)
    p, C = "model.vision_model.", 1024
    s[p + "embeddings.class_embedding"] = (C,)
    s[p + "embeddings.patch_embedding.weight"] = (C, 3, 14, 14)
    s[p + "embeddings.position_embedding.weight"] = (257, C)
    s[p + "pre_layrnorm.weight"] = s[p + "pre_layrnorm.bias"] = (C,)
    for i in range(24):
        q = f"{p}transformer.layers.{i}."
        for t in ("layer_norm1", "layer_norm2"):
            s[q + t + ".weight"], s[q + t + ".bias"] = (C,), (C,)
        s[q + "self_attn.qkv_proj.weight"], s[q + "self_attn.qkv_proj.bias"] = (3 * C, C), (3 * C,)
        s[q + "self_attn.out_proj.weight"], s[q + "self_attn.out_proj.bias"] = (C, C), (C,)
        s[q + "mlp.fc1.weight"], s[q + "mlp.fc1.bias"] = (4 * C, C), (4 * C,)
        s[q + "mlp.fc2.weight"], s[q + "mlp.fc2.bias"] = (C, 4 * C), (C,)
    s["model.projector.layers.weight"], s["model.projector.layers.bias"] = (1280, 2048), (1280,)
    s["model.image_newline"] = s["model.view_seperator"] = (1280,)
    vision_config = {"image_size": 1024, "mlp_ratio": 3.7362, "model_name": "deeplip_b_l", "model_type": "vision",
                     "width": {"clip-l-14-224": {"heads": 16, "image_size": 224, "layers": 24, "patch_size": 14,
                                                 "width": 1024},
                               "sam_vit_b": {"downsample_channels": [512, 1024], "global_attn_indexes": [2, 5, 8, 11],
                                             "heads": 12, "layers": 12, "width": 768}}}
    projector_config = {"input_dim": 2048, "model_type": "mlp_projector", "n_embed": 1280, "projector_type": "linear"}
    return s, vision_config, projector_config


def main():
    out = sys.argv[1]
    arch = sys.argv[sys.argv.index("--arch") + 1]
    n_layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 4
    tok = sys.argv[sys.argv.index("--tokenizer") + 1] if "--tokenizer" in sys.argv else None
    cfg, sh = {"minicpm": minicpm, "deepseek_ocr": deepseek_ocr}[arch](n_layers)
    if "--vision" in sys.argv:
        assert arch == "deepseek_ocr", "--vision is for --arch deepseek_ocr"
        vs, cfg["vision_config"], cfg["projector_config"] = deepencoder()
        cfg.update(candidate_resolutions=[[1024, 1024]], global_view_pos="head", tile_tag="2D")
        sh.update(vs)
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 151643, "eos_token_id": 151645}, open(os.path.join(out, "generation_config.json"), "w"))
    size = write_random_safetensors(os.path.join(out, "model.safetensors"), dict(sorted(sh.items())))
    if tok:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok, f), os.path.join(out, f))
    print(f"wrote {out}/model.safetensors: {len(sh)} tensors, {size / 1e9:.2f} GB")


if __name__ == "__main__":
    main()

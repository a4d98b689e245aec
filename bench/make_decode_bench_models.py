"""Two random-weight checkpoints with the same active parameters per token, for bench/decode_bench:
  moe/   qwen3_moe: 8 layers, hidden 1024, 64 experts of moe_intermediate_size 256, top-8  (~440M params, ~88M active)
  dense/ qwen3:     the same, with one dense MLP of intermediate_size 2048 = 8 x 256   (~88M params)
Run: /usr/bin/python3 bench/make_decode_bench_models.py OUT_DIR   (BF16 weights; ~1 GB written)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "testdata",
                                "reference"))
import st_io  # noqa: E402

H, L, NH, NKV, HD, V = 1024, 8, 16, 4, 64, 8192
E, K, FF_E = 64, 8, 256


def common(model_type):
    return {
        "model_type": model_type, "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": NH,
        "num_key_value_heads": NKV, "head_dim": HD, "vocab_size": V, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
        "max_position_embeddings": 4096, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "torch_dtype": "bfloat16",
    }


def rnd(g, *shape, std=0.02):
    return (torch.randn(*shape, generator=g) * std).to(torch.bfloat16)


def write(out, cfg, moe):
    g = torch.Generator().manual_seed(7)
    w = {"model.embed_tokens.weight": rnd(g, V, H), "lm_head.weight": rnd(g, V, H),
         "model.norm.weight": torch.ones(H, dtype=torch.bfloat16)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = torch.ones(H, dtype=torch.bfloat16)
        w[p + "post_attention_layernorm.weight"] = torch.ones(H, dtype=torch.bfloat16)
        w[p + "self_attn.q_proj.weight"] = rnd(g, NH * HD, H)
        w[p + "self_attn.k_proj.weight"] = rnd(g, NKV * HD, H)
        w[p + "self_attn.v_proj.weight"] = rnd(g, NKV * HD, H)
        w[p + "self_attn.o_proj.weight"] = rnd(g, H, NH * HD)
        w[p + "self_attn.q_norm.weight"] = torch.ones(HD, dtype=torch.bfloat16)
        w[p + "self_attn.k_norm.weight"] = torch.ones(HD, dtype=torch.bfloat16)
        if moe:
            w[p + "mlp.gate.weight"] = rnd(g, E, H, std=0.5)  # spread the routing over the experts
            for e in range(E):
                q = p + f"mlp.experts.{e}."
                w[q + "gate_proj.weight"] = rnd(g, FF_E, H)
                w[q + "up_proj.weight"] = rnd(g, FF_E, H)
                w[q + "down_proj.weight"] = rnd(g, H, FF_E)
        else:
            w[p + "mlp.gate_proj.weight"] = rnd(g, K * FF_E, H)
            w[p + "mlp.up_proj.weight"] = rnd(g, K * FF_E, H)
            w[p + "mlp.down_proj.weight"] = rnd(g, H, K * FF_E)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    st_io.save_file(w, os.path.join(out, "model.safetensors"))
    n = sum(t.numel() for t in w.values())
    print(f"{out}: {n / 1e6:.1f}M parameters")


def main():
    root = sys.argv[1]
    moe = common("qwen3_moe")
    moe.update({"num_experts": E, "num_experts_per_tok": K, "moe_intermediate_size": FF_E, "norm_topk_prob": True,
                "decoder_sparse_step": 1, "mlp_only_layers": [], "intermediate_size": K * FF_E})
    write(os.path.join(root, "moe"), moe, True)
    dense = common("qwen3")
    dense["intermediate_size"] = K * FF_E
    write(os.path.join(root, "dense"), dense, False)


if __name__ == "__main__":
    main()

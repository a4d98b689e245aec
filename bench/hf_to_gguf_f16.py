#!/usr/bin/env python3
"""Writes the weights of a Qwen3 HF checkpoint (one bf16 model.safetensors, as make_qwen3_shape.py writes) as an F16
GGUF for llama.cpp, so that llama.cpp and pipit run the same weights in bench/compare_llamacpp.sh.

usage: hf_to_gguf_f16.py HF_DIR OUT.gguf

Matrices become F16 (bf16 -> f32 -> f16, round to nearest even: every N(0, 0.02) weight above 6e-5 is exact), norms
stay F32. No tokenizer: tokenizer.ggml.model = "no_vocab" with qwen3.vocab_size, which llama-bench accepts (it
feeds random token ids) and pipit imports without a tokenizer. Qwen3 q/k rows are not permuted by llama.cpp's
converter, so none are here. Needs gguf-py (/tmp/llamacpp/src/gguf-py, or PYTHONPATH) and numpy.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.environ.get("GGUF_PY", "/tmp/llamacpp/src/gguf-py"))
import gguf  # noqa: E402

LAYER_NAMES = {  # HF suffix -> llama.cpp suffix within blk.N
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    assert parts[0] == "model" and parts[1] == "layers", hf
    return f"blk.{parts[2]}." + LAYER_NAMES[".".join(parts[3:])]


def main():
    hf_dir, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    path = os.path.join(hf_dir, "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    base = 8 + n
    data = np.memmap(path, dtype=np.uint8, mode="r")

    def tensor_f32(info):
        assert info["dtype"] == "BF16"
        a, b = info["data_offsets"]
        bits = data[base + a:base + b].view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(info["shape"])

    w = gguf.GGUFWriter(out, "qwen3")
    w.add_name("qwen3-shape-random")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_tokenizer_model("no_vocab")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    names = [k for k in header if k != "__metadata__"]
    plan = []
    for hf in names:
        info = header[hf]
        is_matrix = len(info["shape"]) == 2
        dt = np.float16 if is_matrix else np.float32
        nbytes = int(np.prod(info["shape"])) * np.dtype(dt).itemsize
        w.add_tensor_info(gguf_name(hf), info["shape"], np.dtype(dt), nbytes)
        plan.append((info, dt))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for info, dt in plan:  # one tensor in memory at a time
        w.write_tensor_data(tensor_f32(info).astype(dt))
    w.close()
    print(f"wrote {out}: {len(plan)} tensors (gguf-py, numpy {np.__version__})")


if __name__ == "__main__":
    main()

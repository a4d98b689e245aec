#!/usr/bin/env python3
"""Writes PyTorch-checkpoint fixtures for the converter tests (tests/unit/pickle_torch_test.cpp).

usage: make_pytorch_bin.py SRC_MODEL_DIR OUT_DIR

OUT_DIR gets a copy of SRC's config/generation/tokenizer files plus:
  pytorch_model.bin  torch.save(state_dict) of SRC's model.safetensors (zip format, pickle protocol 2), with the
                     layouts real checkpoints have: q/k/v of layer 0 as slices of one fused storage (storage offsets),
                     o_proj of layer 0 as a transposed view (non-contiguous strides), lm_head sharing the embedding's
                     storage when the config ties them, an int64 buffer (skipped by pipit), and an nn.Parameter.
  legacy.bin         the same state dict in the pre-1.6 (non-zip) format, which pipit rejects with a clear message.
Needs Debian's python3-torch and python3-numpy; writes nothing outside OUT_DIR. Versions are printed.
"""
import collections
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = np.frombuffer(data[b:e], dtype={"F32": np.float32, "BF16": np.int16, "F16": np.float16}[info["dtype"]])
        t = torch.from_numpy(raw.copy()).reshape(info["shape"])
        if info["dtype"] == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = t
    return out


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    for f in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    sd = read_safetensors(os.path.join(src, "model.safetensors"))

    p = "model.layers.0.self_attn."
    q, k, v = sd[p + "q_proj.weight"], sd[p + "k_proj.weight"], sd[p + "v_proj.weight"]
    fused = torch.cat([q, k, v])  # one storage, three views at different offsets
    sd[p + "q_proj.weight"] = fused[: q.shape[0]]
    sd[p + "k_proj.weight"] = fused[q.shape[0]: q.shape[0] + k.shape[0]]
    sd[p + "v_proj.weight"] = fused[q.shape[0] + k.shape[0]:]
    o = sd[p + "o_proj.weight"]
    sd[p + "o_proj.weight"] = o.t().contiguous().t()  # same values, column-major strides
    assert not sd[p + "o_proj.weight"].is_contiguous()
    if cfg.get("tie_word_embeddings") and "lm_head.weight" not in sd:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]  # shares the storage, as HF state_dict() does
    sd["model.layers.0.self_attn.rotary_emb.position_ids"] = torch.arange(8, dtype=torch.int64)
    sd["model.norm.weight"] = torch.nn.Parameter(sd["model.norm.weight"], requires_grad=False)

    # an OrderedDict with _metadata, as nn.Module.state_dict() returns (pickled with REDUCE + SETITEMS + BUILD)
    sd = collections.OrderedDict(sd)
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))
    torch.save(sd, os.path.join(out, "legacy.bin"), _use_new_zipfile_serialization=False)
    print(f"wrote {out}/pytorch_model.bin ({len(sd)} tensors) and legacy.bin")


if __name__ == "__main__":
    main()

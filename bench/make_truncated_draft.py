#!/usr/bin/env python3
"""Writes a draft model for speculative-decoding benchmarks: the first N decoder layers of an HF checkpoint (one
model.safetensors), with its embeddings, final norm and head. Random-weight targets (bench/make_qwen3_shape.py) and
an independent random draft never agree on a token; a draft that is the target's own first layers shares its
embedding and head, so it agrees with the target whenever the later layers do not move the argmax (how often is
what the benchmark measures: say so next to the figures, it is not the acceptance of a trained pair).

usage: make_truncated_draft.py TARGET_DIR OUT_DIR --layers N

Copies config.json (num_hidden_layers = N), generation_config.json and tokenizer files when present. Python
standard library only; tensors are copied byte for byte.
"""
import json
import os
import re
import shutil
import struct
import sys


def main():
    if len(sys.argv) != 5 or sys.argv[3] != "--layers":
        sys.exit(__doc__)
    src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    if n < 1 or n > cfg["num_hidden_layers"]:
        sys.exit(f"--layers {n}: the target has {cfg['num_hidden_layers']} layers")
    cfg["num_hidden_layers"] = n
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for name in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), os.path.join(out, name))

    layer = re.compile(r"\.layers\.(\d+)\.")
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
        base = 8 + hlen
        keep = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            m = layer.search(name)
            if m and int(m.group(1)) >= n:
                continue
            keep[name] = info
        new_header, offset = {}, 0
        for name in sorted(keep):
            b, e = keep[name]["data_offsets"]
            new_header[name] = {"dtype": keep[name]["dtype"], "shape": keep[name]["shape"],
                                "data_offsets": [offset, offset + e - b]}
            offset += e - b
        hb = json.dumps(new_header, separators=(",", ":")).encode()
        hb += b" " * ((8 - len(hb) % 8) % 8)
        with open(os.path.join(out, "model.safetensors"), "wb") as g:
            g.write(struct.pack("<Q", len(hb)))
            g.write(hb)
            for name in sorted(keep):
                b, e = keep[name]["data_offsets"]
                f.seek(base + b)
                left = e - b
                while left:
                    chunk = f.read(min(left, 1 << 24))
                    g.write(chunk)
                    left -= len(chunk)
    print(f"wrote {out}: {len(keep)} tensors, {n} layers, {offset / 1e9:.2f} GB")


if __name__ == "__main__":
    main()

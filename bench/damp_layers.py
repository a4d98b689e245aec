#!/usr/bin/env python3
"""Makes a random-weight target agree with its truncated draft (bench/make_truncated_draft.py) often enough for a
speculative-decoding benchmark: the residual-branch outputs (self_attn.o_proj, mlp.down_proj) of layers >= --from
are scaled by --scale, so the layers the draft lacks only nudge the residual stream. A trained small/large pair
agrees because both learnt the same text; random weights agree only by construction, and --scale sets how often
(the benchmark reports the acceptance it got).

usage: damp_layers.py TARGET_DIR OUT_DIR --from N --scale A

bf16 or f32 safetensors (one model.safetensors); everything else is copied. Needs numpy.
"""
import json
import os
import re
import shutil
import struct
import sys

import numpy as np


def main():
    if len(sys.argv) != 7 or sys.argv[3] != "--from" or sys.argv[5] != "--scale":
        sys.exit(__doc__)
    src, out, first, scale = sys.argv[1], sys.argv[2], int(sys.argv[4]), float(sys.argv[6])
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(src):
        if name != "model.safetensors":
            shutil.copy(os.path.join(src, name), os.path.join(out, name))
    pat = re.compile(r"\.layers\.(\d+)\.(self_attn\.o_proj|mlp\.down_proj)\.weight$")
    n = 0
    with open(os.path.join(src, "model.safetensors"), "rb") as f, \
            open(os.path.join(out, "model.safetensors"), "wb") as g:
        (hlen,) = struct.unpack("<Q", f.read(8))
        head = f.read(hlen)
        header = json.loads(head)
        g.write(struct.pack("<Q", hlen))
        g.write(head)
        base = 8 + hlen
        for name, info in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                                 key=lambda kv: kv[1]["data_offsets"][0]):
            b, e = info["data_offsets"]
            f.seek(base + b)
            data = f.read(e - b)
            m = pat.search(name)
            if m and int(m.group(1)) >= first:
                if info["dtype"] == "BF16":
                    x = (np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32) * scale
                    u = x.view(np.uint32)
                    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
                    data = u.astype(np.uint16).tobytes()
                elif info["dtype"] == "F32":
                    data = (np.frombuffer(data, dtype=np.float32) * scale).astype(np.float32).tobytes()
                else:
                    sys.exit(f"{name}: dtype {info['dtype']} not handled")
                n += 1
            g.seek(base + b)
            g.write(data)
    print(f"wrote {out}: {n} tensors scaled by {scale} (layers >= {first})")


if __name__ == "__main__":
    main()

"""Reads .safetensors files into numpy arrays (F32, I32, BF16 widened to f32) and writes the input_ids file that
`pipit logits --input` takes, for the end-to-end tests."""
import json
import struct

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype={"F32": np.float32, "I32": np.int32}[t["dtype"]])
        out[name] = arr.reshape(t["shape"])
    return out


def write_ids(path, ids):
    h = json.dumps({"input_ids": {"dtype": "I32", "shape": [1, len(ids)], "data_offsets": [0, 4 * len(ids)]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + np.asarray(ids, dtype=np.int32).tobytes())

#!/usr/bin/env python3
"""Greedy generation with and without the MTP head on the golden prompt of qwen3_5_vl (the tiny random Qwen3.5 with
its mtp.* layer; stories260k's tokenizer, the same 512 ids, linked beside it): tok/s and guesses accepted, -t 1.

usage: PYTHONPATH=build/python python3 bench/mtp_golden_speed.py TESTDATA_DIR [N_TOKENS]
"""
import json
import os
import struct
import sys
import tempfile

import numpy as np

import pipit


def golden_ids(path, key):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
        m = h[key]
        f.seek(8 + n + m["data_offsets"][0])
        return np.frombuffer(f.read(m["data_offsets"][1] - m["data_offsets"][0]), dtype=np.int32).tolist()


def main():
    models = os.path.join(sys.argv[1], "models")
    n_tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    q, st = os.path.join(models, "qwen3_5_vl"), os.path.join(models, "stories260k")
    prompt = golden_ids(os.path.join(q, "golden.safetensors"), "text.input_ids")
    with tempfile.TemporaryDirectory() as d:
        for src, name in ((q, "config.json"), (q, "model.safetensors"), (st, "tokenizer.json")):
            os.symlink(os.path.join(src, name), os.path.join(d, name))
        m = pipit.Model(d, n_threads=1, kv_type="f32")
        for rep in range(3):
            for k in (0, 1, 2, 3):
                c = m.generate(prompt, max_tokens=n_tokens, temperature=0, ignore_eos=True, mtp=k)
                print(f"rep {rep} mtp={k}: {len(c.tokens)} tokens, {1000 * (len(c.tokens) - 1) / c.gen_ms:.0f} tok/s, "
                      f"accepted {c.accepted} of {c.drafted}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`pipit convert` as a user meets it (issue 36 item 9):

  - Ctrl-C (SIGINT) or SIGTERM during a conversion leaves no OUT.tmp.PID behind, and the process ends by the signal;
  - an existing -o that is not a .pipit file (a checkpoint named by mistake) is refused, named, and left as it was,
    unless --force; an existing .pipit is replaced as before.

usage: convert_cli_test.py PIPIT TESTDATA
The interrupted conversion is of a random Llama checkpoint written here (~230 MB of f32, 6 layers of 768 x 3072) so
that its q4 write lasts long enough to be caught: the test waits for the temporary file to appear, then signals.
"""
import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_checkpoint(d, src):
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg.update(hidden_size=768, intermediate_size=3072, num_hidden_layers=6, num_attention_heads=12,
               num_key_value_heads=4, head_dim=64)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    shutil.copy(os.path.join(src, "tokenizer.json"), d)
    rng = np.random.default_rng(0)
    h, f, v, hd = 768, 3072, cfg["vocab_size"], 64
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(6):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                       p + "self_attn.q_proj.weight": (12 * hd, h), p + "self_attn.k_proj.weight": (4 * hd, h),
                       p + "self_attn.v_proj.weight": (4 * hd, h), p + "self_attn.o_proj.weight": (h, 12 * hd),
                       p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                       p + "mlp.down_proj.weight": (h, f)})
    header, off, blobs = {}, 0, []
    for name, shape in shapes.items():
        a = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    hb = json.dumps(header).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as out:
        out.write(struct.pack("<Q", len(hb)) + hb)
        for b in blobs:
            out.write(b)


def interrupted(pipit, ckpt, out, sig):
    p = subprocess.Popen([pipit, "convert", ckpt, "-o", out, "--quant", "q4", "-t", "1", "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not glob.glob(out + ".tmp.*") and p.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    assert p.poll() is None, f"the conversion ended (rc {p.returncode}) before its temporary file was seen"
    p.send_signal(sig)
    rc = p.wait(timeout=60)
    left = glob.glob(out + "*")
    assert rc == -sig, f"exit {rc}, expected death by signal {sig}"
    assert not left, f"left behind: {left}"


def main():
    pipit, testdata = sys.argv[1], sys.argv[2]
    src = os.path.join(testdata, "models", "stories260k")
    with tempfile.TemporaryDirectory() as d:
        ckpt = os.path.join(d, "ckpt")
        os.mkdir(ckpt)
        write_checkpoint(ckpt, src)
        for sig in (signal.SIGINT, signal.SIGTERM):
            interrupted(pipit, ckpt, os.path.join(d, "out.pipit"), sig)

        # an existing file that is not a .pipit: refused and untouched, then replaced with --force
        victim = os.path.join(d, "model.safetensors")
        shutil.copy(os.path.join(src, "model.safetensors"), victim)
        before = open(victim, "rb").read()
        r = subprocess.run([pipit, "convert", src, "-o", victim], capture_output=True, text=True)
        assert r.returncode == 1, r
        assert "is not a .pipit file" in r.stderr and "--force" in r.stderr, r.stderr
        assert open(victim, "rb").read() == before
        r = subprocess.run([pipit, "convert", src, "-o", victim, "--force"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert open(victim, "rb").read(8) == b"PIPIT\x00\r\n"
        # an existing .pipit is replaced without asking (re-converting is the normal case)
        r = subprocess.run([pipit, "convert", src, "-o", victim, "--quant", "q8"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    print("convert_cli: interrupts leave nothing, non-.pipit outputs are protected")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Two images in one prompt, for tests/models/vl_multi_test.cpp: the shared goldens have one image per case.

Runs the PyTorch reference that made the shared VL goldens (../shared/testdata/reference: vl_models.py,
qwen3_vl.py, image_processing.py; Debian python3-torch, python3-pil) in float32 on the tiny checkpoints with both
case images (img_100x75 then img_300x200; Qwen3-VL: img_150x90 then img_256x160) in one user turn, and writes
tests/data/vl_multi/<arch>.safetensors:
  input_ids_unexpanded [1, T0], input_ids [1, T], position_ids ([3, 1, T] Qwen, [1, T] LLaVA),
  rope_deltas [1, 1], logits_rows [R] (I32 row indices), logits [R, vocab] (only those rows, to stay small:
  the token before, the first and the last token of each image, the token after each image, the last token),
  greedy_ids [1, 8] (KV-cache greedy decode, EOS ignored, decode positions T + k + rope_delta).
Qwen3-VL's DeepStack features of both images are added, in image-token order, after its first decoder layers.
Usage: /usr/bin/python3 tests/data/make_vl_multi_golden.py [testdata dir [arch ...]]
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared", "testdata")
sys.path.insert(0, os.path.join(TESTDATA, "reference"))

import image_processing as ip  # noqa: E402
import qwen3_vl as q3  # noqa: E402
import st_io  # noqa: E402
import vl_models as vl  # noqa: E402
from PIL import Image  # noqa: E402

OUT = os.path.join(HERE, "vl_multi")
IMAGES = ["img_100x75", "img_300x200"]
IMAGES_QWEN3_VL = ["img_150x90", "img_256x160"]


def images_of(arch):
    return IMAGES_QWEN3_VL if arch == "qwen3_vl" else IMAGES


def load(arch):
    d = os.path.join(TESTDATA, "models", arch)
    cfg = json.load(open(os.path.join(d, "config.json")))
    pp = json.load(open(os.path.join(d, "preprocessor_config.json")))
    W = {k: v.float() for k, v in st_io.load_file(os.path.join(d, "model.safetensors")).items()}
    imgs = [Image.open(os.path.join(d, n + ".png")).convert("RGB") for n in images_of(arch)]
    return cfg, pp, W, imgs


def qwen_ids(n_images):
    # system turn, then one user turn: image, text, image, text (the toy ids of the shared prompts)
    ids = [1001, 39, 413, 990, 380, 235, 86, 917, 48, 1002, 413, 1001, 795, 413]
    ids += [1009, 1012, 1010, 56, 376]
    ids += [1009, 1012, 1010] * (n_images - 1)
    ids += [681, 48, 1002, 413, 1001, 45, 413]
    return ids


def llava_ids():
    return [1, 535, 178, 298, 1000, 283, 23, 1000, 283, 880, 554, 222, 633, 178]


def expand(ids, token, counts):
    out, k = [], 0
    for t in ids:
        if t == token:
            out += [token] * counts[k]
            k += 1
        else:
            out.append(t)
    return out


def run(arch):
    cfg, pp, W, imgs = load(arch)
    tc = cfg.get("text_config", cfg)
    if arch == "llava":
        pv, _ = ip.clip_preprocess(imgs, pp)
        feats = vl.llava_image_features(W, cfg, pv).reshape(-1, tc["hidden_size"])
        token = cfg["image_token_index"]
        ids0 = llava_ids()
        ids = expand(ids0, token, [feats.shape[0] // len(imgs)] * len(imgs))
        T = len(ids)
        pos = torch.arange(T).view(1, 1, -1).expand(3, 1, -1)
        delta = 0
        prefix, head, mrope, bias = "language_model.model.", "language_model.lm_head.weight", None, False
    elif arch == "qwen3_vl":
        pv, thw, _ = ip.qwen2vl_preprocess(imgs, pp)
        feats, deepstack = q3.qwen3vl_vision(W, cfg["vision_config"], pv, thw)
        merge = cfg["vision_config"]["spatial_merge_size"]
        token = cfg["image_token_id"]
        ids0 = qwen_ids(len(imgs))
        ids = expand(ids0, token, [int(t * h * w) // (merge * merge) for t, h, w in thw.tolist()])
        T = len(ids)
        pos, d = q3.get_rope_index(torch.tensor([ids]), thw, cfg)
        delta = int(d)
        head = q3.TP + "embed_tokens.weight"  # tied
        x = q3.embed(W, torch.tensor([ids]), token, feats)
        cache = [None] * tc["num_hidden_layers"]
        mask = torch.tensor(ids) == token
        logits = q3.text_forward(W, tc, x, pos, cache, mask, deepstack, lm_head=head)[0]
        greedy, step = [], logits[-1]
        for k in range(8):
            nxt = int(step.argmax())
            greedy.append(nxt)
            p = torch.full((3, 1, 1), T + k + delta, dtype=torch.long)
            step = q3.text_forward(W, tc, q3.embed(W, torch.tensor([[nxt]]), token, None), p, cache,
                                   lm_head=head)[0, -1]
    else:
        vc = dict(cfg["vision_config"])
        pv, thw, _ = ip.qwen2vl_preprocess(imgs, pp)
        tower = vl.qwen25_vision if arch == "qwen2_5_vl" else vl.qwen2vl_vision
        feats = tower(W, vc, pv, thw)
        merge = vc["spatial_merge_size"]
        token = cfg["image_token_id"]
        ids0 = qwen_ids(len(imgs))
        ids = expand(ids0, token, [int(t * h * w) // (merge * merge) for t, h, w in thw.tolist()])
        T = len(ids)
        pos, d = vl.get_rope_index(torch.tensor([ids]), thw, cfg, merge)
        delta = int(d)
        prefix, head, mrope, bias = "model.", "lm_head.weight", tc["rope_scaling"]["mrope_section"], True
    if arch != "qwen3_vl":
        x = W[prefix + "embed_tokens.weight"][torch.tensor(ids)].clone()
        x[torch.tensor(ids) == token] = feats
        cache = [None] * tc["num_hidden_layers"]
        logits = vl.decoder_forward(W, tc, prefix, head, x[None], pos, cache, mrope, bias)[0]
        greedy = []
        step = logits[-1]
        for k in range(8):
            nxt = int(step.argmax())
            greedy.append(nxt)
            p = torch.full((3, 1, 1), T + k + delta, dtype=torch.long)
            e = W[prefix + "embed_tokens.weight"][torch.tensor([[nxt]])]
            step = vl.decoder_forward(W, tc, prefix, head, e, p, cache, mrope, bias)[0, -1]
    rows = set([T - 1])
    i = 0
    while i < T:
        if ids[i] == token:
            j = i
            while j < T and ids[j] == token:
                j += 1
            rows |= {i - 1, i, j - 1, min(j, T - 1)}
            i = j
        else:
            i += 1
    rows = sorted(rows)
    out = {
        "input_ids_unexpanded": torch.tensor([ids0], dtype=torch.int32),
        "input_ids": torch.tensor([ids], dtype=torch.int32),
        "position_ids": (pos[:1, 0] if arch == "llava" else pos).to(torch.int32).contiguous(),
        "rope_deltas": torch.tensor([[delta]], dtype=torch.int32),
        "logits_rows": torch.tensor(rows, dtype=torch.int32),
        "logits": logits[rows].contiguous(),
        "greedy_ids": torch.tensor([greedy], dtype=torch.int32),
    }
    reference = "qwen3_vl.py" if arch == "qwen3_vl" else "vl_models.py"
    meta = {"arch": arch, "images": ",".join(images_of(arch)), "reference": "shared/testdata/reference/" + reference,
            "torch": torch.__version__}
    os.makedirs(OUT, exist_ok=True)
    st_io.save_file(out, os.path.join(OUT, arch + ".safetensors"), meta)
    print(arch, "T", T, "delta", delta, "greedy", greedy, file=sys.stderr)


if __name__ == "__main__":
    torch.manual_seed(0)
    for a in sys.argv[2:] or ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llava"]:
        run(a)

"""PyTorch reference of DeepSeek-OCR's image side (DeepEncoder + projector + layout tokens + preprocessing modes),
and the tiny random checkpoint + goldens the C++ tests compare against. Used only to make references; the engine
never runs Python.

Followed line by line (read through the search/fetch tools; no code copied into the engine):
  * deepseek-ai/DeepSeek-OCR (GitHub) @ e4ac34e1e59b891163fb9325480fbedec865e1f0:
      DeepSeek-OCR-master/DeepSeek-OCR-vllm/deepencoder/sam_vary_sdpa.py  (ImageEncoderViT, Block, Attention,
          window_partition/unpartition, get_rel_pos, add_decomposed_rel_pos, LayerNorm2d, get_abs_pos, _build_sam)
      DeepSeek-OCR-master/DeepSeek-OCR-vllm/deepencoder/clip_sdpa.py      (VitModel without its patch embedding:
          CLIPVisionEmbeddings(pixel_values, patch_embeds), get_abs_pos, NoTPTransformerBlock, quick_gelu)
      DeepSeek-OCR-master/DeepSeek-OCR-vllm/deepencoder/build_linear.py   (MlpProjector "linear": model.projector.layers)
  * the Hub remote code modeling_deepseekocr.py (public copy ZoneTwelve/deepseek-ocr-general-modelling @
    af79d03f648f26155e66ab2e2aebba9266090965; only dtype/device lines differ from the Hub file):
      DeepseekOCRModel.forward (local -> global -> view_seperator order, image_newline per row, tiles re-gridded),
      DeepseekOCRForCausalLM.infer (modes, ImageOps.pad with colour (127,127,127), direct resize for image_size <=
      640, dynamic_preprocess / find_closest_aspect_ratio with its hard-coded 640 tile and <= 640 test, token ids,
      BOS 0 prepended, 'plain' prompt format), BasicImageTransform (ToTensor + Normalize(0.5, 0.5)).
  * the language decoder: ../shared/testdata/reference/deepseek_ocr.py (DeepseekOCRLMRef), fed inputs_embeds.

Sizes that the remote code hard-codes (SAM 768 wide x 12 / 12 heads / global blocks 2,5,8,11 / neck 256 /
downsample 512, 1024; CLIP-L 1024 x 24 / 16 heads / 4096; projector 2048 -> 1280) are parameters here so that the
checkpoint can be tiny; the tensor names and layouts are the real checkpoint's. Input image sizes are the real ones
(1024 global view, 640 tiles), so pos-embed / rel-pos interpolation run exactly where they run in the real model.

usage: deepseek_ocr_vision.py OUT_DIR TESTDATA_DIR
writes OUT_DIR/model (config.json + model.safetensors), OUT_DIR/img_*.png and OUT_DIR/golden_{base,gundam}.safetensors
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageOps

torch.set_grad_enabled(False)
torch.set_num_threads(1)

# ---------------------------------------------------------------- preprocessing (modeling_deepseekocr.py infer)
MODES = {  # name: (base_size, image_size, crop_mode), as the remote code's README lists them
    "tiny": (512, 512, False),
    "small": (640, 640, False),
    "base": (1024, 1024, False),
    "large": (1280, 1280, False),
    "gundam": (1024, 640, True),
}
PATCH, DOWNSAMPLE = 16, 4
MEAN = (0.5, 0.5, 0.5)


def to_tensor_normalize(img):
    # transforms.ToTensor (byte -> float / 255) then Normalize(mean 0.5, std 0.5): (x - 0.5) / 0.5 in float32
    x = torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).contiguous().to(torch.float32).div(255)
    m = torch.tensor(MEAN, dtype=torch.float32)[:, None, None]
    return (x - m) / m


def find_closest_aspect_ratio(aspect_ratio, target_ratios, width, height, image_size):
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in target_ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                best_ratio = ratio
    return best_ratio


def dynamic_preprocess(image, min_num=2, max_num=9, image_size=640):
    orig_width, orig_height = image.size
    aspect_ratio = orig_width / orig_height
    target_ratios = set((i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                        if min_num <= i * j <= max_num)
    target_ratios = sorted(target_ratios, key=lambda x: x[0] * x[1])
    r = find_closest_aspect_ratio(aspect_ratio, target_ratios, orig_width, orig_height, image_size)
    tw, th = image_size * r[0], image_size * r[1]
    resized = image.resize((tw, th))  # PIL default filter: BICUBIC
    tiles = []
    for i in range(r[0] * r[1]):
        box = ((i % (tw // image_size)) * image_size, (i // (tw // image_size)) * image_size,
               ((i % (tw // image_size)) + 1) * image_size, ((i // (tw // image_size)) + 1) * image_size)
        tiles.append(resized.crop(box))
    return tiles, r


def preprocess(image, mode, image_token_id):
    """-> (global [1,3,S,S], tiles [n,3,640,640] or None, (cols, rows), image token ids)"""
    base_size, image_size, crop_mode = MODES[mode]
    color = tuple(int(x * 255) for x in MEAN)
    tiles = None
    if crop_mode:
        if image.size[0] <= 640 and image.size[1] <= 640:
            crop_ratio = (1, 1)
        else:
            raw, crop_ratio = dynamic_preprocess(image)  # infer() passes no image_size: 640 tiles
            tiles = torch.stack([to_tensor_normalize(t) for t in raw])
        global_view = ImageOps.pad(image, (base_size, base_size), color=color)
        nq = math.ceil((image_size // PATCH) / DOWNSAMPLE)
        nqb = math.ceil((base_size // PATCH) / DOWNSAMPLE)
        ids = ([image_token_id] * nqb + [image_token_id]) * nqb + [image_token_id]
        w, h = crop_ratio
        if w > 1 or h > 1:
            ids += ([image_token_id] * (nq * w) + [image_token_id]) * (nq * h)
    else:
        if image_size <= 640:
            image = image.resize((image_size, image_size))
        global_view = ImageOps.pad(image, (image_size, image_size), color=color)
        crop_ratio = (1, 1)
        nq = math.ceil((image_size // PATCH) / DOWNSAMPLE)
        ids = ([image_token_id] * nq + [image_token_id]) * nq + [image_token_id]
    return to_tensor_normalize(global_view)[None], tiles, crop_ratio, ids


def render_plain(user_content):
    """format_messages(sft_format='plain'): the 'plain' conversation template joins the stripped messages with empty
    separators (the empty assistant turn adds nothing), then strips the whole."""
    return user_content.strip()


# ---------------------------------------------------------------- SAM ViT-B (sam_vary_sdpa.py)
def sdpa(q, k, v, attn_mask=None):
    """torch.nn.functional.scaled_dot_product_attention's math path (torch >= 2.0; Debian's torch 1.13 lacks it):
    softmax(q k^T / sqrt(d) + attn_mask) v, the float mask added after the scaling."""
    a = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if attn_mask is not None:
        a = a + attn_mask
    return torch.matmul(torch.softmax(a, dim=-1), v)


def interp_bicubic_aa(x, size):
    return F.interpolate(x.to(torch.float32), size=size, mode="bicubic", antialias=True, align_corners=False)


def sam_get_abs_pos(abs_pos, tgt_size):
    if abs_pos.size(1) != tgt_size:
        return interp_bicubic_aa(abs_pos.permute(0, 3, 1, 2), (tgt_size, tgt_size)).permute(0, 2, 3, 1)
    return abs_pos


def get_rel_pos(q_size, k_size, rel_pos):
    max_rel_dist = int(2 * max(q_size, k_size) - 1)
    if rel_pos.shape[0] != max_rel_dist:
        r = F.interpolate(rel_pos.to(torch.float32).reshape(1, rel_pos.shape[0], -1).permute(0, 2, 1),
                          size=max_rel_dist, mode="linear")
        r = r.reshape(-1, max_rel_dist).permute(1, 0)
    else:
        r = rel_pos
    q_coords = torch.arange(q_size)[:, None] * max(k_size / q_size, 1.0)
    k_coords = torch.arange(k_size)[None, :] * max(q_size / k_size, 1.0)
    rel = (q_coords - k_coords) + (k_size - 1) * max(q_size / k_size, 1.0)
    return r[rel.long()]


def add_decomposed_rel_pos(q, rel_pos_h, rel_pos_w, q_size, k_size):
    q_h, q_w = q_size
    k_h, k_w = k_size
    Rh = get_rel_pos(q_h, k_h, rel_pos_h)
    Rw = get_rel_pos(q_w, k_w, rel_pos_w)
    B, _, dim = q.shape
    r_q = q.reshape(B, q_h, q_w, dim)
    rel_h = torch.einsum("bhwc,hkc->bhwk", r_q, Rh).unsqueeze(-1).reshape(B, q_h * q_w, k_h, 1)
    rel_w = torch.einsum("bhwc,wkc->bhwk", r_q, Rw).unsqueeze(-2).reshape(B, q_h * q_w, 1, k_w)
    return rel_h, rel_w


def window_partition(x, ws):
    B, H, W, C = x.shape
    pad_h, pad_w = (ws - H % ws) % ws, (ws - W % ws) % ws
    if pad_h > 0 or pad_w > 0:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    Hp, Wp = H + pad_h, W + pad_w
    x = x.view(B, Hp // ws, ws, Wp // ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, C), (Hp, Wp)


def window_unpartition(windows, ws, pad_hw, hw):
    Hp, Wp = pad_hw
    H, W = hw
    B = windows.shape[0] // (Hp * Wp // ws // ws)
    x = windows.view(B, Hp // ws, Wp // ws, ws, ws, -1).permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hp, Wp, -1)
    return x[:, :H, :W, :].contiguous() if (Hp > H or Wp > W) else x


def layer_norm2d(x, w, b, eps=1e-6):
    u = x.mean(1, keepdim=True)
    s = (x - u).pow(2).mean(1, keepdim=True)
    x = (x - u) / torch.sqrt(s + eps)
    return w[:, None, None] * x + b[:, None, None]


class Sam:
    def __init__(self, w, vc):
        self.w, self.p = w, "model.sam_model."
        self.heads = vc["heads"]
        self.depth = vc["layers"]
        self.global_idx = vc["global_attn_indexes"]
        self.window = 14

    def attn(self, i, x):
        w, p = self.w, f"{self.p}blocks.{i}.attn."
        B, H, W, _ = x.shape
        qkv = F.linear(x, w[p + "qkv.weight"], w[p + "qkv.bias"]).reshape(B, H * W, 3, self.heads, -1)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).reshape(3, B * self.heads, H * W, -1).unbind(0)
        rel_h, rel_w = add_decomposed_rel_pos(q, w[p + "rel_pos_h"], w[p + "rel_pos_w"], (H, W), (H, W))
        q, k, v = (t.view(B, self.heads, H * W, -1) for t in (q, k, v))
        rel_h = rel_h.view(B, self.heads, rel_h.size(1), rel_h.size(2), rel_h.size(3))
        rel_w = rel_w.view(B, self.heads, rel_w.size(1), rel_w.size(2), rel_w.size(3))
        bias = (rel_h + rel_w).view(B, self.heads, rel_h.size(2), rel_h.size(3) * rel_w.size(4))
        x = sdpa(q, k, v, attn_mask=bias)
        x = x.view(B, self.heads, H, W, -1).permute(0, 2, 3, 1, 4).reshape(B, H, W, -1)
        return F.linear(x, w[p + "proj.weight"], w[p + "proj.bias"])

    def block(self, i, x):
        w, p = self.w, f"{self.p}blocks.{i}."
        ws = 0 if i in self.global_idx else self.window
        shortcut = x
        x = F.layer_norm(x, x.shape[-1:], w[p + "norm1.weight"], w[p + "norm1.bias"], 1e-6)
        if ws > 0:
            H, W = x.shape[1], x.shape[2]
            x, pad_hw = window_partition(x, ws)
        x = self.attn(i, x)
        if ws > 0:
            x = window_unpartition(x, ws, pad_hw, (H, W))
        x = shortcut + x
        h = F.layer_norm(x, x.shape[-1:], w[p + "norm2.weight"], w[p + "norm2.bias"], 1e-6)
        h = F.linear(F.gelu(F.linear(h, w[p + "mlp.lin1.weight"], w[p + "mlp.lin1.bias"])),
                     w[p + "mlp.lin2.weight"], w[p + "mlp.lin2.bias"])
        return x + h

    def __call__(self, x, stages=None):
        w, p = self.w, self.p
        x = F.conv2d(x, w[p + "patch_embed.proj.weight"], w[p + "patch_embed.proj.bias"], stride=PATCH).permute(0, 2, 3, 1)
        x = x + sam_get_abs_pos(w[p + "pos_embed"], x.size(1))
        if stages is not None:
            stages.append(("vision.sam.embed", x))
        for i in range(self.depth):
            x = self.block(i, x)
            if stages is not None:
                stages.append((f"vision.sam.block.{i}", x))
        n = x.permute(0, 3, 1, 2)
        n = F.conv2d(n, w[p + "neck.0.weight"])
        n = layer_norm2d(n, w[p + "neck.1.weight"], w[p + "neck.1.bias"])
        n = F.conv2d(n, w[p + "neck.2.weight"], padding=1)
        n = layer_norm2d(n, w[p + "neck.3.weight"], w[p + "neck.3.bias"])
        if stages is not None:
            stages.append(("vision.sam.neck", n.permute(0, 2, 3, 1)))
        n = F.conv2d(n, w[p + "net_2.weight"], stride=2, padding=1)
        n = F.conv2d(n, w[p + "net_3.weight"], stride=2, padding=1)
        if stages is not None:
            stages.append(("vision.sam.out", n.permute(0, 2, 3, 1)))
        return n


# ---------------------------------------------------------------- CLIP-L without patch embedding (clip_sdpa.py)
def clip_get_abs_pos(abs_pos, tgt_size):
    dim = abs_pos.size(-1)
    a = abs_pos.squeeze(0)
    cls_token, old = a[:1], a[1:]
    src = int(math.sqrt(a.shape[0] - 1))
    tgt = int(math.sqrt(tgt_size))
    if src != tgt:
        old = old.view(1, src, src, dim).permute(0, 3, 1, 2).contiguous()
        new = interp_bicubic_aa(old, (tgt, tgt)).permute(0, 2, 3, 1).reshape(tgt * tgt, dim)
        return torch.cat([cls_token, new], dim=0).view(1, tgt * tgt + 1, dim)
    return abs_pos


class Clip:
    def __init__(self, w, vc):
        self.w, self.p = w, "model.vision_model."
        self.heads, self.layers = vc["heads"], vc["layers"]

    def __call__(self, patch_embeds, stages=None):
        w, p = self.w, self.p
        B = patch_embeds.shape[0]
        pe = patch_embeds.flatten(2).transpose(1, 2)
        cls = w[p + "embeddings.class_embedding"].expand(B, 1, -1)
        x = torch.cat([cls, pe], dim=1)
        x = x + clip_get_abs_pos(w[p + "embeddings.position_embedding.weight"][None], x.size(1))
        x = F.layer_norm(x, x.shape[-1:], w[p + "pre_layrnorm.weight"], w[p + "pre_layrnorm.bias"], 1e-5)
        if stages is not None:
            stages.append(("vision.clip.embed", x))
        E = x.shape[-1]
        hd = E // self.heads
        for i in range(self.layers):
            q_ = f"{p}transformer.layers.{i}."
            h = F.layer_norm(x, (E,), w[q_ + "layer_norm1.weight"], w[q_ + "layer_norm1.bias"], 1e-5)
            qkv = F.linear(h, w[q_ + "self_attn.qkv_proj.weight"], w[q_ + "self_attn.qkv_proj.bias"])
            qkv = qkv.view(B, -1, 3, self.heads, hd)
            xq, xk, xv = (t.squeeze(2).permute(0, 2, 1, 3) for t in torch.split(qkv, 1, dim=2))
            o = sdpa(xq, xk, xv).permute(0, 2, 1, 3).reshape(B, -1, E)
            x = x + F.linear(o, w[q_ + "self_attn.out_proj.weight"], w[q_ + "self_attn.out_proj.bias"])
            h = F.layer_norm(x, (E,), w[q_ + "layer_norm2.weight"], w[q_ + "layer_norm2.bias"], 1e-5)
            h = F.linear(h, w[q_ + "mlp.fc1.weight"], w[q_ + "mlp.fc1.bias"])
            h = h * torch.sigmoid(1.702 * h)
            x = x + F.linear(h, w[q_ + "mlp.fc2.weight"], w[q_ + "mlp.fc2.bias"])
            if stages is not None:
                stages.append((f"vision.clip.block.{i}", x))
        return x


# ---------------------------------------------------------------- DeepseekOCRModel.forward (image part)
class Encoder:
    def __init__(self, w, cfg):
        widths = cfg["vision_config"]["width"]
        self.sam = Sam(w, widths["sam_vit_b"])
        self.clip = Clip(w, widths["clip-l-14-224"])
        self.w = w

    def features(self, images, stages=None):
        s1 = self.sam(images, stages)
        s2 = self.clip(s1, stages)
        f = torch.cat((s2[:, 1:], s1.flatten(2).permute(0, 2, 1)), dim=-1)
        return F.linear(f, self.w["model.projector.layers.weight"], self.w["model.projector.layers.bias"])

    def __call__(self, global_view, tiles, crop_ratio, stages=None):
        nl, sep = self.w["model.image_newline"], self.w["model.view_seperator"]
        g = self.features(global_view, stages)
        _, hw, n = g.shape
        h = w = int(hw ** 0.5)
        g = torch.cat([g.view(h, w, n), nl[None, None, :].expand(h, 1, n)], dim=1).view(-1, n)
        if tiles is None:
            return torch.cat([g, sep[None, :]], dim=0)
        loc = self.features(tiles, stages)
        _, hw2, n2 = loc.shape
        h2 = w2 = int(hw2 ** 0.5)
        wc, hc = crop_ratio
        loc = loc.view(hc, wc, h2, w2, n2).permute(0, 2, 1, 3, 4).reshape(hc * h2, wc * w2, n2)
        loc = torch.cat([loc, nl[None, None, :].expand(hc * h2, 1, n2)], dim=1).view(-1, n2)
        return torch.cat([loc, g, sep[None, :]], dim=0)


# ---------------------------------------------------------------- tiny random checkpoint
def make_config():
    lm = {"architectures": ["DeepseekV2ForCausalLM"], "bos_token_id": 0, "eos_token_id": 1,
          "first_k_dense_replace": 1, "hidden_size": 64, "intermediate_size": 128, "kv_lora_rank": None,
          "lm_head": True, "max_position_embeddings": 8192, "moe_intermediate_size": 32, "n_group": 1,
          "n_routed_experts": 4, "n_shared_experts": 1, "num_attention_heads": 4, "num_experts_per_tok": 2,
          "num_hidden_layers": 2, "num_key_value_heads": 4, "q_lora_rank": None, "qk_nope_head_dim": 0,
          "qk_rope_head_dim": 0, "rm_head": False, "topk_group": 1, "topk_method": "greedy",
          "torch_dtype": "bfloat16", "use_mla": False, "v_head_dim": 0, "vocab_size": 512}
    cfg = {"architectures": ["DeepseekOCRForCausalLM"], "model_type": "deepseek_vl_v2",
           "candidate_resolutions": [[1024, 1024]], "global_view_pos": "head", "tile_tag": "2D",
           "language_config": lm,
           # the real file's layout; the sizes are the tiny model's (the remote code ignores this section and
           # hard-codes SAM ViT-B / CLIP-L, so an engine reads it with those values as defaults)
           "vision_config": {"image_size": 1024, "mlp_ratio": 3.7362, "model_name": "deeplip_b_l", "model_type": "vision",
                             "width": {"clip-l-14-224": {"heads": 4, "image_size": 224, "layers": 2, "patch_size": 14,
                                                         "width": 64},
                                       "sam_vit_b": {"downsample_channels": [32, 64], "global_attn_indexes": [1],
                                                     "heads": 2, "layers": 3, "width": 32}}},
           "projector_config": {"input_dim": 128, "model_type": "mlp_projector", "n_embed": 64,
                                "projector_type": "linear"},
           # the remote code's image_token_id is the constant 128815 (its real vocabulary); the tiny vocabulary is 512
           "image_token_id": 300}
    for k, v in lm.items():
        if k != "architectures":
            cfg[k] = v
    return cfg


def make_weights(cfg, seed=1212):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, std=0.05, mean=0.0):
        return torch.randn(*shape, generator=g) * std + mean

    vc = cfg["vision_config"]["width"]
    S, C = vc["sam_vit_b"], vc["clip-l-14-224"]
    sw, sh, sd = S["width"], S["heads"], S["layers"]
    neck = 16
    d2, d3 = S["downsample_channels"]
    cw = C["width"]
    assert d3 == cw
    w = {}
    p = "model.sam_model."
    w[p + "patch_embed.proj.weight"] = rnd(sw, 3, 16, 16, std=0.03)
    w[p + "patch_embed.proj.bias"] = rnd(sw, std=0.02)
    w[p + "pos_embed"] = rnd(1, 64, 64, sw, std=0.2)
    for i in range(sd):
        q = f"{p}blocks.{i}."
        n = 64 if i in S["global_attn_indexes"] else 14
        w[q + "norm1.weight"] = rnd(sw, std=0.1, mean=1.0)
        w[q + "norm1.bias"] = rnd(sw, std=0.05)
        w[q + "attn.qkv.weight"] = rnd(3 * sw, sw, std=0.25)
        w[q + "attn.qkv.bias"] = rnd(3 * sw, std=0.05)
        w[q + "attn.rel_pos_h"] = rnd(2 * n - 1, sw // sh, std=0.3)
        w[q + "attn.rel_pos_w"] = rnd(2 * n - 1, sw // sh, std=0.3)
        w[q + "attn.proj.weight"] = rnd(sw, sw, std=0.15)
        w[q + "attn.proj.bias"] = rnd(sw, std=0.05)
        w[q + "norm2.weight"] = rnd(sw, std=0.1, mean=1.0)
        w[q + "norm2.bias"] = rnd(sw, std=0.05)
        w[q + "mlp.lin1.weight"] = rnd(4 * sw, sw, std=0.15)
        w[q + "mlp.lin1.bias"] = rnd(4 * sw, std=0.05)
        w[q + "mlp.lin2.weight"] = rnd(sw, 4 * sw, std=0.08)
        w[q + "mlp.lin2.bias"] = rnd(sw, std=0.05)
    w[p + "neck.0.weight"] = rnd(neck, sw, 1, 1, std=0.15)
    w[p + "neck.1.weight"] = rnd(neck, std=0.1, mean=1.0)
    w[p + "neck.1.bias"] = rnd(neck, std=0.05)
    w[p + "neck.2.weight"] = rnd(neck, neck, 3, 3, std=0.08)
    w[p + "neck.3.weight"] = rnd(neck, std=0.1, mean=1.0)
    w[p + "neck.3.bias"] = rnd(neck, std=0.05)
    w[p + "net_2.weight"] = rnd(d2, neck, 3, 3, std=0.08)
    w[p + "net_3.weight"] = rnd(d3, d2, 3, 3, std=0.06)
    p = "model.vision_model."
    w[p + "embeddings.class_embedding"] = rnd(cw, std=0.3)
    w[p + "embeddings.patch_embedding.weight"] = rnd(cw, 3, 14, 14, std=0.02)  # unused by DeepSeek-OCR (as real)
    w[p + "embeddings.position_embedding.weight"] = rnd(257, cw, std=0.2)
    w[p + "pre_layrnorm.weight"] = rnd(cw, std=0.1, mean=1.0)
    w[p + "pre_layrnorm.bias"] = rnd(cw, std=0.05)
    for i in range(C["layers"]):
        q = f"{p}transformer.layers.{i}."
        w[q + "layer_norm1.weight"] = rnd(cw, std=0.1, mean=1.0)
        w[q + "layer_norm1.bias"] = rnd(cw, std=0.05)
        w[q + "self_attn.qkv_proj.weight"] = rnd(3 * cw, cw, std=0.15)
        w[q + "self_attn.qkv_proj.bias"] = rnd(3 * cw, std=0.05)
        w[q + "self_attn.out_proj.weight"] = rnd(cw, cw, std=0.1)
        w[q + "self_attn.out_proj.bias"] = rnd(cw, std=0.05)
        w[q + "layer_norm2.weight"] = rnd(cw, std=0.1, mean=1.0)
        w[q + "layer_norm2.bias"] = rnd(cw, std=0.05)
        w[q + "mlp.fc1.weight"] = rnd(2 * cw, cw, std=0.1)
        w[q + "mlp.fc1.bias"] = rnd(2 * cw, std=0.05)
        w[q + "mlp.fc2.weight"] = rnd(cw, 2 * cw, std=0.08)
        w[q + "mlp.fc2.bias"] = rnd(cw, std=0.05)
    H = cfg["hidden_size"]
    w["model.projector.layers.weight"] = rnd(H, cfg["projector_config"]["input_dim"], std=0.05)
    w["model.projector.layers.bias"] = rnd(H, std=0.02)
    w["model.image_newline"] = rnd(H, std=1 / math.sqrt(H))
    w["model.view_seperator"] = rnd(H, std=1 / math.sqrt(H))
    # language decoder (deepseek_ocr_lm's init, smaller)
    V, ff, E, fe = cfg["vocab_size"], cfg["intermediate_size"], cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    w["model.embed_tokens.weight"] = rnd(V, H, std=0.5)
    for i in range(cfg["num_hidden_layers"]):
        q = f"model.layers.{i}."
        w[q + "input_layernorm.weight"] = rnd(H, std=0.1, mean=1.0)
        for t in "qkvo":
            w[q + f"self_attn.{t}_proj.weight"] = rnd(H, H, std=0.12)
        w[q + "post_attention_layernorm.weight"] = rnd(H, std=0.1, mean=1.0)
        mlps = [("mlp.", ff)] if i < cfg["first_k_dense_replace"] else \
            [(f"mlp.experts.{e}.", fe) for e in range(E)] + [("mlp.shared_experts.", fe * cfg["n_shared_experts"])]
        if i >= cfg["first_k_dense_replace"]:
            w[q + "mlp.gate.weight"] = rnd(E, H, std=0.3)
        for m, f in mlps:
            w[q + m + "gate_proj.weight"] = rnd(f, H, std=0.12)
            w[q + m + "up_proj.weight"] = rnd(f, H, std=0.12)
            w[q + m + "down_proj.weight"] = rnd(H, f, std=0.1)
    w["model.norm.weight"] = rnd(H, std=0.1, mean=1.0)
    w["lm_head.weight"] = rnd(V, H, std=0.15)
    # stored in BF16 like the real checkpoint; the goldens use these values upcast to float32
    return {k: v.to(torch.bfloat16) for k, v in w.items()}


def test_image(width, height, seed):
    """A deterministic RGB picture with edges, gradients and text-like strokes (PNG: lossless)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                    ((x // 17 + y // 23) % 2) * 200 + 20], axis=-1).astype(np.int32)
    for _ in range(40):
        x0, y0 = rng.integers(0, width - 20), rng.integers(0, height - 8)
        img[y0:y0 + rng.integers(2, 8), x0:x0 + rng.integers(5, 60)] = rng.integers(0, 255, 3)
    img = np.clip(img + rng.integers(-12, 13, img.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(img, "RGB")


BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
EXTRA_SPECIAL = ("<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>", "<|grounding|>", "<|User|>", "<|Assistant|>")
GROUNDING_PROMPT = "<image>\n<|grounding|>Convert the document to markdown."


def bytes_to_unicode():
    # GPT-2's byte -> printable character table (tests/data/make_vl_tokenizer.py)
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_toy_tokenizer(model_dir, vocab_size, image_id):
    """A toy tokenizer for the tiny vocabulary (the real one has 129280 ids): DeepSeek's BOS 0 / EOS 1, the 256 bytes
    at 2..257 (byte-level BPE without merges), <image> at the config's image_token_id, <unused_N> elsewhere; BOS added
    by a TemplateProcessing post-processor as in DeepSeek's tokenizer.json; no chat template (the remote code uses
    its own 'plain' format). encode_toy() is what it gives for text without special tokens."""
    vocab = {BOS: 0, EOS: 1, "<image>": image_id}
    # the grounding and chat tokens follow <image> in the real vocabulary (128815..128822, DeepSeek-VL2's processor
    # adds them as special tokens in this order), so they take the same offsets here
    for i, t in enumerate(EXTRA_SPECIAL):
        vocab[t] = image_id + 1 + i
    for b, ch in bytes_to_unicode().items():
        vocab[ch] = 2 + b
    used = set(vocab.values())
    for i in range(vocab_size):
        if i not in used:
            vocab["<unused_%d>" % i] = i
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in ((BOS, 0), (EOS, 1), ("<image>", image_id)) +
             tuple((t, image_id + 1 + k) for k, t in enumerate(EXTRA_SPECIAL))]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {BOS: {"id": BOS, "ids": [0], "tokens": [BOS]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": dict(sorted(vocab.items(), key=lambda x: x[1])), "merges": []},
    }
    cfg = {"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": False,
           "model_max_length": 8192, "tokenizer_class": "LlamaTokenizerFast",
           "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added}}
    with open(os.path.join(model_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def encode_toy(text):
    return [2 + b for b in text.encode("utf-8")]


def save_st(path, tensors):
    from st_io import save_file  # the shared reference's safetensors writer
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)


def main():
    out, testdata = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(testdata, "reference"))
    from deepseek_ocr import DeepseekOCRLMRef, rms_norm  # noqa: E402

    cfg = make_config()
    wb = make_weights(cfg)
    os.makedirs(os.path.join(out, "model"), exist_ok=True)
    with open(os.path.join(out, "model", "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    save_st(os.path.join(out, "model", "model.safetensors"), wb)
    w = {k: v.to(torch.float32) for k, v in wb.items()}
    enc = Encoder(w, cfg)
    lm = DeepseekOCRLMRef(cfg, {k: v for k, v in w.items() if not k.startswith(("model.sam", "model.vision",
                                                                                  "model.proj", "model.image_",
                                                                                  "model.view_"))})

    def lm_forward(embeds, cache):
        c = lm.c
        T = embeds.shape[1]
        q_pos = torch.arange(0, T)
        h = embeds
        layers = []
        for i in range(c["num_layers"]):
            p = f"model.layers.{i}."
            h = h + lm._attn(i, rms_norm(h, lm.w[p + "input_layernorm.weight"], c["eps"]), cache, q_pos)
            h = h + lm._mlp(i, rms_norm(h, lm.w[p + "post_attention_layernorm.weight"], c["eps"]))
            layers.append(h)
        return F.linear(rms_norm(h, lm.w["model.norm.weight"], c["eps"]), lm.w["lm_head.weight"]), layers

    image_id = cfg["image_token_id"]
    write_toy_tokenizer(os.path.join(out, "model"), cfg["vocab_size"], image_id)
    # the text after <image>: "\nFree OCR." through the toy tokenizer (text_encode(..., bos=False))
    text_ids = encode_toy("\nFree OCR.")
    cases = {"base": (700, 500, 21), "gundam": (1000, 700, 22)}
    for mode, (iw, ih, seed) in cases.items():
        img = test_image(iw, ih, seed)
        name = f"img_{mode}_{iw}x{ih}.png"
        img.save(os.path.join(out, name))
        img = Image.open(os.path.join(out, name)).convert("RGB")
        prompt = render_plain("<image>\nFree OCR.")
        assert prompt.split("<image>") == ["", "\nFree OCR."]
        gv, tiles, crop_ratio, img_ids = preprocess(img, mode, image_id)
        stages = []
        feats = enc(gv, tiles, crop_ratio, stages)
        assert feats.shape[0] == len(img_ids), (feats.shape, len(img_ids))
        ids = [0] + img_ids + text_ids  # BOS 0, the text before <image> is empty, then the text after it
        mask = torch.tensor(ids) == image_id
        embeds = F.embedding(torch.tensor([ids]), lm.w["model.embed_tokens.weight"]).clone()
        embeds[0][mask] = feats  # masked_scatter_: features in order over the image positions
        cache = lm.new_cache()
        logits, layers = lm_forward(embeds, cache)
        # greedy continuation with the KV cache (text tokens after the prompt)
        new, nxt = [], logits[:, -1]
        for s in range(8):
            tok = nxt.argmax(-1)
            new.append(int(tok))
            if s + 1 < 8:
                nxt = lm.forward(tok[:, None], cache)[:, -1]
        g = {"input_ids": torch.tensor([ids], dtype=torch.int32),
             "pixel_values": gv[0],  # the global view [3, S, S]
             "vision_embeds": feats, "inputs_embeds": embeds[0], "logits": logits[0],
             "greedy_ids": torch.tensor([new], dtype=torch.int32),
             "crop_ratio": torch.tensor(list(crop_ratio), dtype=torch.int32)}
        if tiles is not None:
            g["pixel_values_crops"] = tiles
        # the stages of the first view the encoder ran (the global view), as [rows, C]
        seen = set()
        for k, v in stages:
            if k in seen:
                continue
            seen.add(k)
            g[k] = v[0].reshape(-1, v.shape[-1])
        for i, h in enumerate(layers):
            g[f"llm.layer.{i}"] = h[0]
        save_st(os.path.join(out, f"golden_{mode}.safetensors"), g)
        print(f"{mode}: image {iw}x{ih}, crop {crop_ratio}, {len(ids)} tokens ({len(img_ids)} image), greedy {new}")
        if mode == "base":
            # the grounding prompt on the same image: infer() splits the plain-format prompt at <image> and encodes
            # each piece without BOS; <|grounding|> is a special token there, so it is one id
            prompt = render_plain(GROUNDING_PROMPT)
            before, after = prompt.split("<image>")
            assert before == ""
            pre, post = after.split("<|grounding|>")
            gids = [0] + img_ids + encode_toy(pre) + [image_id + 1 + EXTRA_SPECIAL.index("<|grounding|>")] + \
                encode_toy(post)
            gmask = torch.tensor(gids) == image_id
            gemb = F.embedding(torch.tensor([gids]), lm.w["model.embed_tokens.weight"]).clone()
            gemb[0][gmask] = feats
            cache = lm.new_cache()
            glogits, _ = lm_forward(gemb, cache)
            gnew, nxt = [], glogits[:, -1]
            for s in range(8):
                tok = nxt.argmax(-1)
                gnew.append(int(tok))
                if s + 1 < 8:
                    nxt = lm.forward(tok[:, None], cache)[:, -1]
            save_st(os.path.join(out, "golden_grounding.safetensors"),
                    {"input_ids": torch.tensor([gids], dtype=torch.int32), "logits_last": glogits[0, -1:],
                     "greedy_ids": torch.tensor([gnew], dtype=torch.int32)})
            print(f"grounding: {len(gids)} tokens, greedy {gnew}")


if __name__ == "__main__":
    main()

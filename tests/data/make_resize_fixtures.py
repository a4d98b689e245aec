#!/usr/bin/python3
"""Fixtures for tests/unit/image_test.cpp: what Pillow does, for pipit to match.

Run with Debian's python3-pil (the Pillow the VL goldens used, 9.4):  /usr/bin/python3 tests/data/make_resize_fixtures.py
Writes tests/data/resize/:
  - resize cases: <name>.in.png (RGB source) and <name>.out.png (Image.resize(size, filter, reducing_gap=None)),
    listed in manifest.json with the target size and PIL filter code;
  - convert cases: conv_<mode>.png (grey, grey+alpha, RGBA, palette, palette + tRNS, 16-bit grey) and
    conv_<mode>.rgb.png (Image.open(...).convert("RGB"));
  - EXIF cases: exif_<n>.jpg (orientation n = 1..8 in APP1) and exif_<n>.rgb.png
    (ImageOps.exif_transpose(Image.open(...)).convert("RGB")), exact with libjpeg (tests/data/make_jpeg_fixtures.py
    has the JPEG decoding cases), within a tolerance with stb, the fallback of builds without libjpeg.
Everything is deterministic (fixed seeds) and small (well under 200 KB in total).
"""
import io
import json
import os
import struct
import sys

import numpy as np
import PIL
from PIL import Image, ImageOps

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize")


def source(w, h, seed):
    # smooth gradients plus noise and a hard edge: exercises negative bicubic lobes and clipping
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255.0 * x / max(w - 1, 1)
    g = 255.0 * y / max(h - 1, 1)
    b = np.where((x + y) % 7 < 3, 250.0, 5.0)
    a = np.stack([r, g, b], -1) + rng.normal(0, 20.0, (h, w, 3))
    return Image.fromarray(np.clip(np.round(a), 0, 255).astype(np.uint8), "RGB")


# name, source size, target size, PIL filter code (3 bicubic, 2 bilinear, 1 lanczos, 4 box, 5 hamming)
RESIZE = [
    ("up_7x5_23x17", (7, 5), (23, 17), 3),
    ("up_1x1_5x3", (1, 1), (5, 3), 3),
    ("down_61x47_17x13", (61, 47), (17, 13), 3),
    ("down_100x75_37x29", (100, 75), (37, 29), 3),
    ("down_64x64_63x31", (64, 64), (63, 31), 3),
    ("mixed_30x10_12x25", (30, 10), (12, 25), 3),
    ("edge_1x40_1x13", (1, 40), (1, 13), 3),
    ("edge_40x1_13x1", (40, 1), (13, 1), 3),
    ("edge_40x1_13x3", (40, 1), (13, 3), 3),
    ("edge_2x9_1x1", (2, 9), (1, 1), 3),
    ("same_9x6_9x6", (9, 6), (9, 6), 3),
    ("only_h_33x8_14x8", (33, 8), (14, 8), 3),
    ("only_v_8x33_8x14", (8, 33), (8, 14), 3),
    ("qwen_100x75_112x84", (100, 75), (112, 84), 3),
    ("bilinear_50x30_21x44", (50, 30), (21, 44), 2),
    ("lanczos_50x30_21x13", (50, 30), (21, 13), 1),
    ("box_50x30_21x13", (50, 30), (21, 13), 4),
    ("hamming_50x30_21x13", (50, 30), (21, 13), 5),
]


def png16_grey(values):
    # Pillow cannot write 16-bit grey with arbitrary values portably; write the PNG by hand
    import zlib
    h, w = values.shape

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + b"".join(struct.pack(">H", int(v)) for v in row) for row in values)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def exif_orientation(n):
    # a minimal little-endian TIFF block with IFD0 = { Orientation (0x0112, SHORT, 1) = n }
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
    tiff += struct.pack("<HHIHH", 0x0112, 3, 1, n, 0) + struct.pack("<I", 0)
    return b"Exif\x00\x00" + tiff


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"pillow": PIL.__version__, "resize": [], "convert": [], "exif": []}
    for i, (name, (w, h), (ow, oh), f) in enumerate(RESIZE):
        src = source(w, h, 100 + i)
        src.save(os.path.join(OUT, name + ".in.png"))
        src.resize((ow, oh), resample=f, reducing_gap=None).save(os.path.join(OUT, name + ".out.png"))
        manifest["resize"].append({"name": name, "width": ow, "height": oh, "filter": f})

    base = np.array(source(6, 4, 7))
    grey = Image.fromarray(base[:, :, 0], "L")
    alpha = Image.fromarray(base[:, :, 2], "L")
    convs = {
        "L": grey,
        "LA": Image.merge("LA", [grey, alpha]),
        "RGBA": Image.merge("RGBA", [*Image.fromarray(base, "RGB").split(), alpha]),
        "P": Image.fromarray(base, "RGB").quantize(7),
    }
    ptrns = Image.fromarray(base, "RGB").quantize(5)
    ptrns.info["transparency"] = 2
    convs["PA"] = ptrns
    for mode, im in convs.items():
        path = os.path.join(OUT, "conv_%s.png" % mode)
        im.save(path)
        Image.open(path).convert("RGB").save(os.path.join(OUT, "conv_%s.rgb.png" % mode))
        manifest["convert"].append(mode)
    g16 = np.array([[0, 1, 200, 255], [256, 4000, 40000, 65535]], dtype=np.uint16)
    with open(os.path.join(OUT, "conv_I16.png"), "wb") as fh:
        fh.write(png16_grey(g16))
    Image.open(os.path.join(OUT, "conv_I16.png")).convert("RGB").save(os.path.join(OUT, "conv_I16.rgb.png"))
    manifest["convert"].append("I16")

    # EXIF: a 32x16 image of four flat quadrants (so JPEG decoders agree closely) in each orientation
    q = np.zeros((16, 32, 3), np.uint8)
    q[:8, :16] = (230, 20, 20)
    q[:8, 16:] = (20, 200, 30)
    q[8:, :16] = (30, 40, 220)
    q[8:, 16:] = (240, 230, 40)
    for n in range(1, 9):
        buf = io.BytesIO()
        Image.fromarray(q, "RGB").save(buf, "JPEG", quality=95, exif=exif_orientation(n))
        path = os.path.join(OUT, "exif_%d.jpg" % n)
        with open(path, "wb") as fh:
            fh.write(buf.getvalue())
        ImageOps.exif_transpose(Image.open(path)).convert("RGB").save(os.path.join(OUT, "exif_%d.rgb.png" % n))
        manifest["exif"].append(n)

    with open(os.path.join(OUT, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("wrote %d files, %d bytes, Pillow %s" % (len(os.listdir(OUT)), total, PIL.__version__), file=sys.stderr)


if __name__ == "__main__":
    main()

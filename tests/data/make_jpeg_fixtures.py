#!/usr/bin/python3
"""JPEG fixtures for tests/unit/jpeg_test.cpp: small JPEGs and the RGB bytes PIL decodes them to.

Run with Debian's python3-pil (Pillow 9.4 on libjpeg-turbo 2.1, as the VL goldens):
    /usr/bin/python3 tests/data/make_jpeg_fixtures.py
Writes tests/data/jpeg/:
  <name>.jpg   encoded by Pillow (baseline and progressive; 4:2:0, 4:2:2, 4:4:4; greyscale; CMYK, which Pillow
               writes Adobe-style inverted; an EXIF orientation; odd sizes that end mid-block);
               corrupt_scan_444.jpg has garbage in its entropy-coded data (PIL decodes it anyway);
  <name>.rgb   ImageOps.exif_transpose(Image.open(jpg)).convert("RGB"), as HF's load_image does: height * width * 3
               bytes, no header;
  manifest.json  name, width and height of each .rgb, the Pillow and libjpeg versions.
The sources are smooth gradients with noise and hard edges (all IDCT and upsampling rounding paths matter),
made from fixed seeds; the folder stays well under 150 KB.
"""
import io
import json
import os
import struct
import sys

import numpy as np
import PIL
from PIL import Image, ImageOps, features

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jpeg")


def photo(w, h, seed):
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 120 * np.sin(x / 5.0 + y / 11.0)
    g = 255.0 * y / max(h - 1, 1)
    b = np.where((x // 6 + y // 4) % 2 == 0, 240.0, 15.0)
    a = np.stack([r, g, b], -1) + rng.normal(0, 18.0, (h, w, 3))
    return np.clip(np.round(a), 0, 255).astype(np.uint8)


def exif_orientation(n):
    # a little-endian TIFF block whose IFD0 holds one entry: Orientation (0x0112, SHORT, count 1) = n
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1)
    tiff += struct.pack("<HHIHH", 0x0112, 3, 1, n, 0) + struct.pack("<I", 0)
    return b"Exif\x00\x00" + tiff


# name, size, mode, save options (subsampling: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0)
CASES = [
    ("baseline_420", (37, 29), "RGB", dict(quality=90, subsampling=2)),
    ("baseline_422", (37, 29), "RGB", dict(quality=90, subsampling=1)),
    ("baseline_444", (37, 29), "RGB", dict(quality=90, subsampling=0)),
    ("progressive_420", (45, 23), "RGB", dict(quality=85, subsampling=2, progressive=True)),
    ("progressive_444", (23, 45), "RGB", dict(quality=95, subsampling=0, progressive=True)),
    ("low_quality_420", (40, 32), "RGB", dict(quality=20, subsampling=2)),
    ("optimized_420", (33, 17), "RGB", dict(quality=75, subsampling=2, optimize=True)),
    ("tiny_1x1", (1, 1), "RGB", dict(quality=90, subsampling=2)),
    ("thin_17x2", (17, 2), "RGB", dict(quality=90, subsampling=2)),
    ("grey", (31, 26), "L", dict(quality=90)),
    ("grey_progressive", (26, 31), "L", dict(quality=80, progressive=True)),
    ("cmyk", (30, 21), "CMYK", dict(quality=90)),
    ("exif_6_420", (36, 20), "RGB", dict(quality=90, subsampling=2, exif=exif_orientation(6))),
    ("exif_3_444", (20, 14), "RGB", dict(quality=90, subsampling=0, exif=exif_orientation(3))),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"pillow": PIL.__version__, "libjpeg_turbo": features.version("libjpeg_turbo"), "cases": []}
    for i, (name, (w, h), mode, opts) in enumerate(CASES):
        rgb = Image.fromarray(photo(w, h, 200 + i), "RGB")
        if mode == "L":
            im = rgb.convert("L")
        elif mode == "CMYK":
            # undercolour-free CMYK from RGB plus a K channel of its own, so that K and the inks both vary
            c, m, y, _ = rgb.convert("CMYK").split()
            k = Image.fromarray(photo(w, h, 300 + i)[:, :, 1] // 2, "L")
            im = Image.merge("CMYK", (c, m, y, k))
        else:
            im = rgb
        buf = io.BytesIO()
        im.save(buf, "JPEG", **opts)
        path = os.path.join(OUT, name + ".jpg")
        with open(path, "wb") as fh:
            fh.write(buf.getvalue())
        out = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        with open(os.path.join(OUT, name + ".rgb"), "wb") as fh:
            fh.write(out.tobytes())
        manifest["cases"].append({"name": name, "width": out.width, "height": out.height})

    # corrupt entropy-coded data: libjpeg warns and goes on, PIL keeps what it makes of it (no byte becomes FF, so no
    # marker appears)
    with open(os.path.join(OUT, "baseline_444.jpg"), "rb") as fh:
        data = bytearray(fh.read())
    sos = data.index(b"\xff\xda")
    for i in range(sos + 40, len(data) - 40, 7):
        if data[i] != 0xFF and data[i - 1] != 0xFF:
            data[i] = (data[i] * 31 + 7) % 255
    path = os.path.join(OUT, "corrupt_scan_444.jpg")
    with open(path, "wb") as fh:
        fh.write(bytes(data))
    out = Image.open(path).convert("RGB")
    with open(os.path.join(OUT, "corrupt_scan_444.rgb"), "wb") as fh:
        fh.write(out.tobytes())
    manifest["cases"].append({"name": "corrupt_scan_444", "width": out.width, "height": out.height})

    with open(os.path.join(OUT, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print("wrote %d files, %d bytes, Pillow %s" % (len(os.listdir(OUT)), total, PIL.__version__), file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Fixtures for tests/unit/kquant_test.cpp: random blocks of llama.cpp's block formats and their f32 values.

The values are computed here from the format's description (ggml-common.h block layouts, ggml-quants.c
dequantize_row_*), written per weight index rather than as ggml's loops, in plain Python: each f32 operation is a
double operation rounded to f32 (exact for one +, -, * of f32 inputs), in ggml's order. Output: kquant/<type>.bin =
u32 element count, the block bytes, then the f32 values (little-endian). Run: python3 tests/data/make_kquant_fixtures.py
"""
import os
import random
import struct


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def f16(bits):
    return struct.unpack('<e', struct.pack('<H', bits))[0]


def rand_f16(rng):
    # a finite scale of either sign between 2^-12 and 2^-2 (what real files hold), as f16 bits
    return struct.unpack('<H', struct.pack('<e', rng.choice([-1, 1]) * rng.uniform(2**-12, 2**-2)))[0]


KV = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def q4_1(b):
    d, m = f16(struct.unpack_from('<H', b, 0)[0]), f16(struct.unpack_from('<H', b, 2)[0])
    qs = b[4:20]
    return [f32(f32((qs[i] & 15 if i < 16 else qs[i - 16] >> 4) * d) + m) for i in range(32)]


def q5(b, with_min):
    d = f16(struct.unpack_from('<H', b, 0)[0])
    m = f16(struct.unpack_from('<H', b, 2)[0]) if with_min else 0.0
    off = 4 if with_min else 2
    qh = struct.unpack_from('<I', b, off)[0]
    qs = b[off + 4:off + 20]
    out = []
    for i in range(32):
        q = (qs[i] & 15 if i < 16 else qs[i - 16] >> 4) | (((qh >> i) & 1) << 4)
        out.append(f32(f32(q * d) + m) if with_min else f32((q - 16) * d))
    return out


def iq4_nl(b):
    d = f16(struct.unpack_from('<H', b, 0)[0])
    qs = b[2:18]
    return [f32(d * KV[qs[i] & 15 if i < 16 else qs[i - 16] >> 4]) for i in range(32)]


def q2_k(b):
    scales, qs = b[0:16], b[16:80]
    d, dmin = f16(struct.unpack_from('<H', b, 80)[0]), f16(struct.unpack_from('<H', b, 82)[0])
    out = []
    for w in range(256):
        h, s, t, l = w // 128, (w // 32) % 4, (w // 16) % 2, w % 16
        q = (qs[32 * h + 16 * t + l] >> (2 * s)) & 3
        sc = scales[w // 16]
        out.append(f32(f32(f32(d * (sc & 15)) * q) - f32(dmin * (sc >> 4))))
    return out


def q3_k(b):
    hmask, qs, sc12 = b[0:32], b[32:96], b[96:108]
    d = f16(struct.unpack_from('<H', b, 108)[0])
    out = []
    for w in range(256):
        h, s, t, l = w // 128, (w // 32) % 4, (w // 16) % 2, w % 16
        q = (qs[32 * h + 16 * t + l] >> (2 * s)) & 3
        hbit = (hmask[w % 32] >> (w // 32)) & 1
        g = w // 16
        low = sc12[g] & 15 if g < 8 else sc12[g - 8] >> 4
        high = (sc12[8 + g % 4] >> (2 * (g // 4))) & 3
        sc = (low | (high << 4)) - 32
        out.append(f32(f32(d * sc) * (q - (0 if hbit else 4))))
    return out


def scale_min_k4(sc12, j):
    if j < 4:
        return sc12[j] & 63, sc12[j + 4] & 63
    return (sc12[j + 4] & 15) | ((sc12[j - 4] >> 6) << 4), (sc12[j + 4] >> 4) | ((sc12[j] >> 6) << 4)


def q45_k(b, five):
    d, dmin = f16(struct.unpack_from('<H', b, 0)[0]), f16(struct.unpack_from('<H', b, 2)[0])
    sc12 = b[4:16]
    qh = b[16:48] if five else None
    qs = b[48:176] if five else b[16:144]
    out = []
    for w in range(256):
        p, t, l = w // 64, (w // 32) % 2, w % 32
        g = 2 * p + t
        q = (qs[32 * p + l] >> (4 * t)) & 15
        if five:
            q |= ((qh[l] >> g) & 1) << 4
        sc, m = scale_min_k4(sc12, g)
        out.append(f32(f32(f32(d * sc) * q) - f32(dmin * m)))
    return out


def q6_k(b):
    ql, qh, scales = b[0:128], b[128:192], b[192:208]
    d = f16(struct.unpack_from('<H', b, 208)[0])
    out = []
    for w in range(256):
        h, s, l = w // 128, (w // 32) % 4, w % 32
        byte = ql[64 * h + 32 * (s & 1) + l]
        nib = byte >> 4 if s >= 2 else byte & 15
        q = (nib | (((qh[32 * h + l] >> (2 * s)) & 3) << 4)) - 32
        sc = struct.unpack('<b', bytes([scales[w // 16]]))[0]
        out.append(f32(f32(f32(d * sc) * q)))
    return out


def q8_k(b):
    d = struct.unpack_from('<f', b, 0)[0]
    return [f32(d * v) for v in struct.unpack_from('<256b', b, 4)]


def iq4_xs(b):
    d = f16(struct.unpack_from('<H', b, 0)[0])
    sh = struct.unpack_from('<H', b, 2)[0]
    sl, qs = b[4:8], b[8:136]
    out = []
    for w in range(256):
        g, l = w // 32, w % 32
        byte = qs[16 * g + l % 16]
        nib = byte & 15 if l < 16 else byte >> 4
        ls = ((sl[g // 2] >> (4 * (g % 2))) & 15) | (((sh >> (2 * g)) & 3) << 4)
        out.append(f32(f32(d * (ls - 32)) * KV[nib]))
    return out


# name: (block elements, block bytes, byte offsets of f16 scales, dequantize)
TYPES = {
    'q4_1': (32, 20, [0, 2], q4_1),
    'q5_0': (32, 22, [0], lambda b: q5(b, False)),
    'q5_1': (32, 24, [0, 2], lambda b: q5(b, True)),
    'iq4_nl': (32, 18, [0], iq4_nl),
    'q2_k': (256, 84, [80, 82], q2_k),
    'q3_k': (256, 110, [108], q3_k),
    'q4_k': (256, 144, [0, 2], lambda b: q45_k(b, False)),
    'q5_k': (256, 176, [0, 2], lambda b: q45_k(b, True)),
    'q6_k': (256, 210, [208], q6_k),
    'q8_k': (256, 292, [], q8_k),
    'iq4_xs': (256, 136, [0], iq4_xs),
}


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'kquant')
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(13)
    for name, (elems, nbytes, scale_offs, deq) in TYPES.items():
        nblocks = 512 // elems
        raw, vals = b'', []
        for _ in range(nblocks):
            b = bytearray(rng.getrandbits(8) for _ in range(nbytes))
            for o in scale_offs:
                struct.pack_into('<H', b, o, rand_f16(rng))
            if name == 'q8_k':
                struct.pack_into('<f', b, 0, rng.uniform(-0.01, 0.01))
            raw += bytes(b)
            vals += deq(bytes(b))
        with open(os.path.join(out_dir, name + '.bin'), 'wb') as f:
            f.write(struct.pack('<I', len(vals)) + raw + struct.pack('<%df' % len(vals), *vals))


if __name__ == '__main__':
    main()

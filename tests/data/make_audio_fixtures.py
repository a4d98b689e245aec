"""Small audio fixtures for tests/unit/audio_decode_test.cpp, written with libsndfile itself (through ctypes: no
Python audio package needed): 0.5 s of a 440 Hz tone at 44.1 kHz, stereo (right channel at half amplitude), as
16-bit WAV, FLAC, OGG/Vorbis and MP3. Run from the repository root: python3 tests/data/make_audio_fixtures.py"""
import ctypes
import ctypes.util
import math

SF_FORMAT = {"wav": 0x010000 | 0x0002, "flac": 0x170000 | 0x0002, "ogg": 0x200000 | 0x0060,
             "mp3": 0x230000 | 0x0082}  # WAV|PCM_16, FLAC|PCM_16, OGG|VORBIS, MPEG|MPEG_LAYER_III
SFM_WRITE = 0x20


class SF_INFO(ctypes.Structure):
    _fields_ = [("frames", ctypes.c_int64), ("samplerate", ctypes.c_int), ("channels", ctypes.c_int),
                ("format", ctypes.c_int), ("sections", ctypes.c_int), ("seekable", ctypes.c_int)]


def main():
    lib = ctypes.CDLL(ctypes.util.find_library("sndfile"))
    lib.sf_open.restype = ctypes.c_void_p
    lib.sf_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(SF_INFO)]
    lib.sf_writef_float.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64]
    lib.sf_writef_float.restype = ctypes.c_int64
    lib.sf_close.argtypes = [ctypes.c_void_p]
    sr, n = 44100, 22050
    data = (ctypes.c_float * (2 * n))()
    for i in range(n):
        s = 0.5 * math.sin(2 * math.pi * 440.0 * i / sr)
        data[2 * i], data[2 * i + 1] = s, 0.5 * s
    for ext, fmt in SF_FORMAT.items():
        info = SF_INFO(0, sr, 2, fmt, 0, 0)
        f = lib.sf_open(f"tests/data/audio/tone440_stereo_44k.{ext}".encode(), SFM_WRITE, ctypes.byref(info))
        assert f, f"libsndfile cannot write {ext}"
        assert lib.sf_writef_float(f, data, n) == n
        lib.sf_close(f)


if __name__ == "__main__":
    main()

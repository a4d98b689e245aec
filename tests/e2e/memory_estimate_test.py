#!/usr/bin/env python3
"""`pipit inspect --memory` (runtime/memory_estimate.h, the C API's pipit_estimate_memory) against the peak RSS of
the real CLI doing what the estimate is for: a generation that fills the context, a vision-language model with an
image, and an audio model with a clip of the longest length its processor takes.
Usage: memory_estimate_test.py PIPIT TESTDATA SERVER_MODELS"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import array
import math
import wave

PIPIT, TESTDATA, SERVER_MODELS = sys.argv[1:4]
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = 0.15  # measured on this machine: -5% .. +10% (the note of issue 33 gives the figures)
failures = 0


def estimate(model, ctx):
    out = subprocess.run([PIPIT, "inspect", model, "--memory", "-c", str(ctx), "--json"], check=True,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout
    return json.loads(out)["total"]


def peak_rss(args):
    """Peak resident bytes of one run of the CLI (the child's own rusage, not this process's)."""
    p = subprocess.Popen([PIPIT] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pipit {' '.join(args)} failed: {err}")
    return usage.ru_maxrss * 1024


def check(name, model, ctx, args):
    global failures
    est, peak = estimate(model, ctx), peak_rss(args)
    err = (est - peak) / peak
    ok = abs(err) <= TOLERANCE
    print(f"{'ok  ' if ok else 'FAIL'} {name}: estimate {est / 1e6:.1f} MB, peak RSS {peak / 1e6:.1f} MB, "
          f"error {100 * err:+.1f}%")
    failures += not ok


stories = os.path.join(TESTDATA, "models", "stories260k")
# the whole 512-token context: prompt + 500 generated tokens
check("stories260k, full context", stories, 512,
      ["run", "-m", stories, "-p", "Once upon a time", "-n", "500", "-c", "512", "--temp", "0", "--ignore-eos"])
vl = os.path.join(SERVER_MODELS, "qwen2_vl_chat")
img = os.path.join(TESTDATA, "models", "qwen2_vl", "img_100x75.png")
check("Qwen2-VL-shaped (Qwen tokenizer) with an image", vl, 2048,
      ["run", "-m", vl, "--image", img, "-p", "Describe the image.", "-n", "8", "-c", "2048"])

# An audio clip at the longest the processor takes (Gemma 4: 30 s), the bound its audio record declares
# (models/audio/gemma4_audio.cpp): on the tiny Gemma 4 that encode is most of the peak.
with tempfile.TemporaryDirectory() as d:
    g4 = os.path.join(d, "gemma4")
    shutil.copytree(os.path.join(TESTDATA, "models", "gemma4"), g4)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(SOURCE, "tests", "data", "gemma4_tokenizer", f), g4)
    clip = os.path.join(d, "tone_30s.wav")
    with wave.open(clip, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        # no numpy: a child's peak RSS counts this process's pages before its exec (Linux keeps the higher mark)
        pcm = array.array("h", (int(9830 * math.sin(2 * math.pi * 440 * i / 16000)) for i in range(30 * 16000)))
        if sys.byteorder == "big":
            pcm.byteswap()  # WAV samples are little-endian
        w.writeframes(pcm.tobytes())
    probe = subprocess.run([PIPIT, "run", "-m", g4, "-p", "Hi", "-n", "1", "--audio", clip], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL)
    if "built without libsndfile" in probe.stderr:
        print("skip Gemma 4 with a 30 s clip: this pipit decodes no audio files")
    else:
        check("Gemma 4 (tiny) with a 30 s audio clip", g4, 2048,
              ["run", "-m", g4, "--audio", clip, "-p", "Hi", "-n", "4", "-c", "2048", "--temp", "0"])
sys.exit(1 if failures else 0)

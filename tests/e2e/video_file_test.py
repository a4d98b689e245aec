#!/usr/bin/env python3
"""Video files through FFmpeg's libraries (models/vision/video_file.h), checked with `pipit vision --video` on the tiny
Qwen3.5 checkpoint (testdata/models/qwen3_5_vl):

- the golden clip (its 8 PNG frames at 4 fps) as a lossless file (FFV1 in AVI and in MKV): pixel_values_videos equal
  to the golden bit for bit, the sampled frames, timestamps and vision embeddings as the golden's;
- lossy files (H.264 in MP4 with B-frames, VP9 in WebM, MPEG-4 part 2 in AVI): pipit's frames are PyAV's
  (`frame.to_ndarray(format="rgb24")`, what HF's video loader uses): the frames PyAV decodes at the indices pipit
  sampled, given back to pipit as PNGs, give the same pixel_values_videos bit for bit;
- a 2-minute clip with a keyframe every 10 frames (pipit reaches sampled frames by keyframe seeks): the same check,
  so a seek lands on the frame sequential decoding gives;
- bad files: each one clear error (exit 1, a message naming the video), never a crash, and bounded time;
- the server's `video_url` content part (vLLM's shape) gives the tokens `pipit run --video` gives, and bad video
  parts get a 400 naming the problem.

Usage: video_file_test.py PIPIT TESTDATA SERVER_MODELS. Needs Debian's python3-av and numpy (fixtures only).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import base64

import av
import numpy as np
from PIL import Image

from server_util import Server

PIPIT, TESTDATA, SERVER_MODELS = sys.argv[1], sys.argv[2], sys.argv[3]
MODEL = os.path.join(TESTDATA, "models", "qwen3_5_vl")
GOLDEN_FRAMES = [os.path.join(MODEL, "video_frame%02d.png" % i) for i in range(8)]


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base, out = 8 + n, {}
        for k, v in header.items():
            if k == "__metadata__":
                continue
            f.seek(base + v["data_offsets"][0])
            raw = f.read(v["data_offsets"][1] - v["data_offsets"][0])
            out[k] = np.frombuffer(raw, dtype={"F32": np.float32, "I32": np.int32}[v["dtype"]]).reshape(v["shape"])
        return out


GOLDEN = {k[len("video."):]: v for k, v in load_safetensors(os.path.join(MODEL, "golden.safetensors")).items()
          if k.startswith("video.")}


def write_clip(path, frames, fps, codec, pix_fmt, gop=None, options=None):
    """RGB uint8 arrays -> a video file, with PyAV."""
    with av.open(path, "w") as c:
        s = c.add_stream(codec, rate=fps)
        s.height, s.width = frames[0].shape[:2]
        s.pix_fmt = pix_fmt
        if gop:
            s.gop_size = gop
        if options:
            s.options = options
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def have_encoder(name):
    try:
        av.codec.Codec(name, "w")
        return True
    except Exception:
        return False


def pipit_vision(video, out, *extra):
    r = subprocess.run([PIPIT, "vision", "-m", MODEL, "-t", "2", "--video", video, "-o", out, *extra],
                       capture_output=True, text=True, timeout=300)
    return r


def golden_frames():
    return [np.asarray(Image.open(p).convert("RGB")) for p in GOLDEN_FRAMES]


class VideoFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def vision(self, video, *extra):
        out = os.path.join(self.d, "out_%d.safetensors" % len(os.listdir(self.d)))
        r = pipit_vision(video, out, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return load_safetensors(out)

    def test_lossless_clip_matches_golden(self):
        for name, codec, pix in [("clip.avi", "ffv1", "bgr0"), ("clip.mkv", "ffv1", "bgr0")]:
            path = os.path.join(self.d, name)
            write_clip(path, golden_frames(), 4, codec, pix)
            o = self.vision(path, "--stages")
            np.testing.assert_array_equal(o["pixel_values_videos"], GOLDEN["pixel_values_videos"], err_msg=name)
            np.testing.assert_array_equal(o["video_frame_indices"], GOLDEN["video_frame_indices"])
            np.testing.assert_array_equal(o["video_grid_thw"], GOLDEN["video_grid_thw"])
            np.testing.assert_allclose(o["video_timestamps"], GOLDEN["video_timestamps"], rtol=0, atol=1e-6)
            self.assertLessEqual(np.abs(o["video_embeds"] - GOLDEN["video_embeds"]).max(), 1e-4)
            self.assertLessEqual(np.abs(o["video_vision.block.2"] - GOLDEN["video_vision.block.2"]).max(), 1e-4)

    def check_against_pyav(self, path):
        """pipit's sampled frames are PyAV's frames at the same indices, bit for bit (through the processor)."""
        o = self.vision(path)
        idx = [int(i) for i in o["video_frame_indices"]]
        with av.open(path) as c:
            decoded = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
        self.assertLess(idx[-1], len(decoded))
        frames_dir = os.path.join(self.d, "frames_" + os.path.basename(path))
        os.makedirs(frames_dir)
        for j, i in enumerate(idx):
            Image.fromarray(decoded[i]).save(os.path.join(frames_dir, "f%04d.png" % j))
        # the sampled frames as images at the processor's rate: it samples every one of them again
        ref = self.vision(frames_dir, "--video-fps", "2")
        np.testing.assert_array_equal(ref["video_frame_indices"], np.arange(len(idx)))
        np.testing.assert_array_equal(o["pixel_values_videos"], ref["pixel_values_videos"], err_msg=path)
        return o, decoded

    def test_lossy_files_decode_as_pyav(self):
        frames = golden_frames()
        cases = [("h264.mp4", "libx264", "yuv420p", {"bf": "2"}), ("vp9.webm", "libvpx-vp9", "yuv420p", None),
                 ("vp8.webm", "libvpx", "yuv420p", None), ("mpeg4.avi", "mpeg4", "yuv420p", None)]
        ran = 0
        for name, codec, pix, opts in cases:
            if not have_encoder(codec):
                continue
            path = os.path.join(self.d, name)
            write_clip(path, frames, 4, codec, pix, options=opts)
            self.check_against_pyav(path)
            ran += 1
        self.assertGreaterEqual(ran, 2, "no lossy encoder in this FFmpeg build")

    def test_keyframe_seeks_land_on_the_right_frames(self):
        # 2 minutes at 25 fps, a keyframe every 10 frames: sampled at 2 fps, frames 12.5 apart are reached by seeks.
        # Each frame carries its own index in its pixels, so a frame from the wrong place cannot pass.
        n, h, w = 3000, 32, 48
        frames = []
        for i in range(n):
            a = np.zeros((h, w, 3), np.uint8)
            a[..., 0] = i % 256
            a[..., 1] = (i // 256) * 16
            a[:, : w // 2, 2] = 200
            frames.append(a)
        for name, codec, pix, opts in [("long.mp4", "libx264", "yuv420p", {"bf": "2"}),
                                       ("long.mkv", "ffv1", "bgr0", None)]:
            if not have_encoder(codec):
                continue
            path = os.path.join(self.d, name)
            write_clip(path, frames, 25, codec, pix, gop=10, options=opts)
            t0 = time.time()
            o, decoded = self.check_against_pyav(path)
            self.assertEqual(len(o["video_frame_indices"]), 240)  # 120 s at 2 fps
            self.assertLess(time.time() - t0, 120)

    def test_bad_files_get_one_clear_error(self):
        d = self.d
        good = os.path.join(d, "good.mp4")
        write_clip(good, golden_frames(), 4, "libx264" if have_encoder("libx264") else "mpeg4", "yuv420p")
        with open(good, "rb") as f:
            data = f.read()
        cases = {}

        def case(name, content):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.write(content)
            cases[name] = p

        case("truncated.mp4", data[: len(data) // 3])
        case("header_only.mp4", data[:64])
        case("random.mp4", np.random.default_rng(1).integers(0, 256, 20000, dtype=np.uint8).tobytes())
        case("text.webm", b"this is not a video\n" * 100)
        case("empty.mkv", b"")
        # a playlist naming a local file: FFmpeg's HLS demuxer would open it; pipit reads no playlist
        case("playlist.m3u8", ("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\n%s\n#EXT-X-ENDLIST\n" % good).encode())
        case("concat.txt", ("ffconcat version 1.0\nfile '%s'\n" % good).encode())
        # audio only
        wav = os.path.join(d, "tone.wav")
        with av.open(wav, "w") as c:
            s = c.add_stream("pcm_s16le", rate=16000)
            s.layout = "mono"
            fr = av.AudioFrame.from_ndarray(np.zeros((1, 16000), np.int16), format="s16", layout="mono")
            fr.sample_rate = 16000
            for p in s.encode(fr):
                c.mux(p)
            for p in s.encode():
                c.mux(p)
        cases["tone.wav"] = wav
        # over an hour (1 fps, 16x16 frames: a small file)
        long_path = os.path.join(d, "two_hours.mkv")
        write_clip(long_path, [np.zeros((16, 16, 3), np.uint8)] * 7300, 1, "ffv1", "bgr0")
        cases["two_hours.mkv"] = long_path
        for name, path in cases.items():
            t0 = time.time()
            r = pipit_vision(path, os.path.join(d, "bad.safetensors"))
            self.assertEqual(r.returncode, 1, "%s: rc %d\n%s" % (name, r.returncode, r.stderr))
            self.assertIn("--video", r.stderr, name)
            self.assertNotIn("internal error", r.stderr, name)
            self.assertLess(time.time() - t0, 60, name)
            print("[ error ] %s: %s" % (name, r.stderr.strip().splitlines()[-1][:200]))
        self.assertIn("3600 s", pipit_vision(long_path, os.path.join(d, "x.safetensors")).stderr)

    def test_truncated_tail_decodes_what_is_there(self):
        # MKV keeps its header in front: a file cut in the middle still has its first frames (the header's duration
        # promises more: the last decoded frame stands in for the missing ones)
        path = os.path.join(self.d, "clip.mkv")
        write_clip(path, golden_frames(), 4, "ffv1", "bgr0")
        with open(path, "rb") as f:
            data = f.read()
        cut = os.path.join(self.d, "cut.mkv")
        with open(cut, "wb") as f:
            f.write(data[: len(data) // 2])
        o = self.vision(cut)
        self.assertEqual(o["pixel_values_videos"].shape, GOLDEN["pixel_values_videos"].shape)


class ServerVideo(unittest.TestCase):
    def test_video_url_equals_cli(self):
        model = os.path.join(SERVER_MODELS, "qwen3_5_vl_chat")
        with tempfile.TemporaryDirectory() as d:
            clip = os.path.join(d, "clip.avi")
            write_clip(clip, golden_frames(), 4, "ffv1", "bgr0")
            with open(clip, "rb") as f:
                url = "data:video/x-msvideo;base64," + base64.b64encode(f.read()).decode()
            cli = subprocess.run([PIPIT, "run", "-m", model, "-t", "1", "--video", clip, "-p", "What happens?", "-n",
                                  "6", "--temp", "0", "--ignore-eos", "--json"], check=True, capture_output=True)
            want = json.loads(cli.stdout)
            srv = Server(PIPIT, model)
            try:
                def ask(part, **extra):
                    body = {"messages": [{"role": "user", "content": [part, {"type": "text", "text": "What happens?"}]}],
                            "max_tokens": 6, "temperature": 0, "ignore_eos": True, **extra}
                    return srv.post("/v1/chat/completions", body)

                status, r = ask({"type": "video_url", "video_url": {"url": url}})
                self.assertEqual(status, 200, r)
                self.assertEqual(r["choices"][0]["message"]["content"], want["text"])
                self.assertEqual(r["usage"]["prompt_tokens"], want["timings"]["prompt_tokens"])
                bad = {
                    "remote": {"url": "https://example.com/clip.mp4"},
                    "image media type": {"url": "data:image/png;base64,AAAA"},
                    "not base64": {"url": "data:video/mp4;base64,!!!!"},
                    "local without flag": {"url": clip},
                    "garbage video": {"url": "data:video/mp4;base64," + base64.b64encode(b"x" * 3000).decode()},
                }
                for name, vu in bad.items():
                    status, r = ask({"type": "video_url", "video_url": vu})
                    self.assertEqual(status, 400, name)
                    print("[ 400 ] %s: %s" % (name, r["error"]["message"][:160]))
                self.assertTrue(srv.alive())
            finally:
                self.assertEqual(srv.stop(), 0)
        # `pipit chat`: /video FILE attaches the clip to the next message, as `pipit run --video` does
        with tempfile.TemporaryDirectory() as d:
            clip = os.path.join(d, "clip.avi")
            write_clip(clip, golden_frames(), 4, "ffv1", "bgr0")
            run = subprocess.run([PIPIT, "run", "-m", model, "-t", "1", "--video", clip, "-p", "What happens?", "-n",
                                  "6", "--temp", "0", "--ignore-eos"], check=True, capture_output=True, text=True)
            r = subprocess.run([PIPIT, "chat", "-m", model, "-t", "1", "--temp", "0", "-n", "6", "--ignore-eos"],
                               input="/video %s\nWhat happens?\n/video %s\n" % (clip, os.path.join(d, "none.mp4")),
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("[video: 4 frames sampled, 12 tokens, attached to your next message]", r.stderr)
            turns = r.stdout.split("> ")
            self.assertEqual(turns[2].rstrip("\n"), run.stdout.rstrip("\n"))
            self.assertTrue(turns[3].startswith("error:") and "none.mp4" in turns[3], turns[3])
        text_model = Server(PIPIT, os.path.join(SERVER_MODELS, "qwen3_chat"))
        try:
            status, r = text_model.post("/v1/chat/completions", {"messages": [{"role": "user", "content": [
                {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}]}], "max_tokens": 2})
            self.assertEqual(status, 400)
            self.assertIn("does not accept videos", r["error"]["message"])
        finally:
            text_model.stop()


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)

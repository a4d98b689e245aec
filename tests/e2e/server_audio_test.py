#!/usr/bin/env python3
"""`pipit serve` with audio input: OpenAI's input_audio content part ({"type": "input_audio", "input_audio":
{"data": BASE64, "format": "wav" | "mp3" | ...}}) on the tiny Gemma 4 checkpoint with the toy tokenizer of
tests/data/gemma4_tokenizer. The answer equals `pipit run --audio` on the same message (same template, same clip,
greedy); an MP3 clip at 44.1 kHz stereo is taken; every bad clip is a 400 naming the problem and the server goes on;
/props says the model takes audio.

  server_audio_test.py PIPIT_BINARY TESTDATA_DIR SOURCE_DIR [unittest options]
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, ServerCase  # noqa: E402

PIPIT = TESTDATA = SOURCE = None
PROMPT = "Transcribe this audio."


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def body(data, fmt="wav", **kw):
    b = {"model": "gemma4", "temperature": 0, "max_tokens": 8,
         "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": data, "format": fmt}},
                                                   {"type": "text", "text": PROMPT}]}]}
    b.update(kw)
    return b


class ServerAudio(ServerCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pipit_server_audio_")
        cls.model = os.path.join(cls.tmp, "gemma4")
        shutil.copytree(os.path.join(TESTDATA, "models", "gemma4"), cls.model)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(SOURCE, "tests", "data", "gemma4_tokenizer", f), cls.model)
        cls.wav = os.path.join(cls.model, "tone_1200ms.wav")
        cls.srv = Server(PIPIT, cls.model)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_answer_equals_the_cli(self):
        status, r = self.srv.post("/v1/chat/completions", body(b64(self.wav)))
        self.assertEqual(status, 200, r)
        cli = subprocess.run([PIPIT, "run", "-m", self.model, "-t", "1", "--json", "--temp", "0", "-n", "8", "-p",
                              PROMPT, "--audio", self.wav], capture_output=True, text=True, check=True)
        want = json.loads(cli.stdout)
        self.assertEqual(r["choices"][0]["message"]["content"], want["text"])
        # <bos> <|turn> user \n + <|audio> 30 x <|audio|> <audio|> + 4 pieces + <turn|> \n <|turn> model \n
        self.assertEqual(r["usage"]["prompt_tokens"], 45)
        self.assertEqual(want["timings"]["prompt_tokens"], 45)

    def test_mp3_stereo_44k(self):
        mp3 = os.path.join(SOURCE, "tests", "data", "audio", "tone440_stereo_44k.mp3")
        status, r = self.srv.post("/v1/chat/completions", body(b64(mp3), "mp3"))
        self.assertEqual(status, 200, r)
        self.assertGreater(r["usage"]["prompt_tokens"], 14)

    def test_bad_clips_are_400(self):
        with open(self.wav, "rb") as f:
            good = f.read()
        cases = [
            (body(base64.b64encode(good[: len(good) // 2]).decode()), "truncated"),
            (body(base64.b64encode(b"this is not audio").decode()), "cannot read it as audio"),
            (body(base64.b64encode(good[:36] + b"data\0\0\0\0").decode()), "0 samples"),
            (body("%%% not base64 %%%"), "not base64"),
            (body(b64(self.wav), "xyz"), "format 'xyz' is not supported"),
            ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": "x"}]}]},
             "input_audio must be"),
        ]
        for b, want in cases:
            status, r = self.srv.post("/v1/chat/completions", b)
            self.assertEqual(status, 400, (want, r))
            self.assertIn(want, r["error"]["message"])
        self.assertEqual(self.srv.get("/health")[0], 200)  # the server goes on

    def test_props_say_audio(self):
        status, data, _ = self.srv.request("GET", "/props")
        self.assertEqual(status, 200)
        self.assertTrue(json.loads(data)["modalities"]["audio"])


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    PIPIT, TESTDATA, SOURCE = sys.argv[1:4]
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)

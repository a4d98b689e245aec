#!/usr/bin/env python3
"""`pipit chat` end to end: a piped conversation (history, /clear, /help, unknown commands, Ctrl-D), Ctrl-C that
stops an answer without quitting (and at the prompt), the KV cache reused across turns with the same answers as
the server gives for the whole conversation, and /image on a vision model (refused on a text model).

  chat_test.py PIPIT_BINARY MODELS_DIR TESTDATA_DIR [unittest options]
"""
import json
import os
import select
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server  # noqa: E402

PIPIT = MODEL = VL_MODEL = TESTDATA = None


def chat(model, *args):
    return [PIPIT, "chat", "-m", model, "--temp", "0", "-t", "1", *args]


class Interactive:
    """pipit chat on pipes: write lines, read stdout as it comes."""

    def __init__(self, *args):
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = b""

    def send(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()

    def read_until(self, pred, timeout=60):
        deadline = time.time() + timeout
        while not pred(self.out):
            left = deadline - time.time()
            if left <= 0:
                raise AssertionError(f"timed out; output so far: {self.out[-2000:]!r}")
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if r:
                b = os.read(self.p.stdout.fileno(), 65536)
                if not b:
                    raise AssertionError(f"pipit chat exited; output: {self.out[-2000:]!r}")
                self.out += b

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
        self.p.communicate()

    def finish(self, timeout=60):
        out, err = self.p.communicate(timeout=timeout)
        self.out += out
        return self.p.returncode, self.out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


class Chat(unittest.TestCase):
    def run_piped(self, model, text, *args):
        r = subprocess.run(chat(model, *args), input=text, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout, r.stderr

    def test_speculative_seeded_turns_equal_plain(self):
        # the one generation path: seeded sampling over three turns (the KV cache reused), with prompt lookup or a
        # draft model, prints exactly what plain decoding prints
        text = "Say hello hello hello\nAgain: hello hello\nAnd once more\n"
        sampling = ["--temp", "0.8", "--seed", "5", "-n", "24"]
        plain, _ = self.run_piped(MODEL, text, *sampling)
        lookup, _ = self.run_piped(MODEL, text, *sampling, "--lookup", "--draft-max", "4")
        draft, _ = self.run_piped(MODEL, text, *sampling, "--draft", MODEL)
        self.assertEqual(lookup, plain)
        self.assertEqual(draft, plain)
        other, _ = self.run_piped(MODEL, text, "--temp", "0.8", "--seed", "6", "-n", "24")
        self.assertNotEqual(other, plain)  # the seed matters: the comparison is not vacuous

    def test_json_schema_answer(self):
        schema = '{"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}'
        out, _ = self.run_piped(MODEL, "Answer in JSON\n", "--json-schema", schema, "-n", "64")
        answer = out.split("> ")[1].strip()
        self.assertIn(json.loads(answer)["ok"], (True, False), out)

    def test_piped_conversation(self):
        out, err = self.run_piped(MODEL, "Hello there\nHow are you?\n/help\n/nope\n/clear\nHello there\n", "-n", "12",
                                  "-v")
        turns = out.split("> ")
        self.assertEqual(len(turns), 8, out)  # 7 prompts answered + the one Ctrl-D ends
        self.assertIn("/clear", turns[3])
        self.assertIn("unknown command /nope", turns[4])
        self.assertIn("[conversation cleared]", turns[5])
        self.assertEqual(turns[1], turns[6])  # after /clear the same question gets the same answer
        # the second turn keeps the first prompt and the answer but its last token (evaluated with the new turn)
        self.assertEqual([int(x.split()[0]) for x in err.split("[reused")[1:]], [0, 21, 0], err)

    def test_context_full_is_said(self):
        """An answer cut by a full context ends with a marker, not as if the model had finished (issue 36)."""
        out, _ = self.run_piped(MODEL, "Write a long story\n", "-n", "-1", "-c", "48", "--ignore-eos")
        self.assertIn("[context full (48 tokens): the answer is cut", out)
        out, _ = self.run_piped(MODEL, "Hello there\n", "-n", "4")
        self.assertNotIn("[context full", out)

    def test_long_chat_drops_the_oldest_turns(self):
        """A conversation that outgrows the context goes on without its oldest turns, and says so (issue 36)."""
        lines = "".join(f"Tell me about number {i}\n" for i in range(8))
        out, err = self.run_piped(MODEL, lines, "-n", "16", "-c", "128", "--ignore-eos")
        self.assertEqual(out.count("> "), 9, out)  # 8 answers + the prompt Ctrl-D ends
        self.assertNotIn("error", out)
        self.assertIn("oldest messages were dropped to fit the context of 128 tokens", err)

    def test_commands(self):
        """/system, /set, /regen, /save and /load (issue 36): a loaded conversation continues as the saved one."""
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            saved = os.path.join(d, "conv.json")
            out, _ = self.run_piped(MODEL, f"/system You are terse.\nHello there\n/set temp 0.7\n/set seed 4\n/set top_k x\n"
                                           f"/set\n/regen\n/set temp 0\n/save {saved}\nHow are you?\n", "-n", "12")
            turns = out.split("> ")
            self.assertIn("[system message set]", turns[1])
            self.assertIn("temp 0.7", turns[3])
            self.assertIn("seed 4", turns[4])
            self.assertIn("not a number: x", turns[5])
            self.assertIn("temp 0.7, top_k", turns[6])
            self.assertIn("[conversation saved to", turns[9])
            with open(saved) as f:
                msgs = json.load(f)["messages"]
            self.assertEqual([m["role"] for m in msgs], ["system", "user", "assistant"])
            self.assertEqual(msgs[0]["content"], "You are terse.")
            self.assertIn(msgs[2]["content"], turns[7])  # the regenerated answer is the one kept
            # loaded in a new chat, the next (greedy) turn answers as the chat that saved it did
            out2, _ = self.run_piped(MODEL, f"/load {saved}\nHow are you?\n", "-n", "12")
            self.assertIn("[conversation loaded from", out2.split("> ")[1])
            self.assertEqual(out2.split("> ")[2], turns[10])
            out3, _ = self.run_piped(MODEL, f"/load {os.path.join(d, 'missing.json')}\n/nope x\n", "-n", "4")
            self.assertIn("error:", out3.split("> ")[1])
            self.assertIn("unknown command /nope", out3.split("> ")[2])
            # /save onto a FIFO nobody reads and /dev/full, /load of /dev/zero: an error each, and the chat goes on
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo)
            out4, _ = self.run_piped(MODEL, f"Hi\n/save {fifo}\n/save /dev/full\n/load /dev/zero\n/nope\n", "-n", "2")
            turns = out4.split("> ")
            self.assertIn("FIFO", turns[2])
            self.assertIn("error", turns[3])
            self.assertIn("67.1 MB", turns[4])
            self.assertIn("unknown command /nope", turns[5])

    def test_terminal_line_editing(self):
        """On a terminal: libedit's line editing, Ctrl-C at the prompt a hint (no exit), the up arrow brings the last
        line back (issue 36)."""
        import pty
        ldd = subprocess.run(["ldd", PIPIT], capture_output=True, text=True).stdout
        if "libedit" not in ldd:
            self.skipTest("pipit built without libedit")
        master, slave = pty.openpty()
        p = subprocess.Popen(chat(MODEL, "-n", "8"), stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                             preexec_fn=None)
        os.close(slave)
        buf = b""

        def read_until(pred, timeout=60):
            nonlocal buf
            deadline = time.time() + timeout
            while not pred(buf):
                self.assertLess(time.time(), deadline, f"timed out; the terminal shows {buf[-1500:]!r}")
                r, _, _ = select.select([master], [], [], 0.1)
                if r:
                    try:
                        buf += os.read(master, 65536)
                    except OSError:
                        break

        try:
            read_until(lambda b: b.rstrip().endswith(b">"))
            time.sleep(0.3)  # libedit has the terminal
            os.write(master, b"Hello there\r")
            read_until(lambda b: b.count(b"\n> ") >= 2)  # answered: the next prompt
            p.send_signal(signal.SIGINT)
            read_until(lambda b: b"/exit quits" in b and b.rstrip().endswith(b">"))
            time.sleep(0.5)  # libedit has the terminal again (keys typed before it does reach it as a line)
            os.write(master, b"\x1b[A")  # up: the last line again
            read_until(lambda b: b.rstrip().endswith(b"> Hello there"))
            os.write(master, b"\r")
            read_until(lambda b: b.count(b"\n> ") >= 4)
            # /exit (a Ctrl-D typed before libedit takes the terminal back would be the line discipline's EOF,
            # which a switch to raw mode drops: the piped tests cover Ctrl-D)
            os.write(master, b"/exit\r")
            self.assertEqual(p.wait(timeout=60), 0, buf[-1500:])
        finally:
            if p.poll() is None:
                p.kill()
            os.close(master)

    def test_image_paths_as_typed(self):
        """/image takes a path quoted, with escaped spaces (a file dragged onto a terminal) or under ~ (issue 36)."""
        import shutil
        import tempfile
        img = os.path.join(TESTDATA, "models", "qwen2_vl", "img_100x75.png")
        with tempfile.TemporaryDirectory() as home:
            os.mkdir(os.path.join(home, "my pics"))
            shutil.copy(img, os.path.join(home, "my pics", "cat.png"))
            typed = ["'~/my pics/cat.png'", '"%s/my pics/cat.png"' % home, "~/my\\ pics/cat.png",
                     "  %s/my\\ pics/cat.png  " % home]
            r = subprocess.run(chat(VL_MODEL, "-n", "4"), input="".join("/image %s\n" % t for t in typed),
                               capture_output=True, text=True, timeout=300, env=dict(os.environ, HOME=home))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("attached to your next message"), len(typed), r.stdout + r.stderr)
        self.assertNotIn("error", r.stdout)

    def test_answers_equal_the_servers(self):
        """The reused cache gives what the server computes for the whole conversation at once."""
        out, _ = self.run_piped(MODEL, "Hello there\nHow are you?\nAnd then?\n", "-n", "12")
        answers = [t.rstrip("\n") for t in out.split("> ")[1:4]]
        srv = Server(PIPIT, MODEL, "--parallel", "1", threads=1)
        try:
            msgs = []
            for q, a in zip(["Hello there", "How are you?", "And then?"], answers):
                msgs.append({"role": "user", "content": q})
                status, r = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 12, "temperature": 0})
                self.assertEqual(status, 200, r)
                self.assertEqual(r["choices"][0]["message"]["content"], a)
                msgs.append({"role": "assistant", "content": a})
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_ctrl_c_stops_the_answer_not_the_chat(self):
        with Interactive(*chat(MODEL, "-n", "100000", "--ignore-eos")) as c:
            self.interrupt(c)

    def interrupt(self, c):
        c.read_until(lambda o: o.endswith(b"> "))
        c.p.send_signal(signal.SIGINT)  # at the prompt: a hint, no exit
        c.read_until(lambda o: b"/exit quits" in o and o.endswith(b"> "))
        c.send("Write a long story")
        c.read_until(lambda o: len(o.split(b"> ")[-1]) > 40)
        c.p.send_signal(signal.SIGINT)
        c.read_until(lambda o: b"[stopped]" in o and o.endswith(b"> "))
        c.send("And another one")
        c.read_until(lambda o: len(o.split(b"> ")[-1]) > 40)
        c.p.send_signal(signal.SIGINT)
        c.read_until(lambda o: o.count(b"[stopped]") == 2 and o.endswith(b"> "))
        c.send("/exit")
        rc, out, err = c.finish()
        self.assertEqual(rc, 0, err)

    def test_image(self):
        img = os.path.join(TESTDATA, "models", "qwen2_vl", "img_100x75.png")
        out, _ = self.run_piped(MODEL, f"/image {img}\nWhat is this?\n", "-n", "4")
        self.assertIn("error: this model does not accept images", out)
        out, err = self.run_piped(VL_MODEL, f"/image {img}\nDescribe the picture.\n/image /nonexistent.png\n"
                                            "And now?\n", "-n", "20", "-v")
        self.assertIn("attached to your next message", err)
        turns = out.split("> ")
        self.assertIn("error:", turns[3])  # the missing file
        run = subprocess.run([PIPIT, "run", "-m", VL_MODEL, "-p", "Describe the picture.", "--image", img, "-n", "20",
                              "--temp", "0", "-t", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(turns[2].rstrip("\n"), run.stdout.rstrip("\n"))
        self.assertEqual(len(err.split("[reused")), 3, err)  # both questions answered
        # the second question keeps the image's KV: it reuses more than the image's tokens
        reused = [int(x.split()[0]) for x in err.split("[reused")[1:]]
        self.assertEqual(reused[0], 0, err)
        self.assertGreater(reused[1], 12, err)
        # --image attaches to the first message
        out2, _ = self.run_piped(VL_MODEL, "Describe the picture.\n", "-n", "20", "--image", img)
        self.assertEqual(out2.split("> ")[1].rstrip("\n"), run.stdout.rstrip("\n"))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    PIPIT, TESTDATA = sys.argv[1], sys.argv[3]
    MODEL = os.path.join(sys.argv[2], "qwen3_chat")
    VL_MODEL = os.path.join(sys.argv[2], "qwen2_vl_chat")
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)

#!/usr/bin/env python3
"""`pipit serve` against hostile clients (issue 19): each attack is bounded in time and in the server's memory
(VmRSS read from /proc before and after), and /health answers within 1 s while it runs.

  1. bodies: a chunked body past --max-body is cut off with a 413 after about --max-body bytes; compressed bodies
     (a gzip bomb) are refused with 415 unread; a declared Content-Length over the cap gets a 413 at once (not after
     draining it); a body that never comes ends after --read-timeout.
  2. chat_template_kwargs cannot replace the template or the special tokens (enable_thinking still works).
  3. prompts: a text longer than --max-prompt-tokens could be is refused before it is tokenized (fast, no memory);
     --max-prompt-tokens gives a 400 above it.
  4. slow clients: trickled headers are cut off after --read-timeout however steadily they trickle; one address
     holding its share of connections gets 429 for more, while /health from another address stays fast.
  6. images: a request with 16 large images does not hold a one-image request for all of them, and stops when its
     client leaves.
  7. --allow-local-files DIR: only files under DIR; every refusal (outside, missing, symlink out, NUL, not an
     image, a directory) is the same message.
  8. Host, Origin, CORS (issue 35.2 / 34.2): rebinding Host names and cross-origin POSTs refused on a default
     server; same-origin, Origin-less, --allow-host and --cors requests (with preflight) answered.
(5, the engine's data races, is the ThreadSanitizer run noted in docs/server.md and tests/unit/engine_test.cpp.)
Issue 18's server part (class Load): RSS before/after 300 requests, 64 concurrent clients against 4 slots, and an
allocation failure (under RLIMIT_AS) answered as one error while the server serves on.

  server_hostile_test.py PIPIT_BINARY MODELS_DIR TESTDATA_DIR [unittest options]
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server, ServerCase  # noqa: E402

PIPIT = MODEL = VL_MODEL = TESTDATA = None
CHAT = "/v1/chat/completions"
MiB = 1 << 20


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def chat(content, **kw):
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}
    body.update(kw)
    return body


def png(width, height, rgb=(200, 40, 90)):
    """A valid RGB PNG of one colour: tiny to send, width * height pixels to decode."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height, 6)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", raw) + chunk(b"IEND", b""))


def data_url(b):
    return "data:image/png;base64," + base64.b64encode(b).decode()


def connect_from(srv, source="127.0.0.1", timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((srv.host, srv.port))
    return s


def read_reply(s, limit=1 << 16):
    """What the server sends until it closes (or goes quiet), b"" on a reset."""
    out = b""
    try:
        while len(out) < limit:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def status_of(reply):
    try:
        return int(reply.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


class HealthWatch:
    """Polls /health from 127.0.0.1 on its own thread while an attack runs; records the slowest answer."""

    def __init__(self, srv):
        self.srv, self.worst, self.failures, self.n = srv, 0.0, [], 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            t0 = time.time()
            try:
                c = self.srv.connect(timeout=5)
                c.request("GET", "/health")
                r = c.getresponse()
                body = json.loads(r.read())
                c.close()
                if r.status != 200 or body.get("status") != "ok":
                    self.failures.append(f"{r.status} {body}")
            except (OSError, ValueError) as e:
                self.failures.append(repr(e))
            self.worst = max(self.worst, time.time() - t0)
            self.n += 1
            self.stop.wait(0.1)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.t.join()


class Guarded(ServerCase):
    """Shared checks: the server stays up, /health < 1 s during the attack, RSS grows by less than `mb`."""

    def attack(self, fn, mb=64, health=True):
        before = rss_mb(self.srv.proc.pid)
        if health:
            with HealthWatch(self.srv) as w:
                out = fn()
            self.assertFalse(w.failures, w.failures[:3])
            self.assertGreater(w.n, 0)
            self.assertLess(w.worst, 1.0, f"/health took {w.worst:.2f} s during the attack")
        else:
            out = fn()
        after = rss_mb(self.srv.proc.pid)
        print(f"[hostile] {self.id().split('.')[-1]}: RSS {before:.0f} -> {after:.0f} MB" +
              (f", /health worst {w.worst * 1000:.0f} ms of {w.n}" if health else ""), file=sys.stderr)
        self.assertLess(after - before, mb, f"RSS {before:.0f} -> {after:.0f} MB")
        self.assertTrue(self.srv.alive())
        return out


class Bodies(Guarded):
    """Points 1-4 on one text server: 1 MiB bodies, 2 s read timeout, 24 HTTP threads (16 per address)."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "2", "--ctx", "256", "--max-body", str(4 * MiB),
                         "--read-timeout", "2", "--http-threads", "24", "--max-prompt-tokens", "100")

    def test_1_chunked_body_is_capped(self):
        def run():
            s = connect_from(self.srv)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            piece = b"%x\r\n" % (64 << 10) + b" " * (64 << 10) + b"\r\n"
            sent = 0
            try:
                while sent < 64 * MiB:  # 16x the cap; the server must stop reading long before
                    s.sendall(piece)
                    sent += 64 << 10
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass
            reply = read_reply(s)
            s.close()
            return sent, reply
        t0 = time.time()
        sent, reply = self.attack(run)
        self.assertLess(sent, 16 * MiB, "the server kept reading a chunked body past --max-body")
        if reply:  # the 413 can be lost to the reset of the unread bytes; it is there when it arrives
            self.assertEqual(status_of(reply), 413, reply[:200])
            self.assertIn(b"request_too_large", reply)
        self.assertLess(time.time() - t0, 10)

    def test_1_compressed_bodies_are_refused(self):
        # 256 MiB of zeros deflate to ~256 KB: httplib alone inflates it all into the request body
        comp = zlib.compressobj(9, zlib.DEFLATED, 31)
        zeros = b"\0" * MiB
        bomb = b"".join(comp.compress(zeros) for _ in range(256)) + comp.flush()
        for enc, body in [("gzip", bomb), ("deflate", zlib.compress(json.dumps(chat("hi")).encode())),
                          ("br", b"\x0b\x02\x80{}\x03"), ("GZIP", bomb[:1000])]:
            with self.subTest(enc=enc):
                def run():
                    return self.srv.request("POST", CHAT, body, {"Content-Encoding": enc})
                status, data, _ = self.attack(run, mb=32)
                self.assertEqual(status, 415, data)
                self.assertEqual(json.loads(data)["error"]["code"], "unsupported_media_type")
        status, data, _ = self.srv.request("POST", CHAT, chat("hi"), {"Content-Encoding": "identity"})
        self.assertEqual(status, 200, data)

    def test_1_declared_length_over_cap_is_refused_at_once(self):
        for cl in [b"1000000000000", b"99999999999999999999999", str(4 * MiB + 1).encode()]:
            with self.subTest(cl=cl):
                def run():
                    s = connect_from(self.srv)
                    t0 = time.time()
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + cl +
                              b"\r\n\r\n{")
                    reply = read_reply(s)
                    s.close()
                    return time.time() - t0, reply
                took, reply = self.attack(run)
                self.assertEqual(status_of(reply), 413, reply[:200])
                self.assertIn(b"Connection: close", reply)
                self.assertLess(took, 1.0, "413 came only after waiting for the body")
        # the same with Expect: 100-continue: refused before the body is invited
        s = connect_from(self.srv)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\n"
                  b"Content-Length: 1000000000\r\n\r\n")
        reply = read_reply(s)
        s.close()
        self.assertEqual(status_of(reply), 413, reply[:200])

    def test_1_missing_body_times_out(self):
        def run():
            s = connect_from(self.srv)
            t0 = time.time()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5000\r\n\r\n{\"mess")
            reply = read_reply(s)
            s.close()
            return time.time() - t0, reply
        took, reply = self.attack(run)
        self.assertLess(took, 2 + 2.5, "a body that never came held the connection past --read-timeout")
        self.assertEqual(status_of(reply), 400, reply[:200])

    def test_1_other_framing(self):
        for head, want in [
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n\r\n", 411),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nTransfer-Encoding: chunked"
             b"\r\n\r\n{}", 400),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
             400),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0x10\r\n\r\n{}", 400),
            (b"POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3000000\r\n\r\n", 404),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: multipart/form-data; boundary=x\r\n"
             b"Content-Length: 4\r\n\r\n--x-", 415),
            (b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Long: " + b"a" * 100000 + b"\r\n\r\n", 400),
        ]:
            with self.subTest(head=head[:90]):
                s = connect_from(self.srv)
                s.sendall(head)
                reply = read_reply(s)
                s.close()
                self.assertEqual(status_of(reply), want, reply[:300])
        # a correct chunked body is still read
        body = json.dumps(chat("hi")).encode()
        s = connect_from(self.srv)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        reply = read_reply(s)
        s.close()
        self.assertEqual(status_of(reply), 200, reply[:300])

    def test_2_template_kwargs(self):
        evil = "{% for i in range(1000000) %}" + "x" * 60 + "{% endfor %}"
        for kw in [{"chat_template": evil}, {"bos_token": "<|im_start|>" * 1000}, {"eos_token": "x"},
                   {"messages": "x"}, {"add_generation_prompt": False}, {"image_token": "x"},
                   {"additional_special_tokens": "x"}]:
            with self.subTest(kw=list(kw)):
                status, body = self.attack(lambda: self.srv.post(CHAT, chat("hi", chat_template_kwargs=kw)), mb=32)
                self.assertEqual(status, 400, body)
                self.assertEqual(body["error"]["param"], "chat_template_kwargs")
                self.assertIn("set by the server", body["error"]["message"])
        for kw in [{"enable_thinking": False}, {"enable_thinking": True}]:
            status, body = self.srv.post(CHAT, chat("hi", chat_template_kwargs=kw))
            self.assertEqual(status, 200, body)

    def test_2_schema_size_is_bounded(self):
        # a structured-output schema whose enum holds one 3.5 MB string: the grammar would have 3.5M elements
        # (~80 bytes each once compiled: a 30 MB one took 28 s and 4 GB); refused as it is built, quickly
        schema = {"type": "object", "properties": {"a": {"enum": ["x" * (3500 * 1000)]}}, "required": ["a"]}
        req = {"prompt": "hi", "max_tokens": 2,
               "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}}
        t0 = time.time()
        status, body = self.attack(lambda: self.srv.post("/v1/completions", req), mb=64)
        self.assertEqual(status, 400, body)
        self.assertIn("the most one may have", body["error"]["message"])
        self.assertLess(time.time() - t0, 3.0)

    def test_3_prompt_limits(self):
        # --max-prompt-tokens 100: a short text over it is tokenized and refused with the option named
        status, body = self.srv.post(CHAT, chat("hello " * 150))
        self.assertEqual(status, 400, body)
        self.assertEqual(body["error"]["code"], "context_length_exceeded")
        self.assertIn("--max-prompt-tokens", body["error"]["message"])
        status, body = self.srv.post("/v1/completions", {"prompt": list(range(1000, 1101)), "max_tokens": 2})
        self.assertEqual((status, body["error"]["code"]), (400, "context_length_exceeded"), body)
        status, body = self.srv.post("/v1/completions", {"prompt": list(range(1000, 1100)), "max_tokens": 2})
        self.assertEqual(status, 200, body)
        # a text of nearly --max-body bytes is refused before it is tokenized: quickly and with no memory
        # (tokenizing 3.9 MB would cost ~120 MB and seconds)
        big = "word " * (780 * 1000)
        for path, req in [(CHAT, chat(big)), ("/v1/completions", {"prompt": big, "max_tokens": 2}),
                          (CHAT, chat("hi", chat_template_kwargs={"enable_thinking": big}))]:
            with self.subTest(path=path):
                t0 = time.time()
                status, body = self.attack(lambda: self.srv.post(path, req), mb=40)
                self.assertEqual(status, 400, body)
                self.assertEqual(body["error"]["code"], "context_length_exceeded")
                self.assertIn("bytes of text", body["error"]["message"])
                self.assertLess(time.time() - t0, 3.0)

    def test_4_slow_clients(self):
        """40 connections from 127.0.0.2 trickle a header byte every 0.3 s: 16 are admitted and cut off after
        --read-timeout (2 s) although they never stop sending, the rest get 429 at once; /health from 127.0.0.1
        stays fast throughout."""
        refused_before = self.srv.health()["connections_refused"]

        def run():
            socks = [connect_from(self.srv, "127.0.0.2") for _ in range(40)]
            for s in socks:
                s.setblocking(False)
            alive, t0, i = set(socks), time.time(), 0
            line = b"GET /health HTTP/1.1\r\nX-Slow: "
            while alive and time.time() - t0 < 8:
                for s in list(alive):
                    try:
                        s.send(line[i:i + 1] if i < len(line) else b"a")
                        if s.recv(4096) is not None:  # an answer (429, 400) or b"" (closed): either way, over
                            alive.discard(s)
                    except (BlockingIOError, InterruptedError):
                        pass
                    except OSError:  # reset or broken pipe: closed by the server
                        alive.discard(s)
                i += 1
                time.sleep(0.3)
            for s in socks:
                s.close()
            return len(alive), time.time() - t0
        left, took = self.attack(run)
        self.assertEqual(left, 0, "trickling connections were never cut off")
        self.assertLess(took, 2 + 3.0)
        refused = self.srv.health()["connections_refused"] - refused_before
        self.assertGreaterEqual(refused, 40 - 16, "the per-address cap let more than 16 connections in")
        # the cap counts open connections: they are all closed now, so 127.0.0.2 is served again
        s = connect_from(self.srv, "127.0.0.2")
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        self.assertEqual(status_of(read_reply(s)), 200)
        s.close()

    def test_4_idle_connections_do_not_starve_others(self):
        """16 idle keep-alive connections from 127.0.0.2 (one request each, then silence) and 30 more that
        never send anything: requests from 127.0.0.1 are still answered."""
        def run():
            socks = []
            for _ in range(16):
                s = connect_from(self.srv, "127.0.0.2")
                s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
                s.recv(4096)
                socks.append(s)
            for _ in range(30):
                socks.append(connect_from(self.srv, "127.0.0.2"))
            status, body = self.srv.post(CHAT, chat("hi"))
            for s in socks:
                s.close()
            return status, body
        status, body = self.attack(run)
        self.assertEqual(status, 200, body)


class Images(Guarded):
    """Points 6 and 7 on the vision model."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="pipit-shared-")
        src = os.path.join(TESTDATA, "models", "qwen2_vl", "img_100x75.png")
        shutil.copy(src, os.path.join(cls.dir, "cat.png"))
        with open(os.path.join(cls.dir, "notes.txt"), "w") as f:
            f.write("not an image\n")
        os.symlink("/etc/passwd", os.path.join(cls.dir, "link.png"))
        os.mkdir(os.path.join(cls.dir, "sub"))
        cls.srv = Server(PIPIT, VL_MODEL, "--parallel", "2", "--ctx", "2048", "--allow-local-files", cls.dir)
        with open(src, "rb") as f:
            cls.small = data_url(f.read())
        cls.big = data_url(png(2000, 2000))

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def body(self, urls, **kw):
        parts = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
        b = {"messages": [{"role": "user", "content": parts + [{"type": "text", "text": "What is it?"}]}],
             "max_tokens": 3, "temperature": 0}
        b.update(kw)
        return b

    def test_6_many_images_do_not_hold_the_others(self):
        one = self.srv.post(CHAT, self.body([self.big]))  # warm up; and one big image's time
        self.assertEqual(one[0], 200, one[1])
        t0 = time.time()
        self.srv.post(CHAT, self.body([self.big]))
        per_image = time.time() - t0
        result = {}

        def many():
            t = time.time()
            result["many"] = self.srv.post(CHAT, self.body([self.big] * 16))[0]
            result["many_s"] = time.time() - t

        def run():
            th = threading.Thread(target=many)
            th.start()
            deadline = time.time() + 30
            while self.srv.health()["image_requests"] < 1 and time.time() < deadline:
                time.sleep(0.02)
            t = time.time()
            status, body = self.srv.post(CHAT, self.body([self.small]))
            result["one"], result["one_s"] = status, time.time() - t
            th.join()
        self.attack(run, mb=400)
        self.assertEqual(result["one"], 200)
        self.assertEqual(result["many"], 200)
        # the one-image request waited for at most an image or two of the other, not for all 16
        print(f"[hostile] one big image {per_image:.2f} s; 16 of them {result['many_s']:.2f} s; a one-image "
              f"request meanwhile {result['one_s']:.2f} s", file=sys.stderr)
        self.assertLess(result["one_s"], 4 * per_image + 1.0, (result, per_image))
        self.assertLess(result["one_s"], result["many_s"], (result, per_image))

    def test_6_leaving_client_stops_its_images(self):
        before = self.srv.health()["images_encoded"]
        c = self.srv.connect()
        c.request("POST", CHAT, body=json.dumps(self.body([self.big] * 16)),
                  headers={"Content-Type": "application/json"})
        deadline = time.time() + 60
        while self.srv.health()["images_encoded"] < before + 1 and time.time() < deadline:
            time.sleep(0.02)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        while self.srv.health()["image_requests"] > 0 and time.time() < deadline:
            time.sleep(0.05)
        h = self.srv.health()
        self.assertEqual(h["image_requests"], 0)
        self.assertLess(h["images_encoded"] - before, 16, "the images of a client that left were all encoded")

    def test_7_local_files(self):
        by_data = self.srv.post(CHAT, self.body([self.small]))
        self.assertEqual(by_data[0], 200, by_data[1])
        for url in ["cat.png", os.path.join(self.dir, "cat.png"), "file://" + os.path.join(self.dir, "cat.png"),
                    os.path.join(self.dir, "sub", "..", "cat.png")]:
            status, body = self.srv.post(CHAT, self.body([url]))
            self.assertEqual(status, 200, (url, body))
            self.assertEqual(body["choices"][0]["message"], by_data[1]["choices"][0]["message"])
        messages = set()
        for url in ["/etc/passwd", "/etc/shadow", "/nonexistent/x.png", os.path.join(self.dir, "..", "..", "etc",
                    "passwd"), "../../../../etc/passwd", "link.png", "notes.txt", "sub", self.dir, "missing.png",
                    "cat.png\u0000.txt", os.path.join(self.dir, "cat.png") + "\u0000", "/proc/self/environ",
                    "/dev/zero", "file:///etc/hostname"]:
            with self.subTest(url=url):
                status, body = self.attack(lambda: self.srv.post(CHAT, self.body([url])), mb=32, health=False)
                self.assertEqual(status, 400, body)
                messages.add(body["error"]["message"])
        self.assertEqual(len(messages), 1, messages)
        self.assertNotIn("bytes", messages.pop())


class Origins(ServerCase):
    """Issue 35.2 / 34.2: DNS rebinding and cross-site requests against a default (loopback) server are refused with
    403; the chat page's same-origin POST, clients without Origin, --allow-host names and --cors origins (preflight
    included) are answered, with the CORS headers."""
    CORS = "http://localhost:3000"

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "1", "--ctx", "128")
        cls.cors = Server(PIPIT, MODEL, "--parallel", "1", "--ctx", "128", "--cors", cls.CORS + ",https://app.example",
                          "--allow-host", "mybox.lan")

    @classmethod
    def tearDownClass(cls):
        code = cls.cors.stop()
        super().tearDownClass()
        assert code == 0, cls.cors.output()

    def ask(self, srv, method, path, headers, body=None):
        c = srv.connect(timeout=60)
        try:
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()

    def own(self, srv):
        return f"{srv.host}:{srv.port}"

    def refused(self, status, data, code):
        self.assertEqual(status, 403, data[:300])
        self.assertEqual(json.loads(data)["error"]["code"], code, data[:300])

    def test_rebinding_host_is_refused(self):
        for host in ["evil.example", f"evil.example:{self.srv.port}", f"127.0.0.1.nip.io:{self.srv.port}",
                     "localhost.evil.example", "mybox.lan"]:
            for method, path, body in [("GET", "/v1/models", None), ("GET", "/", None),
                                       ("POST", CHAT, json.dumps(chat("hi")))]:
                status, data, _ = self.ask(self.srv, method, path, {"Host": host, "Content-Type": "application/json"},
                                           body)
                self.refused(status, data, "host_not_allowed")
        for host in [self.own(self.srv), f"localhost:{self.srv.port}", "localhost", f"app.localhost:{self.srv.port}"]:
            status, data, _ = self.ask(self.srv, "GET", "/v1/models", {"Host": host})
            self.assertEqual(status, 200, (host, data[:200]))

    def test_cross_origin_post_is_refused_unread(self):
        for origin in ["http://evil.example", "null", f"http://localhost:{self.srv.port + 1}",
                       f"http://127.0.0.1:{self.srv.port + 1}"]:
            # a "simple" request a page can send without preflight: text/plain
            before = self.srv.health()["requests_completed"]
            status, data, _ = self.ask(self.srv, "POST", CHAT, {"Host": self.own(self.srv), "Origin": origin,
                                                                "Content-Type": "text/plain"},
                                       json.dumps(chat("hi")))
            self.refused(status, data, "origin_not_allowed")
            self.assertEqual(self.srv.health()["requests_completed"], before)  # nothing was generated
        # the preflight of a non-simple request is refused too
        status, data, h = self.ask(self.srv, "OPTIONS", CHAT, {"Host": self.own(self.srv), "Origin": self.CORS,
                                                               "Access-Control-Request-Method": "POST"})
        self.refused(status, data, "origin_not_allowed")
        self.assertNotIn("access-control-allow-origin", h)

    def test_same_origin_and_no_origin_are_answered(self):
        own = self.own(self.srv)
        for headers in [{"Host": own, "Origin": f"http://{own}"}, {"Host": own}]:
            status, data, h = self.ask(self.srv, "POST", CHAT, dict(headers, **{"Content-Type": "application/json"}),
                                       json.dumps(chat("hi")))
            self.assertEqual(status, 200, data[:300])
            self.assertNotIn("access-control-allow-origin", h)  # no CORS headers without --cors
        status, _, h = self.ask(self.srv, "GET", "/", {"Host": own})
        self.assertEqual(status, 200)

    def test_cors_origin_preflight_and_post(self):
        own = self.own(self.cors)
        status, data, h = self.ask(self.cors, "OPTIONS", CHAT, {
            "Host": own, "Origin": self.CORS, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization, x-stainless-os"})
        self.assertEqual(status, 204, data[:300])
        self.assertEqual(h.get("access-control-allow-origin"), self.CORS)
        self.assertIn("POST", h.get("access-control-allow-methods", ""))
        for name in ["authorization", "content-type", "x-stainless-os"]:
            self.assertIn(name, h.get("access-control-allow-headers", ""))
        self.assertEqual(h.get("access-control-max-age"), "600")
        self.assertIn("Origin", h.get("vary", ""))
        status, data, h = self.ask(self.cors, "POST", CHAT, {"Host": own, "Origin": self.CORS,
                                                             "Content-Type": "application/json"},
                                   json.dumps(chat("hi")))
        self.assertEqual(status, 200, data[:300])
        self.assertEqual(h.get("access-control-allow-origin"), self.CORS)
        self.assertIn("Origin", h.get("vary", ""))
        # https://app.example is listed too; another origin is not, and a listed origin does not lift the Host check
        self.assertEqual(self.ask(self.cors, "GET", "/v1/models", {"Host": own, "Origin": "https://app.example"})[0],
                         200)
        self.refused(*self.ask(self.cors, "GET", "/v1/models", {"Host": own, "Origin": "http://localhost:3001"})[:2],
                     "origin_not_allowed")
        self.refused(*self.ask(self.cors, "GET", "/v1/models", {"Host": "evil.example", "Origin": self.CORS})[:2],
                     "host_not_allowed")
        # --allow-host mybox.lan
        self.assertEqual(self.ask(self.cors, "GET", "/v1/models", {"Host": f"mybox.lan:{self.cors.port}"})[0], 200)

    def test_options_and_options(self):
        """Bad option values are refused at start; --cors '*' without a key warns; a non-loopback bind answers any
        Host but still refuses other origins' pages."""
        for args, needle in [(["--cors", "localhost:3000"], "--cors"), (["--allow-host", "a:80"], "--allow-host"),
                             (["--cors", "http://a/b"], "--cors")]:
            p = subprocess.run([PIPIT, "serve", "-m", MODEL, "--port", "0", *args], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(needle, p.stderr)
        srv = Server(PIPIT, MODEL, "--parallel", "1", "--ctx", "128", "--cors", "*", "--host", "0.0.0.0")
        try:
            self.assertIn("warning: --cors * with no API key", srv.output())
            status, data, h = self.ask(srv, "GET", "/v1/models", {"Host": "evil.example", "Origin": "http://x.example"})
            self.assertEqual(status, 200, data[:300])
            self.assertEqual(h.get("access-control-allow-origin"), "http://x.example")
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())


class Load(Guarded):
    """Issue 18's server part: memory after 300 requests, 64 clients against 4 slots, running out of memory."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(PIPIT, MODEL, "--parallel", "4", "--ctx", "256", "--max-body", str(256 * MiB))

    def test_300_requests_keep_memory_flat(self):
        kinds = [lambda i: self.srv.post(CHAT, chat(f"Request {i}: hello", max_tokens=4)),
                 lambda i: self.srv.post("/v1/completions", {"prompt": f"Once {i}", "max_tokens": 4}),
                 lambda i: self.srv.stream(CHAT, chat(f"Stream {i}", max_tokens=4, stream=True))[:1],
                 lambda i: self.srv.post(CHAT, {"messages": [{"role": "user", "content": 5}]}),
                 lambda i: self.srv.post(CHAT, chat("hi", temperature="hot"))]
        for i in range(30):  # warm up: allocator pools, thread stacks, caches
            kinds[i % len(kinds)](i)
        before = rss_mb(self.srv.proc.pid)
        statuses = {}
        for i in range(300):
            st = kinds[i % len(kinds)](i)[0]
            statuses[st] = statuses.get(st, 0) + 1
        after = rss_mb(self.srv.proc.pid)
        print(f"[hostile] 300 requests {statuses}: RSS {before:.1f} -> {after:.1f} MB", file=sys.stderr)
        self.assertEqual(statuses, {200: 180, 400: 120})
        self.assertLess(after - before, 16, f"RSS {before:.1f} -> {after:.1f} MB over 300 requests")

    def test_64_clients_against_4_slots(self):
        results = [None] * 64

        def client(i):
            try:
                status, events, done, _ = self.srv.stream(CHAT, chat(f"Client {i}", max_tokens=6, ignore_eos=True,
                                                                     stream=True, stream_options={"include_usage": True}))
                usage = events[-1].get("usage") if events else None
                results[i] = (status, done, usage["completion_tokens"] if usage else None)
            except OSError as e:
                results[i] = repr(e)

        def run():
            threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
        t0 = time.time()
        self.attack(run, mb=64)
        print(f"[hostile] 64 clients x 6 tokens on 4 slots: {time.time() - t0:.1f} s", file=sys.stderr)
        h = self.srv.health()
        self.assertEqual(results, [(200, True, 6)] * 64, h)
        # A stream's last chunk reaches its client just before the engine frees the slot: give the last slots a
        # moment (a slow, e.g. sanitized, build showed 3 busy right after); a leaked slot stays busy for good.
        deadline = time.time() + 10
        while (h["slots_busy"], h["queued"]) != (0, 0) and time.time() < deadline:
            time.sleep(0.05)
            h = self.srv.health()
        self.assertEqual((h["slots_busy"], h["queued"]), (0, 0), h)

    def test_z_out_of_memory_is_one_error(self):
        """Under an address-space limit, a request whose body cannot be allocated gets one 500 out_of_memory error
        and the server serves on (the limit is lifted afterwards)."""
        import resource
        pid = self.srv.proc.pid
        with open(f"/proc/{pid}/status") as f:
            vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
        soft, hard = resource.prlimit(pid, resource.RLIMIT_AS)
        try:
            resource.prlimit(pid, resource.RLIMIT_AS, (vm + 64 * MiB, hard))
            s = connect_from(self.srv)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n" % (200 * MiB))  # the body buffer is reserved at once
            reply = read_reply(s)
            s.close()
        finally:
            resource.prlimit(pid, resource.RLIMIT_AS, (soft, hard))
        self.assertEqual(status_of(reply), 500, reply[:300])
        err = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]
        self.assertEqual(err["code"], "out_of_memory", err)
        self.assertTrue(self.srv.alive())
        status, body = self.srv.post(CHAT, chat("hi"))
        self.assertEqual(status, 200, body)
        self.assertEqual(self.srv.health()["status"], "ok")

    def test_json_values_are_bounded_before_parsing(self):
        body = b"[" + b"{}," * (1 << 19) + b"{}]"  # 1.5 MB; ~40 MB as a parse tree
        status, data = self.attack(lambda: self.srv.request("POST", CHAT, body)[:2], mb=16)
        self.assertEqual(status, 413, data[:300])
        self.assertIn(b"JSON values", data)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    PIPIT, TESTDATA = sys.argv[1], sys.argv[3]
    MODEL = os.path.join(sys.argv[2], "qwen3_chat")
    VL_MODEL = os.path.join(sys.argv[2], "qwen2_vl_chat")
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:], verbosity=2)

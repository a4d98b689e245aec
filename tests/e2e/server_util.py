"""Helpers for the `pipit serve` end-to-end tests: start the real server on a free loopback port, talk to it over
real HTTP (http.client, and raw sockets for what http.client will not send). Python standard library only."""
import http.client
import json
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest


class Server:
    """`pipit serve -m MODEL --port 0 ARGS...`; the port is read from its "listening on" line. One compute thread:
    ctest runs tests side by side, and a pool of several threads on oversubscribed cores is many times slower."""

    def __init__(self, pipit, model, *args, threads=1):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([pipit, "serve", "-m", model, "--port", "0", "-t", str(threads), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while True:
            m = re.search(r"listening on http://([0-9.]+):(\d+)", self.output())
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"pipit serve exited with {self.proc.returncode}:\n{self.output()}")
            if time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("pipit serve did not start:\n" + self.output())
            time.sleep(0.05)

    def output(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """SIGTERM; returns the exit code (0: a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode

    # ---- HTTP ----
    def connect(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, conn=None):
        """Returns (status, body bytes, response headers)."""
        own = conn is None
        c = conn or self.connect()
        try:
            h = {"Content-Type": "application/json"} if body is not None else {}
            h.update(headers or {})
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, data, dict(r.getheaders())
        finally:
            if own:
                c.close()

    def post(self, path, obj, headers=None):
        """POST JSON; returns (status, parsed body)."""
        status, data, _ = self.request("POST", path, obj, headers)
        return status, json.loads(data)

    def get(self, path, headers=None):
        status, data, _ = self.request("GET", path, None, headers)
        return status, json.loads(data)

    def health(self):
        return self.get("/health")[1]

    def stream(self, path, obj, headers=None):
        """A streaming request read to the end: (status, [events as dicts], saw [DONE], raw lines)."""
        c = self.connect()
        try:
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request("POST", path, body=json.dumps(obj), headers=h)
            r = c.getresponse()
            if r.status != 200:
                return r.status, [json.loads(r.read())], False, []
            events, done, lines = [], False, []
            for raw in r:
                line = raw.decode("utf-8").rstrip("\r\n")
                lines.append(line)
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    continue
                events.append(json.loads(line[6:]))
            return r.status, events, done, lines
        finally:
            c.close()

    def raw(self, data, timeout=10):
        """Sends raw bytes on a fresh socket; returns what comes back before the server closes or goes quiet."""
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            out = b""
            while True:
                try:
                    b = s.recv(65536)
                except socket.timeout:
                    break
                if not b:
                    break
                out += b
            return out
        finally:
            s.close()


def deltas(events):
    """Concatenated text of streamed chat or completion chunks."""
    out = ""
    for ev in events:
        for ch in ev.get("choices", []):
            out += ch.get("delta", {}).get("content") or ch.get("text") or ""
    return out


def finish_reason(events):
    for ev in events:
        for ch in ev.get("choices", []):
            if ch.get("finish_reason"):
                return ch["finish_reason"]
    return None


class ServerCase(unittest.TestCase):
    """A test class sharing one server: its setUpClass sets cls.srv; tearDownClass stops it and fails the class
    when the server did not exit cleanly (printing what it wrote)."""

    @classmethod
    def tearDownClass(cls):
        out = cls.srv.output()
        rc = cls.srv.stop()
        assert rc == 0, f"pipit serve exited with {rc}:\n{out}"

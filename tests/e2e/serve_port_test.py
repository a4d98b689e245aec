#!/usr/bin/env python3
"""A second `pipit serve` on a port one already listens on must fail at once ("address already in use", exit 1),
not start beside it (issue 36: httplib's SO_REUSEPORT let both bind, and requests alternated between two models).
The first server keeps serving.

  serve_port_test.py PIPIT_BINARY TESTDATA [unittest options]
"""
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_util import Server  # noqa: E402

PIPIT = MODEL = None


class PortInUse(unittest.TestCase):
    def test_second_server_on_the_same_port_fails(self):
        first = Server(PIPIT, MODEL)
        try:
            t0 = time.monotonic()
            second = subprocess.run([PIPIT, "serve", "-m", MODEL, "-t", "1", "--host", first.host, "--port",
                                     str(first.port)], capture_output=True, text=True, timeout=20)
            sec = time.monotonic() - t0
            lines = second.stderr.strip().splitlines()
            self.assertEqual(second.returncode, 1, second.stderr)
            self.assertEqual(len(lines), 1, second.stderr)
            self.assertIn("address already in use", lines[0])
            self.assertIn(str(first.port), lines[0])
            self.assertLess(sec, 30)
            status, _, _ = first.request("GET", "/health")
            self.assertEqual(status, 200)
        finally:
            self.assertEqual(first.stop(), 0)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    PIPIT = sys.argv[1]
    MODEL = os.path.join(sys.argv[2], "models", "stories260k")
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)

#!/usr/bin/env python3
"""`pipit run` on a terminal (a pseudo-terminal for stdout and stderr, as a user's shell has): the prefill progress
line shows while a long prompt is read, is cleared when the prompt is in, and never comes back during decode (issue
36: once a run lasted over half a second, every decode step printed "[pipit] prompt 1/1 tokens" on its own line).
Raw mode echoes the prompt after the progress line is gone, so the line cannot overwrite it.

Usage: cli_tty_test.py PIPIT TESTDATA
"""
import json
import os
import pty
import select
import shutil
import signal
import sys
import tempfile
import time

CLEAR = b"\r\x1b[K"
PROGRESS = b"[pipit] prompt "


def long_context_stories(testdata, tmp):
    """stories260k with a context long enough for a prompt that takes a few seconds to read (same weights)."""
    src = os.path.join(testdata, "models", "stories260k")
    d = os.path.join(tmp, "stories")
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("golden*", "original"))
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["max_position_embeddings"] = 1 << 16
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


def run_on_pty(argv, timeout):
    """Runs argv with stdout and stderr on one pseudo-terminal; returns (exit status, bytes the terminal got)."""
    master, slave = pty.openpty()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(slave, 1)
        os.dup2(slave, 2)
        os.execv(argv[0], argv)
    os.close(slave)
    buf, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if not r:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        buf += chunk
    else:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(master)
    return status, buf


def main():
    pipit, testdata = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="pipit_tty_")
    try:
        model = long_context_stories(testdata, tmp)
        prompt = os.path.join(tmp, "prompt.txt")
        with open(prompt, "w") as f:
            f.write("Lily liked to play in the park with her dog. " * 800)  # ~10k tokens: seconds at one thread
        argv = [pipit, "run", "-m", model, "-f", prompt, "-c", "32768", "-n", "200", "--ignore-eos", "--temp", "0",
                "-t", "1"]
        t0 = time.monotonic()
        status, out = run_on_pty(argv, timeout=300)
        sec = time.monotonic() - t0
        tail = out[-400:].decode("utf-8", "replace")
        failures = []
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            failures.append("exit status %r: %r" % (status, tail))
        if PROGRESS not in out:
            failures.append("no progress line during a %.1f s run (the prompt must take over half a second): %r"
                            % (sec, tail))
        clear_at = out.rfind(CLEAR)
        if clear_at < 0:
            failures.append("the progress line was not cleared when the prompt was in")
        elif PROGRESS in out[clear_at:]:
            failures.append("progress printed again after the prompt was in (during decode): %d times"
                            % out[clear_at:].count(PROGRESS))
        lines = [l for l in out.replace(b"\r\n", b"\n").split(b"\n") if PROGRESS in l]
        if len(lines) > 1:
            failures.append("progress on %d terminal lines, expected one line updated in place" % len(lines))
        echo_at = out.find(b"Lily liked to play")
        if clear_at >= 0 and 0 <= echo_at < clear_at:
            failures.append("the prompt was echoed before the progress line, which overwrote it")
        print("  %.1f s, %d bytes on the terminal, %d progress updates" % (sec, len(out), out.count(PROGRESS)))
        for f in failures:
            print("FAIL: " + f)
        return 1 if failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

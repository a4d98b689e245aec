#!/usr/bin/env python3
"""The C code blocks of README.md compile as written, against the public header (issue 36: the C API snippet used
fwrite and puts without <stdio.h>). Each ```c block is compiled alone with -Wall -Werror and implicit declarations
as errors; nothing is linked or run (the snippet opens "model.pipit").

  readme_snippets_test.py CC README.md INCLUDE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile


def main():
    cc, readme, include = sys.argv[1:4]
    with open(readme, encoding="utf-8") as f:
        blocks = re.findall(r"^```c\n(.*?)^```", f.read(), flags=re.S | re.M)
    if not blocks:
        print("FAIL: no ```c block in %s" % readme)
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        for i, code in enumerate(blocks):
            path = os.path.join(d, "snippet%d.c" % i)
            with open(path, "w") as f:
                f.write(code)
            r = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-Werror=implicit-function-declaration",
                                "-fsyntax-only", "-I", include, path], capture_output=True, text=True)
            first = code.strip().splitlines()[0]
            print("  block %d (%s): %s" % (i, first, "ok" if r.returncode == 0 else "FAILED"))
            if r.returncode != 0:
                print(r.stderr)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

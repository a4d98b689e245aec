#!/usr/bin/env python3
"""The model goldens at every CPU ISA level this machine can run, not only the highest one.

The kernel tests compare each level's kernels with the scalar reference op by op; this runs the whole models on
each level (weights packed for it at load, every kernel it picks), so a level whose kernels agree one by one but
combine wrongly in a model (a packing chosen for one level read by another, a threshold per level) fails here.
The suites are tests/isa_golden_filter.txt's: the text, vision, audio and MoE goldens and the quantized-file bounds
in test_models and test_unit. The machine's own top level is what the ordinary ctest run covers; a level above
what the CPU has is skipped (PIPIT_CPU_MAX_ISA can only lower the level, `pipit --version` says which one runs).
scripts/test_arm.sh does the same for neon and dotprod under qemu.

usage: isa_goldens.py PIPIT TEST_MODELS TEST_UNIT FILTER_FILE
"""
import os
import subprocess
import sys
import time

LEVELS = ["scalar", "avx2", "avxvnni", "avx512"]


def level_run(pipit, cap):
    """The kernel level `pipit --version` reports under PIPIT_CPU_MAX_ISA=cap ('ref' is the scalar one)."""
    env = dict(os.environ, PIPIT_CPU_MAX_ISA=cap)
    out = subprocess.run([pipit, "--version"], env=env, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.strip().startswith("kernels:"):
            name = line.split(":", 1)[1].split()[0]
            return "scalar" if name == "ref" else name
    raise SystemExit("pipit --version printed no 'kernels:' line:\n" + out)


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    pipit, test_models, test_unit, filter_file = sys.argv[1:]
    with open(filter_file) as f:
        gtest_filter = f.read().strip()
    top = level_run(pipit, "")
    ran, failed = [], []
    for cap in LEVELS:
        if cap == top:
            break  # the ordinary run covers the top level; nothing above it can run here
        got = level_run(pipit, cap)
        if got != cap:
            print(f"[isa_goldens] {cap}: not on this CPU (runs {got}), skipped")
            continue
        for binary in (test_models, test_unit):
            start = time.time()
            env = dict(os.environ, PIPIT_CPU_MAX_ISA=cap)
            p = subprocess.run([binary, "--gtest_brief=1", "--gtest_filter=" + gtest_filter], env=env,
                               capture_output=True, text=True)
            took = time.time() - start
            summary = [l for l in p.stdout.splitlines() if "PASSED" in l or "FAILED" in l]
            print(f"[isa_goldens] {cap} {os.path.basename(binary)}: {' / '.join(summary) or 'no summary'} "
                  f"({took:.1f} s)")
            if p.returncode != 0:
                failed.append(f"{cap} {os.path.basename(binary)}")
                sys.stdout.write(p.stdout[-6000:] + p.stderr[-2000:])
        ran.append(cap)
    print(f"[isa_goldens] top level {top} (the ordinary run); levels run here: {', '.join(ran) or 'none'}")
    if failed:
        raise SystemExit("[isa_goldens] failed: " + ", ".join(failed))


if __name__ == "__main__":
    main()

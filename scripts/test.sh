#!/usr/bin/env bash
# The test command: builds pipit (Release) and runs every test — x86 natively, then the aarch64 build under
# qemu-aarch64 -cpu max (kernels and model goldens). Test data: PIPIT_TESTDATA (default ../shared/testdata).
set -euo pipefail
cd "$(dirname "$0")/.."
TESTDATA="${PIPIT_TESTDATA:-$(cd .. && pwd)/shared/testdata}"
JOBS="${JOBS:-$(nproc)}"

# the test toolchain (GoogleTest, PyTorch, PoCL, qemu, ...): installs only what is missing, so sudo is asked for only
# then; PIPIT_SKIP_SETUP=1 skips the check
[ "${PIPIT_SKIP_SETUP:-0}" = "1" ] || bash scripts/setup.sh --dev
# tests, benchmarks and Python ON explicitly: a folder first configured by scripts/demo.sh (runtime packages only, so
# they defaulted to OFF) keeps its cached options otherwise
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPIT_TESTDATA="$TESTDATA" -DPIPIT_BUILD_TESTS=ON \
  -DPIPIT_BUILD_BENCH=ON -DPIPIT_WITH_PYTHON=ON
cmake --build build -j "$JOBS"
# stdin from /dev/null: `pipit run` without -p reads a piped stdin, and a harness's open pipe would block it
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900 </dev/null

if [ "${PIPIT_SKIP_ARM:-0}" != "1" ] && [ -x scripts/test_arm.sh ]; then
  PIPIT_TESTDATA="$TESTDATA" bash scripts/test_arm.sh
fi
echo "[test] all tests passed"

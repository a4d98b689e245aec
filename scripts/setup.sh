#!/usr/bin/env bash
# Installs every Debian package pipit's build, tests and benchmarks need. Idempotent: re-running installs nothing new.
# Usage: sudo bash scripts/setup.sh   (or as root)
set -euo pipefail

PKGS=(
  build-essential g++ clang-14 lld-14 libclang-rt-14-dev cmake ninja-build ccache pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev libstb-dev libjpeg62-turbo-dev
  libsndfile1-dev libsoxr-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  g++-aarch64-linux-gnu qemu-user
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd
  python3 python3-dev python3-pybind11 python3-numpy python3-torch python3-pil python3-jinja2 python3-jsonschema python3-av
  openjdk-17-jdk-headless
  curl nodejs chromium
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ((${#missing[@]})); then
  echo "[setup] installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all packages present"
fi
# Debian's arm64 PCRE2 and utf8proc (multiarch) for the aarch64 cross build's tokenizer and C API (scripts/test_arm.sh).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "[setup] adding the arm64 architecture"
  $SUDO dpkg --add-architecture arm64
fi
arm_missing=()
for p in libpcre2-dev:arm64 libutf8proc-dev:arm64; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || arm_missing+=("$p")
done
if ((${#arm_missing[@]})); then
  echo "[setup] installing: ${arm_missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${arm_missing[@]}"
fi
# npm for the Node client and browser tests (tests/e2e/setup_npm.sh). NodeSource's nodejs bundles npm and conflicts
# with Debian's npm package, so install that only when npm is missing.
if ! command -v npm >/dev/null; then
  echo "[setup] installing: npm"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends npm
fi

#!/usr/bin/env bash
# Installs the Debian packages pipit needs. Idempotent: re-running installs nothing new.
# Usage: sudo bash scripts/setup.sh [--python] [--dev]   (or as root; without sudo when everything is present)
#   (no option)  building and running pipit: the compiler, CMake, and the libraries the CLI and libpipit link
#   --python     + the Python package (`pip install .`): pybind11, Python headers, numpy, venv
#   --dev        + everything the tests and benchmarks need (includes --python): GoogleTest, Google Benchmark,
#                PyTorch and friends for reference checks, PoCL, the aarch64 cross compiler + qemu, a JDK, Node,
#                Chromium. CI (.ci/run) and scripts/test.sh use this one.
set -euo pipefail

# What `cmake --build build --target pipit` and `pipit run` / `serve` need. The OpenCL backend needs headers only
# (libOpenCL.so.1 is loaded at run time, from ocl-icd-libopencl1, when `--device opencl` is asked for).
RUNTIME=(
  build-essential g++ cmake ninja-build ccache pkg-config
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libutf8proc-dev libstb-dev libjpeg62-turbo-dev
  libsndfile1-dev libsoxr-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev
  opencl-c-headers libedit-dev
  libjs-marked node-dompurify  # embedded in the chat page: Markdown rendering, and its sanitiser
)
PYTHON=(python3 python3-dev python3-pybind11 python3-numpy python3-venv python3-pip)
DEV=(
  clang-14 lld-14 libclang-rt-14-dev git
  libgtest-dev libgmock-dev libbenchmark-dev
  g++-aarch64-linux-gnu qemu-user
  ocl-icd-opencl-dev pocl-opencl-icd
  python3-torch python3-pil python3-jinja2 python3-jsonschema python3-av
  openjdk-17-jdk-headless
  curl nodejs chromium
)

want_python=0 want_dev=0
for a in "$@"; do
  case "$a" in
    --python) want_python=1 ;;
    --dev | --test) want_python=1 want_dev=1 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "[setup] unknown option '$a' (--python, --dev)" >&2; exit 2 ;;
  esac
done
PKGS=("${RUNTIME[@]}")
((want_python)) && PKGS+=("${PYTHON[@]}")
((want_dev)) && PKGS+=("${DEV[@]}")

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
# apt-get install of the packages of $@ that are not installed yet
install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "[setup] installing: ${missing[*]}"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

install_missing "${PKGS[@]}"
if ((!want_dev)); then
  echo "[setup] runtime packages present$( ((want_python)) && echo " (+ Python)"); for the tests: bash scripts/setup.sh --dev"
  exit 0
fi
# Debian's arm64 PCRE2 and utf8proc (multiarch) for the aarch64 cross build's tokenizer and C API (scripts/test_arm.sh).
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "[setup] adding the arm64 architecture"
  $SUDO dpkg --add-architecture arm64
fi
install_missing libpcre2-dev:arm64 libutf8proc-dev:arm64
# npm for the Node client and browser tests (tests/e2e/setup_npm.sh). NodeSource's nodejs bundles npm and conflicts
# with Debian's npm package, so install that only when npm is missing.
command -v npm >/dev/null || install_missing npm
echo "[setup] runtime, Python and test packages present"

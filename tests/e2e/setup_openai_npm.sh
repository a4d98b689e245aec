#!/usr/bin/env bash
# Test setup: installs the official `openai` npm package (pinned) into PREFIX/node_modules for
# server_openai_test.js. Needs the npm registry once; later runs reuse the install.
#   setup_openai_npm.sh PREFIX
set -euo pipefail
PREFIX="${1:?usage: setup_openai_npm.sh PREFIX}"
VERSION="6.30.1"  # no engines constraint; works on Node 20
if [ -f "$PREFIX/node_modules/openai/package.json" ] &&
   grep -q "\"version\": \"$VERSION\"" "$PREFIX/node_modules/openai/package.json"; then
  echo "[setup_openai_npm] openai $VERSION already in $PREFIX"
  exit 0
fi
command -v npm >/dev/null || { echo "[setup_openai_npm] npm not found (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error "openai@$VERSION"
echo "[setup_openai_npm] installed openai $VERSION in $PREFIX"

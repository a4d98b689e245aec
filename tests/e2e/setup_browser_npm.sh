#!/usr/bin/env bash
# Test setup: installs playwright-core (pinned; no dependencies, no browser download) into PREFIX/node_modules for
# chat_page_test.js, which drives Debian's chromium (/usr/bin/chromium, scripts/setup.sh). Needs the npm registry
# once; later runs reuse the install.
#   setup_browser_npm.sh PREFIX
set -euo pipefail
PREFIX="${1:?usage: setup_browser_npm.sh PREFIX}"
VERSION="1.65.1"
if [ -f "$PREFIX/node_modules/playwright-core/package.json" ] &&
   grep -q "\"version\": \"$VERSION\"" "$PREFIX/node_modules/playwright-core/package.json"; then
  echo "[setup_browser_npm] playwright-core $VERSION already in $PREFIX"
  exit 0
fi
command -v npm >/dev/null || { echo "[setup_browser_npm] npm not found (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$PREFIX"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: the test uses the system chromium; nothing else is fetched
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error \
  "playwright-core@$VERSION"
echo "[setup_browser_npm] installed playwright-core $VERSION in $PREFIX"

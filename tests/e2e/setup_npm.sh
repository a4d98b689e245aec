#!/usr/bin/env bash
# Test setup: installs one pinned npm package into PREFIX/node_modules for a Node end-to-end test (the official
# `openai` client for server_openai_test.js; playwright-core, which drives Debian's /usr/bin/chromium, for
# chat_page_test.js). Needs the npm registry once; later runs reuse the install.
#   setup_npm.sh PREFIX PACKAGE VERSION
set -euo pipefail
PREFIX="${1:?usage: setup_npm.sh PREFIX PACKAGE VERSION}"
PACKAGE="${2:?usage: setup_npm.sh PREFIX PACKAGE VERSION}"
VERSION="${3:?usage: setup_npm.sh PREFIX PACKAGE VERSION}"
if [ -f "$PREFIX/node_modules/$PACKAGE/package.json" ] &&
   grep -q "\"version\": \"$VERSION\"" "$PREFIX/node_modules/$PACKAGE/package.json"; then
  echo "[setup_npm] $PACKAGE $VERSION already in $PREFIX"
  exit 0
fi
command -v npm >/dev/null || { echo "[setup_npm] npm not found (scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$PREFIX"
# PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: the browser test uses the system chromium; nothing else is fetched
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error \
  "$PACKAGE@$VERSION"
echo "[setup_npm] installed $PACKAGE $VERSION in $PREFIX"

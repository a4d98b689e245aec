#!/usr/bin/env bash
# `pip install .` offline: a fresh venv over the system's packages (Debian's numpy), the package built by
# pyproject.toml's backend from an existing build folder, then `import pipit` and a short generation from the venv,
# with nothing of the source tree on the path. Usage: pip_install_test.sh PYTHON SOURCE_DIR BUILD_DIR TESTDATA
set -euo pipefail
python="$1"; src="$2"; build="$3"; testdata="$4"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$python" -m venv --system-site-packages "$tmp/venv"
unset PYTHONPATH
"$tmp/venv/bin/pip" install --no-build-isolation --no-deps --no-index --no-cache-dir --disable-pip-version-check \
  --config-settings build-dir="$build" "$src"
cd "$tmp"
"$tmp/venv/bin/python" - "$tmp/venv" "$testdata/models/stories260k" <<'PY'
import os, sys
import pipit
venv, model = sys.argv[1], sys.argv[2]
assert os.path.realpath(pipit.__file__).startswith(os.path.realpath(venv)), pipit.__file__
print("pipit", pipit.__version__, "from", os.path.dirname(pipit.__file__))
text = pipit.Model(model).generate("Once upon a time", max_tokens=12, temperature=0).text
print(text)
assert "there was a little girl" in text, text
PY

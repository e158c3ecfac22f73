#!/usr/bin/env bash
# Builds the kiln wheel from this checkout (scikit-build-core, the repository's CMake) and
# installs it into a fresh virtual environment, where `import kiln` must work and run a
# program. Needs the C++ dependencies (scripts/install-deps.sh) and the project's Python
# environment (scripts/python-venv.sh) for the build tools. Run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(scripts/python-venv.sh)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" -m build --wheel --no-isolation --outdir "$out/dist" . >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
/usr/bin/python3 -m venv "$out/venv"
"$out/venv/bin/pip" install -q "$out"/dist/kiln-*.whl
cd "$out"
"$out/venv/bin/python" - <<'PY'
import numpy as np, kiln, os
x = np.arange(6, dtype=np.float32)
assert np.from_dlpack(kiln.from_dlpack(x)).ctypes.data == x.ctypes.data
print("wheel:", os.path.basename(os.path.dirname(kiln.__file__)), "imports; a zero-copy round trip works")
PY

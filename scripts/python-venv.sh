#!/usr/bin/env bash
# Makes (once) the Python virtual environment of everything kiln does in Python, from PyPI:
# current PyTorch (the peer of `make bench`, the maker of the .pt2 corpus), NumPy, and what
# builds and tests the `kiln` Python package (nanobind, scikit-build-core, pytest). The C++
# build and `make demo` / `make test` never need it; with it, `make test` also builds and
# tests the Python package. Prints the environment's python. Idempotent and quiet when
# everything is there. Where: $KILN_PYTHON_VENV, default ~/.cache/kiln/py-venv.
set -euo pipefail
venv=${KILN_PYTHON_VENV:-$HOME/.cache/kiln/py-venv}
if "$venv/bin/python" -c "import torch, safetensors, numpy, nanobind, scikit_build_core, pytest" >/dev/null 2>&1; then
  echo "$venv/bin/python"
  exit 0
fi
# Debian's interpreter, its headers (the extension module) and venv support
need=()
for p in python3-dev python3-venv; do
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" == installed ]] || need+=("$p")
done
if ((${#need[@]})); then
  sudo_cmd=()
  if [[ $(id -u) != 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq >&2
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
/usr/bin/python3 -m venv "$venv" >&2
"$venv/bin/pip" install -q --upgrade pip >&2
"$venv/bin/pip" install -q torch safetensors numpy nanobind scikit-build-core pytest build >&2
echo "$venv/bin/python"

#!/usr/bin/env bash
# Makes (once) a Python virtual environment with current PyTorch from PyPI: the peer users
# actually run, for `make bench` (KILN_WITH_TORCH=1) and for remaking the .pt2 corpus
# (tools/pt2/make_corpus.py). Prints the environment's python. Idempotent: when torch
# imports there already, it only prints.
# Where: $KILN_TORCH_VENV, default ~/.cache/kiln/torch-venv.
set -euo pipefail
venv=${KILN_TORCH_VENV:-$HOME/.cache/kiln/torch-venv}
if "$venv/bin/python" -c "import torch, safetensors, numpy" >/dev/null 2>&1; then
  echo "$venv/bin/python"
  exit 0
fi
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  sudo_cmd=()
  if [[ $(id -u) != 0 ]]; then sudo_cmd=(sudo); fi
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-venv >&2
fi
python3 -m venv "$venv" >&2
"$venv/bin/pip" install -q --upgrade pip >&2
"$venv/bin/pip" install -q torch safetensors numpy >&2
echo "$venv/bin/python"

#!/usr/bin/env bash
# Downloads (here, where Debian's apt is reachable) the .deb files that kiln's build
# needs and a GPU machine's image lacks, into .gpu-deps/ (git-ignored). scripts/gpu-check.sh
# unpacks them under /tmp/kiln-root there (never into /). Carry .gpu-deps to the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-deps
cd .gpu-deps
packages=(
  libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
  libopenblas-dev libopenblas0 libopenblas-pthread-dev libopenblas0-pthread libgfortran5
)
apt-get download "${packages[@]}" >/dev/null
du -sh . | sed 's/^/gpu-deps: /'

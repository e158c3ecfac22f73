#!/usr/bin/env bash
# Installs every build, test and benchmark dependency of kiln with apt-get.
# Idempotent: when everything is present it only runs dpkg-query and exits.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ make pkg-config
  libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev ocl-icd-opencl-dev  # f32 GEMM; oneDNN's CMake package asks for OpenCL (only Recommended)
  nlohmann-json3-dev libfmt-dev libcli11-dev
  libminizip-dev  # .pt2 archives (kiln/interop)
  clang libclang-rt-14-dev  # make fuzz: libFuzzer and the sanitizers' runtimes for clang
  clang-format-14  # the format check (ctest: format)
  libopenmpi-dev openmpi-bin  # kiln/distributed's MPI engine and mpirun for its tests
)
# The PyTorch peer (golden files, side-by-side benchmarks) is optional:
# KILN_WITH_TORCH=1 scripts/install-deps.sh adds it.
if [[ "${KILN_WITH_TORCH:-0}" == 1 ]]; then
  packages+=(python3-torch python3-numpy libtorch-dev hyperfine)
fi
# A headless browser for the HTML program viewer's test (tests/tools/html_viewer):
# KILN_WITH_BROWSER=1 adds Debian's chromium; without it that test is skipped, saying so.
if [[ "${KILN_WITH_BROWSER:-0}" == 1 ]]; then
  packages+=(chromium)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) != 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

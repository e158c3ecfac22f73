#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs, built HERE (the default build has the CUDA
# backend for sm_90 whenever nvcc is present), with the shared libraries it needs
# beyond the C/C++ runtime, into .gpu-prebuilt/kiln-gpu.tar.xz (git-ignored, ~25 MB).
# A GPU machine without apt or a fast build then needs only nvidia's driver and
# CUDA's libraries: carry .gpu-prebuilt and run KILN_PREBUILT=1 scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake --build "$BUILD" --target cuda_test fake_test device_test distributed_test dispatch_test autograd_test backend_test kiln_gpu_models kiln_cli
compgen -G "$BUILD/kiln/CMakeFiles/kiln_backend_cuda.dir/*" >/dev/null || { echo "gpu-pack: $BUILD has no CUDA backend"; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{tests,bench,tools/kiln,lib}
cp "$BUILD"/tests/{cuda_test,fake_test,device_test,distributed_test,dispatch_test,autograd_test,backend_test} "$stage/tests/"
# The tests read tests/golden/ by the absolute path of this checkout.
pwd >"$stage/source-dir"
cp "$BUILD"/bench/kiln_gpu_models "$stage/bench/"
cp "$BUILD"/tools/kiln/kiln "$stage/tools/kiln/"
strip "$stage"/tests/* "$stage"/bench/* "$stage"/tools/kiln/kiln
# Every library the binaries load, except the C/C++ runtime (the machine's own is newer).
for bin in "$stage"/tests/* "$stage"/bench/* "$stage"/tools/kiln/kiln; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
mkdir -p .gpu-prebuilt
XZ_OPT=-T0 tar -C "$stage" -cJf .gpu-prebuilt/kiln-gpu.tar.xz .
du -sh .gpu-prebuilt/kiln-gpu.tar.xz | sed 's/^/gpu-pack: /'

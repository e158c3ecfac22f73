#!/usr/bin/env bash
# The GPU check of issue #9, for one H200 in under 10 minutes: builds kiln with CUDA for
# sm_90, runs the CUDA tests (and F6's CUDA leg) and `kiln demo --device cuda:0`, runs
# the model benchmark (kiln eager and exported program vs PyTorch eager on identical
# weights), and prints a table last.
# Results also go to $OUT (or /tmp/kiln-gpu) as gpu.jsonl and tests.log.
#
# On a machine without apt access, either build here and carry the binaries
# (scripts/gpu-pack.sh, then KILN_PREBUILT=1 with .gpu-prebuilt carried: no build there),
# or run scripts/gpu-deps.sh where apt works and carry .gpu-deps along; this script
# unpacks it under /tmp/kiln-root and builds.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-gpu}
BUILD=${BUILD:-build-gpu}
REPS=${REPS:-50}
mkdir -p "$OUT"
log() { echo "gpu-check: $*"; }
CMAKE_EXTRA=()

if [[ "${KILN_PREBUILT:-0}" == 1 ]]; then
  BUILD=/tmp/kiln-prebuilt
  mkdir -p "$BUILD" && tar -C "$BUILD" -xJf .gpu-prebuilt/kiln-gpu.tar.xz || { log "no .gpu-prebuilt/kiln-gpu.tar.xz"; exit 1; }
  # cuBLAS and NCCL are dlopen'ed by soname: the toolkit's folder, or PyTorch's wheels.
  cuda_libs=$(find /usr/local/cuda/ /usr/local/cuda/lib64 /opt /usr/lib /usr/local/lib -maxdepth 9 \
    \( -name 'libcublas.so.1[0-9]*' -o -name 'libnccl.so.2*' \) -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
  src=$(cat "$BUILD/source-dir")  # where the tests look for tests/golden/
  [[ -e "$src" ]] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
  export LD_LIBRARY_PATH=$BUILD/lib${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  log "prebuilt binaries under $BUILD; CUDA libraries from ${cuda_libs:-the default search path}"
elif compgen -G ".gpu-deps/*.deb" >/dev/null; then
  mkdir -p /tmp/kiln-root
  for f in .gpu-deps/*.deb; do dpkg -x "$f" /tmp/kiln-root; done
  # What Debian's alternatives would link: OpenBLAS as the generic libopenblas.so.
  ln -sf openblas-pthread/libopenblas.so /tmp/kiln-root/usr/lib/x86_64-linux-gnu/libopenblas.so
  CMAKE_EXTRA+=(-DKILN_CBLAS_INCLUDE=/tmp/kiln-root/usr/include/x86_64-linux-gnu/openblas-pthread)
  # The carried .debs hold no oneDNN (its CMake package pulls in more): CPU products use
  # OpenBLAS in this build; the GPU paths do not depend on it.
  CMAKE_EXTRA+=(-DKILN_ONEDNN=OFF)
  export CMAKE_PREFIX_PATH=/tmp/kiln-root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export CPATH=/tmp/kiln-root/usr/include:/tmp/kiln-root/usr/include/x86_64-linux-gnu/openblas-pthread${CPATH:+:$CPATH}
  export LIBRARY_PATH=/tmp/kiln-root/usr/lib/x86_64-linux-gnu:/tmp/kiln-root/usr/lib/x86_64-linux-gnu/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  log "using the carried packages under /tmp/kiln-root"
elif command -v apt-get >/dev/null; then
  bash scripts/install-deps.sh || log "could not install dependencies; using what is present"
fi
nvidia-smi -L 2>/dev/null || log "nvidia-smi finds no GPU"

if [[ "${KILN_PREBUILT:-0}" != 1 ]]; then
  log "configure + build ($BUILD, sm_90)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${CMAKE_EXTRA[@]}" >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" --target cuda_test fake_test device_test distributed_test dispatch_test autograd_test backend_test kiln_gpu_models kiln_cli \
    >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1; }
fi

log "tests"
status=0
: >"$OUT/tests.log"
# distributed_test: NCCL on one GPU (a group of this process; MPI-bootstrapped groups
# need mpirun and more GPUs), and the collective ops on cuda tensors.
# dispatch_test and autograd_test: the golden PyTorch cases, every op's strided inputs
# and every op's gradients, replayed on cuda:0.
for t in "cuda_test" "fake_test --gtest_filter=F6*" "device_test" "distributed_test" "backend_test" \
         "dispatch_test --gtest_filter=*Cuda*" "autograd_test --gtest_filter=*Cuda*"; do
  # shellcheck disable=SC2086
  KILN_CPU_DEVICES=4 timeout "${TEST_S:-180}" "$BUILD"/tests/$t --gtest_brief=1 >>"$OUT/tests.log" 2>&1 || { status=1; log "$t: FAILED (exit $?)"; }
done
grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|error" "$OUT/tests.log" | head -40
if nvidia-smi -L >/dev/null 2>&1; then
  log "kiln demo on the GPU (traced for cuda:0 with fake tensors, run on cuda:0)"
  timeout 120 "$BUILD"/tools/kiln/kiln demo --device cuda:0 2>&1 | tee -a "$OUT/tests.log" || status=1
else
  log "no GPU here: the CUDA tests skipped; demo on cuda:0 skipped"
fi

log "model benchmark ($REPS calls each)"
timeout 200 "$BUILD"/bench/kiln_gpu_models "$OUT" "$REPS" | tee "$OUT/gpu.jsonl"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu_peer.py "$OUT" --reps "$REPS" | tee -a "$OUT/gpu.jsonl"
else
  log "no PyTorch with CUDA here: peer skipped"
fi
rm -f "$OUT"/*.safetensors
if nvidia-smi -L >/dev/null 2>&1 && command -v compute-sanitizer >/dev/null; then
  # Out-of-bounds and misaligned accesses in the kernels: every op once (F6's leg), then
  # the golden cases and strided layouts on cuda:0.
  log "compute-sanitizer memcheck on the CUDA legs (report only)"
  : >"$OUT/memcheck.log"
  for t in "fake_test --gtest_filter=F6.Cuda*" "dispatch_test --gtest_filter=*OnCuda"; do
    # shellcheck disable=SC2086
    timeout "${MEMCHECK_S:-180}" compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$BUILD"/tests/$t >>"$OUT/memcheck.log" 2>&1 \
      && log "memcheck $t: clean" || log "memcheck $t: see memcheck.log (exit $?)"
  done
fi

python3 - "$OUT/gpu.jsonl" "$status" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
by = {}
for r in rows:
    if "model" in r:
        by.setdefault(r["model"], {})[r["impl"].split(" ")[0] + " " + r["impl"].split(" ")[-1]] = r
print("\n| model | kiln eager ms | kiln program ms | torch eager ms | eager ratio | program ratio | max |kiln-torch| |")
print("|---|---|---|---|---|---|---|")
for m, r in by.items():
    ke, kp, te = (r.get(k, {}).get("ms") for k in ("kiln eager", "kiln program", "torch eager"))
    diff = r.get("torch eager", {}).get("max_abs_diff_vs_kiln", "n/a")
    ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "n/a"
    print(f"| {m} | {ke} | {kp} | {te} | {ratio(ke, te)} | {ratio(kp, te)} | {diff} |")
if not by:
    print("(no GPU measurements: " + json.dumps(rows) + ")")
print("\ntests:", "PASSED" if sys.argv[2] == "0" else "FAILED (see tests.log)")
PY
exit $status

#!/usr/bin/env bash
# Runs every fuzzer of a KILN_FUZZ build for SECONDS each, seeded with `kiln export` of
# every reference model. A sanitizer report or an exception other than kiln::Error fails.
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-60}
corpus=$build/fuzz-corpus
kiln=$build/tools/kiln/kiln
# Requests past 2 GiB fail (an out_of_memory kiln::Error) instead of tripping the RSS limit.
export KILN_CPU_DEVICES=2 ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=2048:detect_leaks=0

mkdir -p "$corpus"/{program,safetensors,device,run_inputs,pt2,pt2_json}
for spec in "mlp" "gpt --set layers=1" "block" "bn_mlp" "bn_mlp --train"; do
  name=$(echo "$spec" | tr ' =-' '___')
  $kiln export --model $spec --trace-device cuda:0 -o "$corpus/program/$name.kiln" >/dev/null
done
# a program with symbols, guards and symbolic size arguments (format 3, docs/dynamic-shapes.md)
$kiln import tests/pt2/mlp_dynamic.pt2 -o "$corpus/program/mlp_dynamic.kiln" >/dev/null
cp "$corpus"/program/*.kiln "$corpus/safetensors/"
# .pt2 seeds: the small archives of the importer's corpus, and one archive's program JSON
cp tests/pt2/{mlp_bn_train,mlp_bn_train_core,cnn,recurrent,mlp_dynamic,regions,sizes_dynamic}.pt2 "$corpus/pt2/"
KILN_FUZZ_SEED_DIR="$corpus/pt2_json" "$build/tests/fuzz/fuzz_pt2_json" -runs=0 "$corpus/pt2_json" >/dev/null 2>&1
printf 'cpu:0' >"$corpus/device/a"; printf 'cuda:1' >"$corpus/device/b"; printf 'meta' >"$corpus/device/c"
KILN_FUZZ_SEED_DIR="$corpus/run_inputs" "$build/tests/fuzz/fuzz_run_inputs" -runs=0 "$corpus/run_inputs" >/dev/null 2>&1

run() {  # fuzzer corpus
  echo "fuzz: $1 for ${seconds}s"
  mkdir -p "$build/fuzz-artifacts"
  "$build/tests/fuzz/fuzz_$1" -max_total_time="$seconds" -max_len=1048576 -timeout=20 -rss_limit_mb=6144 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$1-" "$corpus/$2" 2>&1 | tail -3
  return "${PIPESTATUS[0]}"
}
run program_bytes program
run program_json program
run safetensors safetensors
run device device
run run_inputs run_inputs
run pt2 pt2
run pt2_json pt2_json
echo "fuzz: every fuzzer ran clean"

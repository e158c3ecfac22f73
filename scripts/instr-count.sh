#!/usr/bin/env bash
# Instructions per call of a tracing workload (bench/instr_count.cpp), counted by
# valgrind: the difference between N+1 calls and 1 call, divided by N. Deterministic
# where wall time on this VM moves by ±30%: use it to compare two builds of the tracing
# path. Usage: scripts/instr-count.sh WORKLOAD ARG [N]   (e.g. make_fx block, chain 512)
set -euo pipefail
BUILD=${BUILD:-build}
BIN="$BUILD/bench/kiln_instr_count"
command -v valgrind >/dev/null || { echo "instr-count: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "instr-count: $BIN is missing; build it: cmake --build $BUILD --target kiln_instr_count" >&2; exit 1; }
n=${3:-100}
count() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$BIN" "$1" "$2" "$3" 2>&1 |
    awk '/I *refs/ { gsub(",", "", $NF); print $NF }'
}
one=$(count "$1" "$2" 1)
many=$(count "$1" "$2" $((n + 1)))
echo "$1 $2: $(( (many - one) / n )) instructions per call"

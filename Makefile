# kiln: the two commands of the README, plus helpers.
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
JOBS ?= $(shell nproc)

.PHONY: deps configure build test demo bench pyenv tsan asan fuzz format clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The demo needs only the library and the command: a first run does not wait for the
# tests, benchmarks and examples.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target kiln_cli
	@$(BUILD)/tools/kiln/kiln demo

# Side by side with PyTorch (KILN_WITH_TORCH=1 installs the peers: Debian's, and current
# PyTorch from PyPI in the project's Python environment); writes docs/benchmarks.md.
bench: pyenv build
	@if [ "$${KILN_WITH_TORCH:-0}" = 1 ]; then sh bench/peers/build.sh >/dev/null; fi
	@python3 bench/run_bench.py --build $(BUILD)
	@if [ "$${KILN_WITH_TORCH:-0}" = 1 ]; then py=$$(bash scripts/python-venv.sh) && \
	  $$py bench/pt2_bench.py --kiln $(BUILD)/tools/kiln/kiln && \
	  PYTHONPATH=$(BUILD)/python $$py bench/python_bench.py --kiln $(BUILD)/tools/kiln/kiln; fi

# The project's Python environment, when KILN_WITH_TORCH=1 asks for the PyPI peers.
pyenv:
	@if [ "$${KILN_WITH_TORCH:-0}" = 1 ]; then bash scripts/python-venv.sh >/dev/null; fi

# ThreadSanitizer build of the stream and device tests and the graph tests (lazy node
# names read by several threads; see docs/architecture.md).
tsan: deps
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF -DKILN_CUDA=OFF -DKILN_BUILD_SHARED=OFF -DKILN_PYTHON=OFF \
	  -DKILN_OPENMP=OFF -DKILN_ONEDNN=OFF -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target device_test ir_test
	@cd build-tsan && KILN_CPU_DEVICES=4 TSAN_OPTIONS=halt_on_error=1 ./tests/device_test
	@cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ./tests/ir_test

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (any report fails).
# Line tables only (-g1): reports keep file and line, and the build (the longest CI step:
# 33 of its 40 minutes on a 2-core Zen 3) writes much less debug information.
# allocator_may_return_null: the out-of-memory tests ask for more than any machine has.
SAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
asan: deps
	@cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF -DKILN_CUDA=OFF -DKILN_BUILD_SHARED=OFF -DKILN_PYTHON=OFF \
	  -DKILN_NATIVE=OFF -DCMAKE_CXX_FLAGS="$(SAN_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(SAN_FLAGS)" \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -E 'install_consumer|extension_example'

# libFuzzer (clang) on the program loader, the program JSON, safetensors, device strings
# and `kiln run --inputs`; FUZZ_SECONDS each (see docs/hardening.md). Also the clang build.
FUZZ_SECONDS ?= 60
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF \
	  -DKILN_BUILD_TESTS=OFF -DKILN_CUDA=OFF -DKILN_NATIVE=OFF -DKILN_FUZZ=ON -DKILN_BUILD_SHARED=OFF -DKILN_PYTHON=OFF \
	  -DKILN_OPENMP=OFF -DKILN_ONEDNN=OFF >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@bash scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

# Rewrites every C++ file in the repository's format (.clang-format; checked by ctest's
# `format` test with the same clang-format 14).
format: deps
	@git ls-files --cached --others --exclude-standard '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format-14 -i

clean:
	@rm -rf $(BUILD) build-tsan build-asan build-fuzz

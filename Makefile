# kiln: the two commands of the README, plus helpers.
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
JOBS ?= $(shell nproc)

.PHONY: deps configure build test demo bench tsan clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@$(BUILD)/tools/kiln/kiln demo

# Side by side with PyTorch (KILN_WITH_TORCH=1 installs the peers); writes docs/benchmarks.md.
bench: build
	@if [ "$${KILN_WITH_TORCH:-0}" = 1 ] && [ -d ../shared/peers ]; then sh ../shared/peers/build.sh >/dev/null; fi
	@python3 bench/run_bench.py --build $(BUILD)

# ThreadSanitizer build of the stream and device tests (see docs/architecture.md).
tsan: deps
	@cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_BUILD_BENCH=OFF -DKILN_CUDA=OFF \
	  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target device_test
	@cd build-tsan && KILN_CPU_DEVICES=4 TSAN_OPTIONS=halt_on_error=1 ./tests/device_test

clean:
	@rm -rf $(BUILD) build-tsan

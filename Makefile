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
	@$(BUILD)/examples/kiln_demo

bench: build
	@$(BUILD)/bench/kiln_bench --benchmark_min_time=0.2

clean:
	@rm -rf $(BUILD)

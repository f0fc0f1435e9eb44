# The two commands: `make demo` and `make test`. Everything else is a convenience.
PRESET ?= dev
JOBS   ?= $(shell nproc)
BUILD  := build/$(PRESET)

.PHONY: all deps configure build test test-asan test-tsan demo bench fuzz soak reliability format deploy-gen clean

all: build

# Installs missing Debian packages when run as root; otherwise says what is missing.
deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --preset $(PRESET) -j $(JOBS) --timeout 300

test-asan:
	$(MAKE) test PRESET=asan

# ThreadSanitizer on our own libraries' tests (tests/CMakeLists.txt NEURON_TSAN_TESTS).
test-tsan: deps
	@test -f build/tsan/build.ninja || cmake --preset tsan >/dev/null
	cmake --build build/tsan -j $(JOBS) --target tsan_tests neuron-sim
	ctest --preset tsan -j $(JOBS) --timeout 600 -L tsan

demo: build
	@scripts/demo.sh $(BUILD)

bench:
	$(MAKE) build PRESET=release
	@bench/run.sh build/release

# Coverage-guided fuzzing with libFuzzer (clang preset `fuzz`), FUZZ_SECONDS per target.
fuzz: deps
	@scripts/fuzz.sh

# The soak (issue 8): faults, pods, kubelet restarts and scrapes for SOAK_SECONDS (default 600).
soak: deps
	@scripts/soak.sh

# docs/RELIABILITY.md from fresh runs of fuzzing, the soak and the sanitizer suites.
reliability: deps
	@scripts/reliability.sh

# Regenerates deploy files that are derived from one source (tests/deploy checks they agree).
deploy-gen:
	@scripts/gen-deploy.sh

format:
	git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build

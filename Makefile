# The two commands: `make demo` and `make test`. Everything else is a convenience.
PRESET ?= dev
JOBS   ?= $(shell nproc)
BUILD  := build/$(PRESET)

.PHONY: all deps configure build binaries build-cost test test-fast test-asan test-tsan demo \
        demo-cluster demo-dra bench fuzz soak \
        reliability check format deploy-gen image clean

all: build

# Installs missing Debian packages when run as root; otherwise says what is missing.
deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only what the demos run (the CMake target `binaries`): no test, fuzz driver or benchmark.
binaries: configure
	cmake --build $(BUILD) -j $(JOBS) --target binaries

# Cluster tests (label `cluster`, tests/CMakeLists.txt) run in the dev build only, not under the
# sanitizers: several simulated nodes with their agents and a job cost minutes there
# (docs/build.md#sanitizers says what the sanitizers still cover of them).
SKIP_LABELS := $(if $(filter asan tsan,$(PRESET)),-LE '^cluster$$',)

test: build
	ctest --preset $(PRESET) -j $(JOBS) --timeout 300 $(SKIP_LABELS)

# The unit tests that are not slow (ctest labels, tests/CMakeLists.txt): under a minute on 2 cores.
test-fast: build
	ctest --preset $(PRESET) -j $(JOBS) --timeout 300 -L '^unit$$' -LE '^slow$$'

test-asan:
	$(MAKE) test PRESET=asan

# ThreadSanitizer on our own libraries' tests (tests/CMakeLists.txt NEURON_TSAN_TESTS).
test-tsan: deps
	@test -f build/tsan/build.ninja || cmake --preset tsan >/dev/null
	cmake --build build/tsan -j $(JOBS) --target tsan_tests neuron-sim
	ctest --preset tsan -j $(JOBS) --timeout 600 -L tsan

# INSTANCE: any type of the catalog (default trn1.32xlarge), e.g. INSTANCE=trn2.48xlarge (LNC=2).
demo: binaries
	@scripts/demo.sh $(BUILD) $(INSTANCE)

# The same story on a simulated two-node cluster, with a real Prometheus over both nodes.
demo-cluster: binaries
	@scripts/demo-cluster.sh $(BUILD)

# The same story with Dynamic Resource Allocation: slice, claim, prepare, train, attribute, taint on
# a fault, release (docs/OPERATIONS.md#dra).
demo-dra: binaries
	@scripts/demo-dra.sh $(BUILD)

# Where the build's time went: step time per room and the slowest units, from .ninja_log
# (scripts/build-cost.py; docs/build.md#build-cost).
build-cost:
	@scripts/build-cost.py $(BUILD)

# Only the benchmark programs and what they run, in a release build (bench/CMakeLists.txt).
bench: deps
	@test -f build/release/build.ninja || cmake --preset release >/dev/null
	cmake --build build/release -j $(JOBS) --target benchmarks
	@bench/run.sh build/release

# Coverage-guided fuzzing with libFuzzer (clang preset `fuzz`), FUZZ_SECONDS per target.
fuzz: deps
	@scripts/fuzz.sh

# The soak (docs/RELIABILITY.md#soak): faults, pods, kubelet restarts and scrapes for SOAK_SECONDS
# (default 600).
soak: deps
	@scripts/soak.sh

# docs/RELIABILITY.md from fresh runs of fuzzing, the soak and the sanitizer suites.
reliability: deps
	@scripts/reliability.sh

# Regenerates deploy files that are derived from one source (tests/deploy checks they agree).
deploy-gen:
	@scripts/gen-deploy.sh

# The container image (deploy/Dockerfile) with docker, podman or buildah, whichever works here,
# tagged IMAGE (default neuron-node-agent:<version>); docs/OPERATIONS.md#image.
image:
	@scripts/image.sh build $(IMAGE)

# What CI checks beside the tests: formatting, and clang-tidy on the last commit's C++ sources
# with the dev build's compile commands (scripts/check.sh).
check:
	$(MAKE) build PRESET=dev
	@scripts/check.sh

format:
	git ls-files '*.c' '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build

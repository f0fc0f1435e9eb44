#!/usr/bin/env bash
# make fuzz: every libFuzzer target for FUZZ_SECONDS (default 60) each, from its committed seed
# corpus; new coverage goes to build/fuzz/corpus/<target> (the committed corpus is left alone:
# copy what matters into tests/fuzz/corpus/). A crash stops the run and leaves crash-* in
# build/fuzz/artifacts/; add it to the target's corpus as a regression and fix the parser.
set -euo pipefail
seconds=${FUZZ_SECONDS:-60}
build=build/fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
mkdir -p "$build/artifacts"
for target in $(sed -n 's/^neuron_fuzz_target(\([a-z_]*\) .*/\1/p' tests/fuzz/CMakeLists.txt); do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  echo "== $target for ${seconds}s"
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target-" "$corpus" "tests/fuzz/corpus/$target" 2>&1 |
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)|ERROR|SUMMARY' || true
done

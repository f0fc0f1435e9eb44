#!/usr/bin/env bash
# make fuzz: every libFuzzer target for FUZZ_SECONDS (default 60) each, from its committed seed
# corpus; new coverage goes to build/fuzz/corpus/<target> (the committed corpus is left alone:
# copy what matters into tests/fuzz/corpus/). A crash ends that target's run and leaves crash-* in
# build/fuzz/artifacts/ (add it to the target's corpus as a regression and fix the parser); the
# other targets still run and the script exits 1 naming every target that found something.
# FUZZ_TARGETS="a b" builds and runs only those targets. Each run prints libFuzzer's
# stat::number_of_executed_units: the executions in FUZZ_SECONDS.
set -euo pipefail
seconds=${FUZZ_SECONDS:-60}
build=build/fuzz
all_targets=$(sed -n 's/^neuron_fuzz_target(\([a-z_]*\) .*/\1/p' tests/fuzz/CMakeLists.txt)
targets=${FUZZ_TARGETS:-$all_targets}
for target in $targets; do
  if ! grep -qx "$target" <<<"$all_targets"; then
    echo "scripts/fuzz.sh: unknown fuzz target '$target' (known: $(echo $all_targets))" >&2
    exit 2
  fi
done
cmake --preset fuzz >/dev/null
# shellcheck disable=SC2086 # one argument per target
cmake --build --preset fuzz --target $targets
mkdir -p "$build/artifacts"
failed=()
for target in $targets; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  echo "== $target for ${seconds}s"
  # A crash ends this target's run; the others still run, and the script then exits 1 naming it.
  status=0
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target-" "$corpus" "tests/fuzz/corpus/$target" \
    >"$build/$target.log" 2>&1 || status=$?
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)|ERROR|SUMMARY' \
    "$build/$target.log" || true
  if [[ $status -ne 0 ]]; then
    echo "== $target FAILED (exit $status): $build/$target.log, artifacts in $build/artifacts/"
    failed+=("$target")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "scripts/fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi

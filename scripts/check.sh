#!/usr/bin/env bash
# The source checks CI runs beside the tests (.ci/run); developers run the same with `make check`.
#   format: clang-format --dry-run -Werror on every tracked C/C++ file (.clang-format);
#   tidy:   clang-tidy with the repository's .clang-tidy, plus readability-function-size with
#           LineThreshold 80 (no function over 80 lines gets in; check_test_bodies measures test
#           bodies, which the check misses), on the C++ sources changed since BASE (default
#           HEAD~1: on CI's clean clone that is the last commit, the only base it has; on a
#           working tree it also takes uncommitted and untracked sources), using the compile
#           commands of build/dev (configure and build the dev preset first: generated headers
#           must exist). Headers are checked through the sources that include them (.clang-tidy's
#           HeaderFilterRegex). Only sources with a compile command go to clang-tidy; a source
#           of a unity batch gets its batch's (scripts/unity-compile-db.py).
# Any finding fails the check.
#
# Usage: scripts/check.sh [all|format|tidy] [BASE]
#   TIDY_BUILD=build/dev  the build directory whose compile_commands.json clang-tidy reads
#   JOBS=$(nproc)         clang-tidy processes at once
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
base=${2:-HEAD~1}
build=${TIDY_BUILD:-build/dev}
jobs=${JOBS:-$(nproc)}

check_format() {
  local files=() f
  # Tracked files still present (a working tree may have deleted some).
  while IFS= read -r f; do
    [ -f "$f" ] && files+=("$f")
  done < <(git ls-files '*.c' '*.h' '*.cc')
  echo "check: clang-format on ${#files[@]} files"
  if ! clang-format --dry-run -Werror "${files[@]}"; then
    echo "check: formatting differs (fix with: make format)" >&2
    return 1
  fi
}

# clang-tidy 14's readability-function-size reports nothing for the bodies of GoogleTest's TEST,
# TEST_F and TEST_P (the function is declared inside GoogleTest's macro, so the finding lands in
# its header, which clang-tidy leaves out as not our code). They are measured here the way the
# check measures a function: closing brace's line minus opening brace's line. clang-format puts
# the macro and the closing brace at column 0.
check_test_bodies() {
  [ $# -eq 0 ] && return 0
  awk -v max=80 '
    FNR == 1 { pending = 0; start = 0 }
    /^(TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\(/ { pending = 1; name = $0 }
    pending && /\{$/ { start = FNR; pending = 0 }
    start && /^}/ {
      if (FNR - start > max) {
        printf "%s:%d: %s is %d lines (over %d)\n", FILENAME, start, name, FNR - start, max
        bad = 1
      }
      start = 0
    }
    END { exit bad }' "$@"
}

check_tidy() {
  if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
    # A --depth 1 clone has no parent commit: there is no change to check, and saying so
    # beats failing a build over the shape of its clone.
    echo "check: clang-tidy skipped: no commit $base to compare with (a --depth 1 clone has none)" >&2
    return 0
  fi
  if [ ! -f "$build/compile_commands.json" ]; then
    echo "check: $build/compile_commands.json is missing: configure and build the dev preset" \
      "first (make build)" >&2
    return 1
  fi
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  # One command per source: the dev preset compiles our libraries in unity batches, whose
  # database entries name the batches (scripts/unity-compile-db.py).
  scripts/unity-compile-db.py "$build" "$tmp/db"
  local db=$tmp/db/compile_commands.json
  # C++ sources changed since $base (committed, uncommitted or untracked), those still present.
  local changed=() with_commands=() f
  mapfile -t changed < <({ git diff --name-only --diff-filter=d "$base" -- '*.cc'
                           git ls-files --others --exclude-standard -- '*.cc'; } | sort -u)
  # The compile database names files by absolute path.
  local top
  top=$(pwd)
  for f in "${changed[@]}"; do
    grep -qF "\"file\": \"$top/$f\"" "$db" && with_commands+=("$f")
  done
  local rc=0
  if ! check_test_bodies "${changed[@]}"; then
    echo "check: test bodies over 80 lines (above)" >&2
    rc=1
  fi
  echo "check: clang-tidy on ${#with_commands[@]} of ${#changed[@]} C++ sources changed since" \
       "$base (those with compile commands in $build)"
  [ ${#with_commands[@]} -eq 0 ] && return $rc

  # The repository's configuration and the function-size limit: --config-file replaces
  # .clang-tidy, so it is a copy of it with the option added; --checks adds the check itself.
  if grep -q '^CheckOptions:' .clang-tidy; then
    sed '/^CheckOptions:/a\  - key: readability-function-size.LineThreshold\n    value: 80' \
      .clang-tidy >"$tmp/config"
  else
    { cat .clang-tidy
      printf 'CheckOptions:\n  - key: readability-function-size.LineThreshold\n    value: 80\n'
    } >"$tmp/config"
  fi
  # One log per file so parallel runs do not interleave; every warning is an error.
  printf '%s\0' "${with_commands[@]}" |
    xargs -0 -P "$jobs" -I{} sh -c '
      log="$1/$(printf "%s" "$2" | tr / _).log"
      clang-tidy -p "$3" --quiet --config-file="$1/config" \
        --checks=readability-function-size --warnings-as-errors="*" "$2" >"$log" 2>&1 ||
        echo "$2" >>"$1/failed"' _ "$tmp" {} "$tmp/db"
  cat "$tmp"/*.log | grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' || true
  if [ -s "$tmp/failed" ]; then
    echo "check: clang-tidy findings in: $(sort "$tmp/failed" | tr '\n' ' ')" >&2
    rc=1
  fi
  return $rc
}

case $what in
  format) check_format ;;
  tidy) check_tidy ;;
  all)
    rc=0
    check_format || rc=1
    check_tidy || rc=1
    exit $rc
    ;;
  *)
    echo "usage: $0 [all|format|tidy] [BASE]" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Refreshes docs/RELIABILITY.md (`make reliability`): runs every reliability check of
# docs/RELIABILITY.md and writes its figures into the document. Durations are settings; the document
# says which were used. Takes about FUZZ_SECONDS x 7 + SOAK_SECONDS + the two sanitizer suites. Each
# step's output stays in build/reliability/; RELIABILITY_REUSE=1 rewrites the document from the
# steps already run there and runs only the missing ones.
#   FUZZ_SECONDS  libFuzzer time per target (default 60)
#   SOAK_SECONDS  soak duration (default 600, the issue's ten minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${FUZZ_SECONDS:-60}
soak_seconds=${SOAK_SECONDS:-600}
out=docs/RELIABILITY.md
work=build/reliability  # each step's output; RELIABILITY_REUSE=1 keeps those already there
mkdir -p "$work"
export TMPDIR=${TMPDIR:-/dev/shm}
step() {  # step NAME COMMAND...: runs COMMAND into $work/NAME.txt, its status into NAME.status
  if [ -n "${RELIABILITY_REUSE:-}" ] && [ -s "$work/$1.status" ]; then return; fi
  echo "reliability: $1"
  "${@:2}" >"$work/$1.txt" 2>&1
  echo $? >"$work/$1.status"
}
step fuzz env FUZZ_SECONDS="$fuzz_seconds" scripts/fuzz.sh
step soak env SOAK_SECONDS="$soak_seconds" SOAK_REPORT="$work/soak-report.txt" scripts/soak.sh
step asan make test PRESET=asan
step tsan make test-tsan
soak_status=$(cat "$work/soak.status") asan_status=$(cat "$work/asan.status")
tsan_status=$(cat "$work/tsan.status")

# Figures out of the outputs.
fuzz_rows=$(awk '
  /^== / { target = $2 }
  /stat::number_of_executed_units/ { execs[target] = $2 }
  /ERROR: libFuzzer|SUMMARY:/ { crash[target] = 1 }
  END { for (t in execs) printf "| `%s` | %s | %s |\n", t, execs[t], (t in crash) ? "crash (see build/fuzz/artifacts)" : "none" }
' "$work/fuzz.txt" | sort)
summary() { grep -E '^(100% tests passed|[0-9]+% tests passed)' "$1" | tail -n 1; }
# ctest keeps every test's output, passed or not, in LastTest.log.
line() { grep -hE "$1" build/asan/Testing/Temporary/LastTest.log 2>/dev/null | tail -n 1; }
restarts=$(line '^100 kubelet restarts:')
scrapers=$(line '^64 scrapers x 30 s:')
smoke=$(grep -cE 'fuzz_smoke\..* Passed' "$work/asan.txt")

{
  cat <<EOF2
# Reliability figures

Written by \`make reliability\` (scripts/reliability.sh) on $(date -u +%Y-%m-%d) on this
machine ($(nproc) cores, shared and noisy): fuzzing ${fuzz_seconds} s per target, a soak of
${soak_seconds} s, the whole suite under ASan+UBSan and our libraries' tests under TSan.
Rerun the command to refresh every number below; nothing here is typed by hand.

<a id="fuzzing"></a>
## Fuzzing (libFuzzer, clang-14, ASan + UBSan)

Every parser of outside input has a target in tests/fuzz/ with a committed seed corpus; every
crash found became a corpus file (a regression replayed by \`make test\`).

| Target | Executions in ${fuzz_seconds} s | Findings in this run |
|---|---|---|
${fuzz_rows}

\`make test\` also replays every corpus and 100,000 mutated inputs per target under gcc (the
\`fuzz_smoke.*\` tests: ${smoke} passed under ASan in this run).

<a id="soak"></a>
## Soak

\`make soak\` (SOAK_SECONDS=${soak_seconds}; exit status ${soak_status}):

\`\`\`
$(cat "$work/soak-report.txt" 2>/dev/null || tail -n 20 "$work/soak.txt")
\`\`\`

<a id="sanitizers"></a>
## Sanitizers

| Suite | Result |
|---|---|
| \`make test PRESET=asan\` (every test, ASan + UBSan) | $(summary "$work/asan.txt") (exit ${asan_status}) |
| \`make test-tsan\` (our libraries' tests, TSan) | $(summary "$work/tsan.txt") (exit ${tsan_status}) |

<a id="restarts-and-load"></a>
## Restarts and load (from the ASan run above)

Under ASan, RSS grows with its quarantine and allocator caches, so these lines show that the
runs completed and what fds and threads did; memory drift is the soak's figure above (a
RelWithDebInfo build), and the same tests bound RSS in the dev build.

- ${restarts:-100 kubelet restarts: not measured in this run}
- ${scrapers:-64 scrapers: not measured in this run}
EOF2
} >"$out"
echo "reliability: wrote $out"
[ "$soak_status" -eq 0 ] && [ "$asan_status" -eq 0 ] && [ "$tsan_status" -eq 0 ]

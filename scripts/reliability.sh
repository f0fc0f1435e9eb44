#!/usr/bin/env bash
# Refreshes docs/RELIABILITY.md (`make reliability`): runs every reliability check of
# docs/RELIABILITY.md and writes its figures into the document. Durations are settings; the document
# says which were used. Takes about FUZZ_SECONDS x 7 + SOAK_SECONDS + the two sanitizer suites
# + 4 minutes of HTTP abuse. Each step's output stays in build/reliability/; RELIABILITY_REUSE=1
# rewrites the document from the steps already run there and runs only the missing ones.
#   FUZZ_SECONDS  libFuzzer time per target (default 60)
#   SOAK_SECONDS  soak duration (default 600: ten minutes)
#   RELIABILITY_SKIP  steps not to run this time, e.g. "tsan" (the document then says so)
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
  if [[ " ${RELIABILITY_SKIP:-} " == *" $1 "* ]]; then
    echo "not run in this refresh (RELIABILITY_SKIP)" >"$work/$1.txt"
    echo skipped >"$work/$1.status"
    return
  fi
  echo "reliability: $1"
  "${@:2}" >"$work/$1.txt" 2>&1
  echo $? >"$work/$1.status"
}
step fuzz env FUZZ_SECONDS="$fuzz_seconds" scripts/fuzz.sh
step soak env SOAK_SECONDS="$soak_seconds" SOAK_REPORT="$work/soak-report.txt" scripts/soak.sh
step churn sh -c 'cmake --build build/dev --target plugin_churn_bench >/dev/null &&
  build/dev/bench/plugin_churn_bench'
step abuse sh -c 'cmake --build build/dev --target http_abuse_bench >/dev/null &&
  build/dev/bench/http_abuse_bench'
step asan make test PRESET=asan
step tsan make test-tsan
soak_status=$(cat "$work/soak.status") asan_status=$(cat "$work/asan.status")
tsan_status=$(cat "$work/tsan.status")

skipped=$(for s in fuzz soak churn abuse asan tsan; do
  [ "$(cat "$work/$s.status" 2>/dev/null)" = skipped ] && printf '%s ' "$s"; done | sed 's/ $//')
# Figures out of the outputs.
fuzz_rows=$(awk '
  /^== / { target = $2 }
  /stat::number_of_executed_units/ { execs[target] = $2 }
  /ERROR: libFuzzer|SUMMARY:/ { crash[target] = 1 }
  END { for (t in execs) printf "| `%s` | %s | %s |\n", t, execs[t], (t in crash) ? "crash (see build/fuzz/artifacts)" : "none" }
' "$work/fuzz.txt" | sort)
summary() {  # ctest's result line, or what the step wrote when it did not run
  local s
  s=$(grep -E '^[0-9]+% tests passed' "$1" | tail -n 1)
  echo "${s:-$(head -n 1 "$1")}"
}
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
${soak_seconds} s, the whole suite under ASan+UBSan and our libraries' tests under TSan${skipped:+
(steps not run in this refresh: ${skipped})}.
Rerun the command to refresh every number below; nothing here is typed by hand.

<a id="fuzzing"></a>
## Fuzzing (libFuzzer, clang-14, ASan + UBSan)

Every parser of outside input has a target in tests/fuzz/ with a committed seed corpus; every
crash found became a corpus file (a regression replayed by \`make test\`).

| Target | Executions in ${fuzz_seconds} s | Findings in this run |
|---|---|---|
${fuzz_rows}

\`make test\` also replays every corpus and 100,000 mutated inputs per target under gcc (10,000
for \`allocate_fuzz\`, whose inputs are operation sequences): the \`fuzz_smoke.*\` tests, ${smoke}
passed under ASan in this run.

<a id="soak"></a>
## Soak

Faults are counted as damage and repairs, each by kind. A workload failure is *expected* only
when a damaging fault, a reset or an unplug touched its devices during its life and its log shows
the status the runtime maps that fault to (tests/soak/soak_record.h); any other failure fails the
soak. The quiet devices (14 and 15) are never faulted, and every workload there must exit 0.
Each invariant names its minimum evidence and fails below it.

\`make soak\` (SOAK_SECONDS=${soak_seconds}; exit status ${soak_status}):

\`\`\`
$(cat "$work/soak-report.txt" 2>/dev/null || tail -n 20 "$work/soak.txt")
\`\`\`

<a id="allocation"></a>
## Allocation under churn

At every arrival of one churn trace on a trn1.32xlarge, three policies are asked what they would
pick from the same free set: ours (core/model/allocator.h), the lowest free IDs, and the
kubelet's own random pick when a plugin gives no preference. So the three percentages share one
denominator, the arrivals at which a contiguous, NeuronLink-connected set was free
(tests/support/alloc_churn.h says why, and what each baseline models). Sizes 1 and a whole node
are met by every policy; the sizes between are where a policy shows. \`build/dev/bench/plugin_churn_bench\`
(also in \`make bench\`; \`allocator_test\` asserts ours is 100 % and at least each baseline on
every row):

\`\`\`
$(cat "$work/churn.txt")
\`\`\`

<a id="abuse"></a>
## The HTTP servers under abuse

Each attack alone, from 127.0.0.1, against the exporter (plain, TLS, basic auth) and
the device plugin on a simulated trn1.2xlarge, while a scraper probes \`/metrics\` and
\`/healthz\` from 127.0.0.2 every 50 ms; the target is at least 99 % of probes answered and a p99
within 50 ms (bench/README.md#http-abuse-bench says what each row measures;
monitor/README.md#connections what the server does). Each quiet row is that server's noise floor
on this shared machine: compare a row under attack with it. \`build/dev/bench/http_abuse_bench\`
(also in \`make bench\`, from the release build), exit status $(cat "$work/abuse.status"):

\`\`\`
$(cat "$work/abuse.txt")
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
ok() { [ "$1" = 0 ] || [ "$1" = skipped ]; }
ok "$soak_status" && ok "$asan_status" && ok "$tsan_status"

#!/usr/bin/env bash
# The benchmark report: every figure quoted in closing notes, from one command (make bench).
# Runs on a release build; trees go to tmpfs when there is one. The machine is shared and
# noisy, so Google Benchmark runs are repeated and reported as medians.
set -euo pipefail
build=${1:-build/release}
reps=${BENCH_REPETITIONS:-9}
export TMPDIR=${TMPDIR:-$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )}
gb_flags=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true
          --benchmark_display_aggregates_only=true)

echo "== core: inventory scan, hot sample, full sweep (trn2.48xlarge)"
"$build/bench/core_bench" "${gb_flags[@]}" --benchmark_filter='median' 2>/dev/null ||
  "$build/bench/core_bench" "${gb_flags[@]}"
echo
echo "== core + exporter: live data through the driver's device ABI, 16 runtimes (trn2.48xlarge)"
"$build/bench/abi_bench"
echo
echo "== core: ctl unplug -> DeviceRemoved event delay (trn2.48xlarge)"
"$build/bench/events_bench" "${gb_flags[@]}"
echo
echo "== runtime: host CPU cost per execution (empty kernel), 1 process and 32 processes"
"$build/bench/runtime_bench"
echo
echo "== top: neuron-ls wall time, neuron-top start-up and CPU at a 1 s refresh"
"$build/bench/top_bench"
echo
echo "== plugin: allocator cost per GetPreferredAllocation answer (half the node in use)"
"$build/bench/plugin_alloc_bench" "${gb_flags[@]}"
echo
echo "== plugin: Allocate/GetPreferredAllocation over the socket, re-registration, health -> ListAndWatch, RSS"
"$build/bench/plugin_bench"
echo
echo "== exporter: scrape latency (full read, shared snapshot), RSS and CPU, beside node_exporter"
"$build/bench/monitor_bench"

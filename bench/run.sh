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

# A Google Benchmark program, its median rows only (the mean, stddev and cv rows are noise on a
# shared machine; its own lines, e.g. events_bench's latencies, stay). It fails when the program
# fails, reports a benchmark error, or prints no median at all (a filter that matches nothing
# exits 0 with an empty table).
gbench() {
  local out rc=0
  out=$("$@" "${gb_flags[@]}") || rc=$?
  grep -v -E '_(mean|stddev|cv) ' <<<"$out" || true
  if [ "$rc" -ne 0 ]; then
    echo "bench/run.sh: $1 exited with $rc" >&2
    return 1
  fi
  if grep -q 'ERROR OCCURRED' <<<"$out" || ! grep -q '_median ' <<<"$out"; then
    echo "bench/run.sh: $1 printed an error or no median" >&2
    return 1
  fi
}

echo "== core: hot sample, full sweep, and a plain open/read/close of the same files (trn2.48xlarge)"
gbench "$build/bench/core_bench"
echo
echo "== core + exporter: live data through the driver's device ABI, 16 runtimes (trn2.48xlarge)"
"$build/bench/abi_bench"
echo
echo "== core: ctl unplug -> DeviceRemoved event delay, and the inventory scan (trn2.48xlarge)"
gbench "$build/bench/events_bench"
echo
echo "== core: the /proc scan that notices runtimes, per scan (N processes x M descriptors)"
gbench "$build/bench/proc_scan_bench"
echo
echo "== runtime: host CPU cost per execution (empty kernel), 1 process and 32 processes"
"$build/bench/runtime_bench"
echo
echo "== runtime: the device model's predictions beside AWS's published figures (trn1.32xlarge)"
"$build/bench/model_validation"
echo
echo "== runtime: all-reduce time, algbw and busbw per size on 1, 2 and 4 simulated trn1.32xlarge (32 ranks each), beside the collective model"
"$build/bench/collective_bench"
echo
echo "== cluster: host CPU and peak RSS per simulated node (driver, kubelet, plugin, exporter, the job's pods), Llama-2-7B on 2 and 4 nodes"
"$build/bench/cluster_cost_bench"
echo
echo "== top: neuron-ls wall time, neuron-top start-up and CPU at a 1 s refresh"
"$build/bench/top_bench"
echo
echo "== plugin: allocator cost per GetPreferredAllocation answer (half the node in use)"
gbench "$build/bench/plugin_alloc_bench"
echo
echo "== plugin: contiguous+connected answers per request size vs the kubelet's random pick and lowest free IDs (churn, trn1.32xlarge)"
"$build/bench/plugin_churn_bench"
echo
echo "== plugin: Allocate/GetPreferredAllocation over the socket, re-registration, health -> ListAndWatch, RSS"
"$build/bench/plugin_bench"
echo
echo "== DRA: the slice publisher's writes over resyncs of an unchanged, tainted pool (trn1.32xlarge)"
"$build/bench/dra_bench"
echo
echo "== exporter: scrape latency (full read, shared snapshot), RSS and CPU, beside node_exporter"
"$build/bench/monitor_bench"
echo
echo "== exporter and plugin HTTP servers under abuse: slow, idle and TLS-trickling clients and wrong passwords from 127.0.0.1, a scraper from 127.0.0.2 (trn1.2xlarge)"
"$build/bench/http_abuse_bench"

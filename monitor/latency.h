#pragma once
// Mean execution latency from the public datastore counters
// (docs/metrics.md#executions-errors-latency): the runtime adds each completed execution's latency
// to LATENCY_TOTAL (submission to completion) and LATENCY_DEVICE (on the device), in µs, and counts
// it in INFER_COMPLETED (docs/driver-interface.md#core-counter-indices; units and accumulation
// unverified on a real runtime). Over a window the mean is the rise of the sum over the rise of the
// count. No distribution can be rebuilt from two sums, so there are no percentiles. Thread-safe
// (pure).

#include <cstdint>
#include <optional>

#include "core/sample/snapshot.h"

namespace neuron::monitor {

struct LatencyMean {
  double total_seconds = 0;   // ΔLATENCY_TOTAL / ΔINFER_COMPLETED
  double device_seconds = 0;  // ΔLATENCY_DEVICE / ΔINFER_COMPLETED
  uint64_t completed = 0;     // ΔINFER_COMPLETED
};

// Over the runtime processes live on `device` in both snapshots (`before` older): absent when
// none completed an execution in between. A process whose counters went down (a torn read, a
// reused slot) is left out.
std::optional<LatencyMean> MeanLatency(const Snapshot& before, const Snapshot& after, int device);

}  // namespace neuron::monitor

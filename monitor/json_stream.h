#pragma once
// `--format=json`: neuron-monitor-shaped JSON documents (docs/metrics.md#json-stream), one per
// line, built from the same ExporterState as /metrics. Per-period figures (utilization, FLOP/s,
// execution counts) are differences between this document's snapshot and the previous
// document's; latency_stats are null (no public source gives percentiles). Not thread-safe: one
// owner (the output loop).

#include <memory>
#include <string>

#include "core/proc/procinfo.h"
#include "monitor/collector.h"
#include "monitor/exporter_state.h"

namespace neuron::monitor {

class JsonStream {
 public:
  JsonStream(ExporterState& source, ExporterOptions options);
  // The next document (no trailing newline).
  std::string Next();

 private:
  ExporterState& source_;
  ExporterOptions options_;
  std::shared_ptr<const Snapshot> previous_;
  std::shared_ptr<const Snapshot> before_previous_;
  std::optional<SystemCpuTimes> cpu_;
};

}  // namespace neuron::monitor

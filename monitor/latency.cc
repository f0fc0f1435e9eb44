#include "monitor/latency.h"

#include "core/sample/process_usage.h"

namespace neuron::monitor {

std::optional<LatencyMean> MeanLatency(const Snapshot& before, const Snapshot& after, int device) {
  uint64_t total_us = 0, device_us = 0, completed = 0;
  for (const DatastoreRecord& now : after.processes) {
    if (now.device != device) continue;
    const DatastoreRecord* was = FindRecord(&before, now.device, now.pid);
    if (was == nullptr) continue;
    uint64_t t = 0, d = 0, c = 0;
    bool down = false;
    for (int slot = 0; slot < nds::kMaxCores && !down; ++slot) {
      for (const int index : {nds::kLatencyTotal, nds::kLatencyDevice, nds::kInferCompleted}) {
        down = down || now.Core(slot, index) < was->Core(slot, index);
      }
      t += now.Core(slot, nds::kLatencyTotal) - was->Core(slot, nds::kLatencyTotal);
      d += now.Core(slot, nds::kLatencyDevice) - was->Core(slot, nds::kLatencyDevice);
      c += now.Core(slot, nds::kInferCompleted) - was->Core(slot, nds::kInferCompleted);
    }
    if (down) continue;
    total_us += t;
    device_us += d;
    completed += c;
  }
  if (completed == 0) return std::nullopt;
  const double n = static_cast<double>(completed);
  return LatencyMean{static_cast<double>(total_us) / n / 1e6,
                     static_cast<double>(device_us) / n / 1e6, completed};
}

}  // namespace neuron::monitor

#pragma once
// nrt_profile_start/stop and nrt_trace_start/stop: engine spans of executions (TensorE, VectorE,
// ScalarE, DMA, Collectives per core) written as Chrome trace JSON (chrome://tracing, Perfetto),
// not NTFF (docs/runtime.md#public-functions). One process track per logical core, one thread track
// per engine.
//
// Thread-safety: thread-safe. Recording costs one relaxed atomic load when nothing is profiled.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "driver-sim/runtime/program.h"

namespace neuron::nrt {

struct Span {
  int vnc = 0;
  int global_core = 0;
  Engine engine = Engine::kTensor;
  std::string name;
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  uint32_t model_id = 0;
};

class Profiler {
 public:
  // model_id 0 traces every model.
  void Start(uint32_t model_id);
  bool active() const { return active_.load(std::memory_order_relaxed); }
  bool Wants(uint32_t model_id) const {
    return active() && (all_.load(std::memory_order_relaxed) ||
                        model_.load(std::memory_order_relaxed) == model_id);
  }
  void Record(std::vector<Span> spans);
  // Writes the spans recorded since Start to `path` and stops. InvalidArgument when not started.
  absl::Status Stop(const std::string& path);

  // The Chrome trace JSON of spans (timestamps in µs relative to the first span).
  static std::string ToJson(const std::vector<Span>& spans);

 private:
  std::atomic<bool> active_{false};
  std::atomic<bool> all_{false};
  std::atomic<uint32_t> model_{0};
  std::mutex mu_;
  std::vector<Span> spans_;
};

}  // namespace neuron::nrt

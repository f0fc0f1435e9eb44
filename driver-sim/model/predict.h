#pragma once
// `neuron-sim predict`: a training job's step time, throughput, MFU and breakdown, from the op
// lists `neuron-sim run` would execute (transformer.h), costed with the runtime's own engine and
// collective models (driver-sim/runtime/engine_model.h, timing.h) without running or sleeping.
// Pipeline parallelism is costed here only: 1F1B with its bubble
// (driver-sim/README.md#training-model). Thread-safe (pure functions).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/model/transformer.h"

namespace neuron::workloads {

struct PredictRequest {
  TrainSpec train;  // cores_per_node 0: every logical core of the instance
  std::string instance = "trn1.32xlarge";
  int global_batch = 0;  // sequences per optimizer step in the whole job
};

// Seconds per optimizer step, by where they go.
struct Breakdown {
  double compute = 0;           // compute- and latency-bound ops, launches
  double memory = 0;            // memory-bound ops (DMA longer than the engine's work)
  double collectives_node = 0;  // NeuronLink phases of collectives, pipeline sends
  double collectives_efa = 0;   // EFA phases of collectives
  double optimizer = 0;         // the optimizer's update (collectives excluded)
  double bubble = 0;            // pipeline fill and drain
};

struct Prediction {
  double step_seconds = 0;
  double seq_per_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;  // (6N + 12·L·s·d)·tokens/s over the job's BF16 peak
  Breakdown breakdown;
  int dp = 0;
  int micro_steps = 0;
  double micro_step_seconds = 0;
  double optimizer_phase_seconds = 0;
  double efa_bytes_per_node = 0;  // sent per optimizer step (and received)
};

absl::StatusOr<Prediction> Predict(const PredictRequest& r);
std::string PredictionText(const PredictRequest& r, const Prediction& p);
std::string PredictionJson(const PredictRequest& r, const Prediction& p);

}  // namespace neuron::workloads

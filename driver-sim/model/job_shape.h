#pragma once
// The job shape `neuron-sim run`, `neuron-sim job run` and `neuron-sim predict` share
// (driver-sim/README.md#training-model): the model's shape, the parallelism, the batch, the
// precision and the optimizer, one flag set registered and read here for the three verbs, so
// that the three cost the same op lists (transformer.h). Each verb keeps its own defaults
// (ShapeDefaults) and its own flags beside these: predict --model, --instance, --cores; run
// --workload, --micro-steps (a shorter run), --scale (time compression). Not thread-safe
// (command-line set-up); the functions are pure.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/model/transformer.h"

namespace CLI {
class App;
}

namespace neuron::workloads {

// What the command line said; unset fields take the verb's defaults.
struct JobShapeFlags {
  // Changes to the model's shape (or, for predict without --model, the whole shape).
  std::optional<int> layers, hidden, heads, kv_heads, ffn, vocab;
  std::optional<int> tp, pp, nodes, seq, micro_batch, global_batch;
  std::optional<std::string> precision;      // bf16 | fp32
  std::optional<std::string> optimizer;      // adamw | lamb
  std::optional<std::string> checkpointing;  // none | selective | selective-mlp | full
  std::optional<std::string> attention;      // flash | plain
  bool zero1 = false;
  bool no_zero1 = false;
  bool sequence_parallel = false;
};

// Registers the shape flags on `cmd` (--tp, --pp, --nodes, --seq, --micro-batch (alias --batch),
// --global-batch, --precision, --optimizer, --zero1, --no-zero1, --sequence-parallel,
// --checkpointing, --attention,
// --layers,
// --hidden, --heads,
// --kv-heads, --ffn, --vocab). `nodes_help` says what --nodes means for the verb.
void AddShapeFlags(CLI::App* cmd, JobShapeFlags* f, const std::string& nodes_help);

// The verb's defaults for what the flags leave unset.
struct ShapeDefaults {
  int tp = 1;
  int nodes = 1;
  int micro_batch = 1;
  bool zero1 = false;
};

// The model `name` (FindModel) with the shape flags applied; with an empty name the flags must
// give the whole shape. InvalidArgument or NotFound names the flag.
absl::StatusOr<ModelShape> ModelOf(std::string_view name, const JobShapeFlags& f);

// The training spec of `model` with the flags and the defaults applied (sequence: decoders
// 4096, encoders 128). cores_per_node, node_rank and scale are the caller's; not validated here
// (Validate, once they are set).
absl::StatusOr<TrainSpec> SpecOf(const ModelShape& model, const JobShapeFlags& f,
                                 const ShapeDefaults& d);

// Gradient-accumulation micro-steps per optimizer step of a global batch of `global_batch`
// sequences: global_batch / (DP x micro-batch), which must be whole.
absl::StatusOr<int> MicroStepsOf(const TrainSpec& s, int global_batch);

// The flags that were given, as arguments for another `neuron-sim run` (job run's pods).
std::vector<std::string> ShapeArgs(const JobShapeFlags& f);

}  // namespace neuron::workloads

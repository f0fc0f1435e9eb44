#include "driver-sim/predict_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "driver-sim/workloads/predict.h"

namespace neuron::sim {
namespace {

struct PredictFlags {
  std::string model;
  std::string instance = "trn1.32xlarge";
  int nodes = 1;
  int cores = 0;
  int tp = 1;
  int pp = 1;
  int seq = 0;
  int micro_batch = 1;
  int global_batch = 0;
  std::string precision = "bf16";
  std::string optimizer = "adamw";
  bool zero1 = false;
  bool json = false;
  // A shape of one's own, or changes to --model's.
  std::optional<int> layers, hidden, heads, kv_heads, ffn, vocab;
};

int Fail(const absl::Status& status) {
  const std::string message(status.message());
  std::fprintf(stderr, "neuron-sim predict: %s\nRun with --help for more information.\n",
               message.c_str());
  return 2;
}
int Fail(const char* message) { return Fail(absl::InvalidArgumentError(message)); }

// The model: --model's shape with the shape flags applied, or the flags alone.
absl::StatusOr<workloads::ModelShape> ShapeOf(const PredictFlags& f) {
  workloads::ModelShape m;
  if (!f.model.empty()) {
    absl::StatusOr<workloads::ModelShape> known = workloads::FindModel(f.model);
    if (!known.ok()) return known.status();
    m = *known;
  } else {
    if (!f.layers || !f.hidden || !f.heads || !f.ffn || !f.vocab) {
      return absl::InvalidArgumentError(
          "give --model, or the whole shape: --layers --hidden --heads --ffn --vocab "
          "[--kv-heads]");
    }
    m.name = "custom";
  }
  if (f.layers) m.layers = *f.layers;
  if (f.hidden) m.hidden = *f.hidden;
  if (f.heads) m.heads = *f.heads;
  m.kv_heads = f.kv_heads ? *f.kv_heads : (f.model.empty() || f.heads ? m.heads : m.kv_heads);
  if (f.ffn) m.ffn = *f.ffn;
  if (f.vocab) m.vocab = *f.vocab;
  return m;
}

int RunPredict(const PredictFlags& f) {
  absl::StatusOr<workloads::ModelShape> shape = ShapeOf(f);
  if (!shape.ok()) return Fail(shape.status());
  workloads::PredictRequest r;
  r.instance = f.instance;
  r.global_batch = f.global_batch;
  workloads::TrainSpec& s = r.train;
  s.model = *shape;
  s.seq = f.seq > 0 ? f.seq : (s.model.causal ? 4096 : 128);
  s.micro_batch = f.micro_batch;
  s.tp = f.tp;
  s.pp = f.pp;
  s.nodes = f.nodes;
  s.cores_per_node = f.cores;
  s.zero1 = f.zero1;
  if (f.precision != "bf16" && f.precision != "fp32") return Fail("--precision: bf16 or fp32");
  s.precision = f.precision == "bf16" ? workloads::Precision::kBf16 : workloads::Precision::kFp32;
  if (f.optimizer != "adamw" && f.optimizer != "lamb") return Fail("--optimizer: adamw or lamb");
  s.optimizer = f.optimizer == "adamw" ? workloads::Optimizer::kAdamW : workloads::Optimizer::kLamb;
  absl::StatusOr<workloads::Prediction> p = workloads::Predict(r);
  if (!p.ok()) return Fail(p.status());
  const std::string text =
      f.json ? workloads::PredictionJson(r, *p) : workloads::PredictionText(r, *p);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddPredictCommand(CLI::App& app) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "predict a training job's step time, throughput and MFU without running it, from the op "
      "lists `neuron-sim run` executes and the runtime's timing model");
  cmd->add_option("--model", f->model,
                  fmt::format("model: {}", fmt::join(workloads::ModelNames(), ", ")));
  cmd->add_option("--instance", f->instance, "instance type (trn1.32xlarge)");
  cmd->add_option("--nodes", f->nodes, "nodes in the job (1)");
  cmd->add_option("--cores", f->cores,
                  "ranks per node, one per logical core (0: every logical core of the instance)");
  cmd->add_option("--tp", f->tp, "tensor-parallel degree (1)");
  cmd->add_option("--pp", f->pp, "pipeline-parallel degree, 1F1B schedule (1)");
  cmd->add_option("--seq", f->seq, "sequence length (decoders 4096, encoders 128)");
  cmd->add_option("--micro-batch", f->micro_batch, "sequences per micro-batch per replica (1)");
  cmd->add_option("--global-batch", f->global_batch, "sequences per optimizer step")->required();
  cmd->add_option("--precision", f->precision, "bf16 (FP32 master weights) or fp32 (bf16)");
  cmd->add_option("--optimizer", f->optimizer, "adamw or lamb (adamw)");
  cmd->add_flag("--zero1", f->zero1, "shard the optimizer over the data-parallel ranks");
  cmd->add_flag("--json", f->json, "print one JSON object");
  cmd->add_option("--layers", f->layers, "shape: transformer layers");
  cmd->add_option("--hidden", f->hidden, "shape: hidden size");
  cmd->add_option("--heads", f->heads, "shape: attention heads");
  cmd->add_option("--kv-heads", f->kv_heads, "shape: key/value heads (= heads)");
  cmd->add_option("--ffn", f->ffn, "shape: FFN width");
  cmd->add_option("--vocab", f->vocab, "shape: vocabulary");
  return {cmd, [f]() { return RunPredict(*f); }};
}

}  // namespace neuron::sim

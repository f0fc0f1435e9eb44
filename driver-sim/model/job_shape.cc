#include "driver-sim/model/job_shape.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <span>
#include <string_view>

namespace neuron::workloads {

namespace {

// The whole-number shape flags, each written once: registered by AddShapeFlags and given back to
// each pod's `run` by ShapeArgs. A null help is --nodes, whose meaning is the verb's.
struct IntFlag {
  const char* names;  // CLI11's: the first is the one ShapeArgs writes
  std::optional<int> JobShapeFlags::*field;
  const char* help;
};
constexpr IntFlag kParallelFlags[] = {
    {"--tp", &JobShapeFlags::tp, "tensor-parallel degree, inside a node"},
    {"--pp", &JobShapeFlags::pp,
     "pipeline-parallel degree, 1F1B; a replica's stages may span nodes (1)"},
    {"--nodes", &JobShapeFlags::nodes, nullptr},
    {"--seq", &JobShapeFlags::seq, "sequence length (decoders 4096, encoders 128)"},
    {"--micro-batch,--batch", &JobShapeFlags::micro_batch, "sequences per micro-batch per replica"},
    {"--global-batch", &JobShapeFlags::global_batch,
     "sequences per optimizer step in the whole job: DP x micro-batch x micro-steps"},
};
constexpr IntFlag kModelFlags[] = {
    {"--layers", &JobShapeFlags::layers, "shape: transformer layers"},
    {"--hidden", &JobShapeFlags::hidden, "shape: hidden size"},
    {"--heads", &JobShapeFlags::heads, "shape: attention heads"},
    {"--kv-heads", &JobShapeFlags::kv_heads, "shape: key/value heads (= heads)"},
    {"--ffn", &JobShapeFlags::ffn, "shape: FFN width"},
    {"--vocab", &JobShapeFlags::vocab, "shape: vocabulary"},
};

void AddIntFlags(CLI::App* cmd, JobShapeFlags* f, std::span<const IntFlag> flags,
                 const std::string& nodes_help) {
  for (const IntFlag& flag : flags) {
    cmd->add_option(flag.names, f->*flag.field, flag.help ? flag.help : nodes_help);
  }
}

void AppendIntArgs(const JobShapeFlags& f, std::span<const IntFlag> flags,
                   std::vector<std::string>* a) {
  for (const IntFlag& flag : flags) {
    const std::optional<int>& v = f.*flag.field;
    const std::string_view names = flag.names;
    if (v) a->insert(a->end(), {std::string(names.substr(0, names.find(','))), std::to_string(*v)});
  }
}

// --checkpointing's value, or InvalidArgument.
absl::StatusOr<Checkpointing> CheckpointingOf(std::string_view name) {
  if (name == "none") return Checkpointing::kNone;
  if (name == "selective") return Checkpointing::kSelective;
  if (name == "selective-mlp") return Checkpointing::kSelectiveMlp;
  if (name == "full") return Checkpointing::kFull;
  return absl::InvalidArgumentError(
      fmt::format("--checkpointing \"{}\": none, selective, selective-mlp or full", name));
}

}  // namespace

void AddShapeFlags(CLI::App* cmd, JobShapeFlags* f, const std::string& nodes_help) {
  AddIntFlags(cmd, f, kParallelFlags, nodes_help);
  cmd->add_option("--precision", f->precision, "bf16 (FP32 master weights) or fp32 (bf16)");
  cmd->add_option("--optimizer", f->optimizer, "adamw or lamb (adamw)");
  cmd->add_flag("--zero1", f->zero1, "shard the optimizer over the data-parallel ranks");
  cmd->add_flag("--no-zero1", f->no_zero1, "do not shard the optimizer (run's decoders do)");
  cmd->add_flag("--sequence-parallel", f->sequence_parallel,
                "with --tp: norms, dropout and residuals on seq/TP tokens, each TP all-reduce a "
                "reduce-scatter and an all-gather");
  cmd->add_option("--checkpointing", f->checkpointing,
                  "what the backward recomputes: none, selective (the attention core), "
                  "selective-mlp (and the MLP block) or full (each layer's forward) (selective)");
  cmd->add_option("--attention", f->attention,
                  "flash ([s, s] tiles in SBUF) or plain ([s, s] scores in HBM) (flash)");
  AddIntFlags(cmd, f, kModelFlags, nodes_help);
}

absl::StatusOr<ModelShape> ModelOf(std::string_view name, const JobShapeFlags& f) {
  ModelShape m;
  if (!name.empty()) {
    absl::StatusOr<ModelShape> known = FindModel(name);
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
  // New heads without new kv-heads: multi-head attention, as for a shape of one's own.
  m.kv_heads = f.kv_heads ? *f.kv_heads : (name.empty() || f.heads ? m.heads : m.kv_heads);
  if (f.ffn) m.ffn = *f.ffn;
  if (f.vocab) m.vocab = *f.vocab;
  return m;
}

absl::StatusOr<TrainSpec> SpecOf(const ModelShape& model, const JobShapeFlags& f,
                                 const ShapeDefaults& d) {
  TrainSpec s;
  s.model = model;
  s.seq = f.seq.value_or(model.causal ? 4096 : 128);
  s.micro_batch = f.micro_batch.value_or(d.micro_batch);
  s.tp = f.tp.value_or(d.tp);
  s.pp = f.pp.value_or(1);
  s.nodes = f.nodes.value_or(d.nodes);
  if (f.zero1 && f.no_zero1) return absl::InvalidArgumentError("--zero1 or --no-zero1, not both");
  s.zero1 = f.zero1 || (d.zero1 && !f.no_zero1);
  s.sequence_parallel = f.sequence_parallel;
  const std::string precision = f.precision.value_or("bf16");
  if (precision != "bf16" && precision != "fp32") {
    return absl::InvalidArgumentError("--precision: bf16 or fp32");
  }
  s.precision = precision == "bf16" ? Precision::kBf16 : Precision::kFp32;
  const std::string optimizer = f.optimizer.value_or("adamw");
  if (optimizer != "adamw" && optimizer != "lamb") {
    return absl::InvalidArgumentError("--optimizer: adamw or lamb");
  }
  s.optimizer = optimizer == "adamw" ? Optimizer::kAdamW : Optimizer::kLamb;
  absl::StatusOr<Checkpointing> checkpointing =
      CheckpointingOf(f.checkpointing.value_or("selective"));
  if (!checkpointing.ok()) return checkpointing.status();
  s.checkpointing = *checkpointing;
  const std::string attention = f.attention.value_or("flash");
  if (attention != "flash" && attention != "plain") {
    return absl::InvalidArgumentError("--attention: flash or plain");
  }
  s.attention = attention == "flash" ? Attention::kFlash : Attention::kPlain;
  return s;
}

absl::StatusOr<int> MicroStepsOf(const TrainSpec& s, int global_batch) {
  const int per_step = s.dp() * s.micro_batch;
  if (per_step < 1 || global_batch < per_step || global_batch % per_step != 0) {
    return absl::InvalidArgumentError(
        fmt::format("--global-batch {} must be a multiple of DP {} x micro-batch {} = {}",
                    global_batch, s.dp(), s.micro_batch, per_step));
  }
  return global_batch / per_step;
}

std::vector<std::string> ShapeArgs(const JobShapeFlags& f) {
  std::vector<std::string> a;
  AppendIntArgs(f, kParallelFlags, &a);
  AppendIntArgs(f, kModelFlags, &a);
  if (f.precision) a.insert(a.end(), {"--precision", *f.precision});
  if (f.optimizer) a.insert(a.end(), {"--optimizer", *f.optimizer});
  if (f.checkpointing) a.insert(a.end(), {"--checkpointing", *f.checkpointing});
  if (f.attention) a.insert(a.end(), {"--attention", *f.attention});
  if (f.zero1) a.emplace_back("--zero1");
  if (f.no_zero1) a.emplace_back("--no-zero1");
  if (f.sequence_parallel) a.emplace_back("--sequence-parallel");
  return a;
}

}  // namespace neuron::workloads

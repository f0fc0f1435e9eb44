// The training workloads: a transformer training step generated from the model's architecture
// (transformer.h) for llama2-7b, llama2-13b, llama3.1-8b, gpt3-6.7b and bert-large, run on every
// visible core through libnrt-sim. Decoders run as the published Llama-2-7B job does (TP groups of
// --tp, ZeRO-1 over the data-parallel ranks here and on --nodes nodes, micro-batch 1, --micro-steps
// accumulation micro-steps, then the optimizer phase); bert-large is data parallel with micro-batch
// --batch and an optimizer phase every --accum micro-steps. No time constant: each op's time comes
// from the runtime's engine and collective models (driver-sim/README.md#training-model).

#include <fmt/format.h>

#include <cmath>

#include "driver-sim/workloads/transformer.h"
#include "driver-sim/workloads/workload_runner.h"

namespace neuron::workloads {
namespace {

std::string StepOf(int step, int steps) {
  return steps > 0 ? fmt::format("{}/{}", step, steps) : fmt::format("{}", step);
}

class Training : public Workload {
 public:
  Training(const WorkloadOptions& o, ModelShape model) : o_(o), encoder_(!model.causal) {
    spec_.model = std::move(model);
  }

  absl::Status Configure(const RunInfo& info) override {
    info_ = info;
    const std::string& name = spec_.model.name;
    spec_.seq = o_.seq > 0 ? o_.seq : (encoder_ ? 128 : 4096);
    spec_.tp = encoder_ ? 1 : o_.tp;
    // BERT's single process runs alone; as a node of a multi-process job its data-parallel
    // groups span every node.
    spec_.node_rank = o_.node_rank;
    spec_.nodes = encoder_ && o_.node_rank < 0 ? 1 : o_.nodes;
    spec_.micro_batch = encoder_ ? o_.batch : 1;
    spec_.cores_per_node = static_cast<int>(info.cores);
    spec_.zero1 = !encoder_;  // the published decoder jobs shard the optimizer (ZeRO-1)
    spec_.scale = o_.scale;
    accum_ = encoder_ ? o_.accum : o_.micro_steps;
    if (accum_ < 1 || spec_.tp < 1 || spec_.nodes < 1 || spec_.micro_batch < 1 || !(o_.scale > 0)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: --tp, --micro-steps, --accum, --batch and --nodes must be >= 1 and --scale > 0",
          name));
    }
    if (info.cores % static_cast<uint32_t>(spec_.tp) != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "{} runs tensor-parallel groups of {} cores, and this process has {} visible core{}; "
          "give it a multiple of {} (NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES) or change "
          "--tp",
          name, spec_.tp, info.cores, info.cores == 1 ? "" : "s", spec_.tp));
    }
    if (spec_.nodes > 1 && !info.has_efa) {
      return absl::InvalidArgumentError(fmt::format(
          "{} with --nodes {} reduces gradients over EFA, and this {} node has no EFA; pass "
          "--nodes 1",
          name, spec_.nodes, info.instance));
    }
    if (absl::Status s = Validate(spec_); !s.ok()) {
      const std::string why(s.message());
      return absl::InvalidArgumentError(fmt::format("{}: {}", name, why));
    }
    ops_ = BuildStepOps(spec_, 0);
    return absl::OkStatus();
  }

  std::string Banner() const override {
    return fmt::format(
               "{}: {} cores here, TP {} x DP {} ({} on this node, {} node{}), seq {}, micro-batch "
               "{}, "
               "{} micro-steps per optimizer step{}, scale {}; sequences per optimizer step: {} "
               "here, "
               "{} in the job",
               spec_.model.name, info_.cores, spec_.tp, spec_.dp(), spec_.dp_local(), spec_.nodes,
               spec_.nodes == 1 ? "" : "s", spec_.seq, spec_.micro_batch, accum_,
               spec_.zero1 ? ", ZeRO-1" : "", spec_.scale, SeqPerStep(),
               SeqPerStep() * spec_.nodes) +
           Placement();
  }

  int Phases() const override { return encoder_ ? 1 : accum_ + 1; }

  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, 1 << 20); !s.ok()) return s;
    const std::string& name = spec_.model.name;
    const auto world = static_cast<uint32_t>(spec_.world());
    absl::StatusOr<nrt_model_t*> micro =
        LoadOpList(core, ops_.micro_step, name + " micro-step", spec_.tp > 1 ? world : 0);
    if (!micro.ok()) return micro.status();
    absl::StatusOr<nrt_model_t*> opt =
        LoadOpList(core, ops_.optimizer, name + " optimizer step", spec_.dp() > 1 ? world : 0);
    return opt.ok() ? absl::OkStatus() : opt.status();
  }

  void Step(CoreContext& core, int step, int phase) override {
    const bool optimizer = encoder_ ? false : phase == accum_;
    if (!optimizer) {
      if (std::optional<double> t = Execute(core, core.models[0], "micro-step")) {
        core.kernel_seconds.push_back(*t);
        core.units += spec_.micro_batch;
      }
      if (!encoder_ || step % accum_ != 0) return;
    }
    if (std::optional<double> t = Execute(core, core.models[1], "optimizer step")) {
      core.sync_seconds += *t;
    }
  }

  std::string Estimate(const CoreContext& core) const override {
    const double micro = EstimateSeconds(core.models[0]);
    const double opt = EstimateSeconds(core.models[1]);
    const double step = micro * accum_ + opt;
    const double seqs = static_cast<double>(SeqPerStep());
    const double tokens = seqs * spec_.seq;
    return fmt::format(
        "micro-step {:.4f} s  optimizer phase {:.3f} s  step {:.3f} s  seq/s {:.1f} per core, "
        "{:.1f} (this node)  tokens/s {:.0f} {}",
        micro, opt, step, step > 0 ? seqs / step / info_.cores * spec_.tp : 0.0,
        step > 0 ? seqs / step : 0.0, step > 0 ? tokens / step : 0.0,
        JobFigure(step > 0 ? tokens / step : 0.0));
  }

  std::string Report(int step, int steps, double seconds,
                     std::span<const CoreContext> cores) override {
    std::vector<double> micro;
    double sync = 0;
    double seqs = 0;
    for (const CoreContext& c : cores) {
      micro.insert(micro.end(), c.kernel_seconds.begin(), c.kernel_seconds.end());
      sync = std::max(sync, c.sync_seconds);
      seqs += c.units;
    }
    seqs /= spec_.tp;  // a TP group works on one sequence
    const double per_core = seqs / std::max<size_t>(cores.size(), 1) / seconds * spec_.tp;
    std::string line = fmt::format(
        "step {}  step_time {:.3f} s  seq/s {:.1f} ({:.1f} per core)  tokens/s {:.0f} {}  "
        "micro-step {:.3f} s",
        StepOf(step, steps), seconds, seqs / seconds, per_core, seqs * spec_.seq / seconds,
        JobFigure(seqs * spec_.seq / seconds), Median(micro));
    if (sync > 0) line += fmt::format("  optimizer phase {:.3f} s", sync);
    return line;
  }

 private:
  // After the node's tokens/s: the job's, the other nodes modelled as this one; a node of a
  // multi-process job says which it is, its launcher summing the nodes' figures.
  std::string JobFigure(double node_tokens) const {
    if (spec_.multi_process()) return fmt::format("(node {} of {})", spec_.node_rank, spec_.nodes);
    return fmt::format("(this node), {:.0f} (job of {} node{})", node_tokens * spec_.nodes,
                       spec_.nodes, spec_.nodes == 1 ? "" : "s");
  }
  std::string Placement() const {
    if (!spec_.multi_process()) return "";
    return fmt::format("; node {} of {}: world ranks {}-{} of {}", spec_.node_rank, spec_.nodes,
                       spec_.rank_base(), spec_.rank_base() + spec_.cores_per_node - 1,
                       spec_.world());
  }

  uint64_t SeqPerStep() const {
    return static_cast<uint64_t>(spec_.dp_local()) * static_cast<uint64_t>(accum_) *
           static_cast<uint64_t>(spec_.micro_batch);
  }

  WorkloadOptions o_;
  bool encoder_;
  TrainSpec spec_;
  RunInfo info_;
  StepOps ops_;
  int accum_ = 1;
};

}  // namespace

std::unique_ptr<Workload> MakeTraining(const WorkloadOptions& o) {
  absl::StatusOr<ModelShape> m = FindModel(o.name);
  if (!m.ok()) return nullptr;
  return std::make_unique<Training>(o, *std::move(m));
}

}  // namespace neuron::workloads

// The training workloads: a transformer training step generated from the model's architecture
// (transformer.h) for llama2-7b, llama2-13b, llama3.1-8b, gpt3-6.7b and bert-large, run on every
// visible core through libnrt-sim, in the job shape `neuron-sim predict` takes (job_shape.h).
// By default decoders run as the published Llama-2-7B job does (TP 8, ZeRO-1 over the
// data-parallel ranks here and on 2 nodes, micro-batch 1, 32 accumulation micro-steps, then the
// optimizer phase); bert-large is data parallel with micro-batch 16 and an optimizer phase every
// 32 micro-steps. With --pp each core runs its stage's lists. No time constant: each op's time
// comes from the runtime's engine and collective models (driver-sim/README.md#training-model).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "driver-sim/model/job_shape.h"
#include "driver-sim/model/parallel.h"
#include "driver-sim/model/transformer.h"
#include "driver-sim/workloads/workload_runner.h"

namespace neuron::workloads {
namespace {

std::string StepOf(int step, int steps) {
  return steps > 0 ? fmt::format("{}/{}", step, steps) : fmt::format("{}", step);
}

class Training : public Workload {
 public:
  Training(const WorkloadOptions& o, bool encoder) : o_(o), encoder_(encoder) {}

  absl::Status Configure(const RunInfo& info) override {
    info_ = info;
    if (absl::Status s = Shape(info); !s.ok()) return s;
    const std::string& name = spec_.model.name;
    if (accum_ < 1 || spec_.tp < 1 || spec_.pp < 1 || spec_.nodes < 1 || spec_.micro_batch < 1 ||
        !(o_.scale > 0)) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: --tp, --pp, --micro-steps, --accum, --batch and --nodes must be >= 1 and --scale "
          "> 0",
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
    return Micro();
  }

  std::string Banner() const override {
    const auto [first, last] = LocalStages();
    const std::string pipeline =
        spec_.pp > 1 ? fmt::format(", PP {} (stages {}-{} here)", spec_.pp, first, last) : "";
    return fmt::format(
               "{}: {} cores here, TP {} x DP {} ({} on this node, {} node{}){}, seq {}, "
               "micro-batch {}, {} {}{}; global batch {} ({} micro-steps per optimizer step); "
               "running {} micro-steps per optimizer step, scale {}; sequences per optimizer "
               "step: {} here, {} in the job",
               spec_.model.name, info_.cores, spec_.tp, spec_.dp(), spec_.dp_local(), spec_.nodes,
               spec_.nodes == 1 ? "" : "s", pipeline, spec_.seq, spec_.micro_batch,
               spec_.precision == Precision::kBf16 ? "bf16" : "fp32",
               spec_.optimizer == Optimizer::kAdamW ? "AdamW" : "LAMB",
               spec_.zero1 ? ", ZeRO-1" : "", global_batch_, shape_micro_steps_, accum_,
               spec_.scale, SeqPerStep(), SeqPerStep() * spec_.nodes) +
           Placement();
  }

  int Phases() const override { return encoder_ ? 1 : accum_ + 1; }

  // Each core loads its stage's lists (parallel.h places the rank); the exchanges with stages on
  // other nodes are modelled inside them.
  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, 1 << 20); !s.ok()) return s;
    const std::string& name = spec_.model.name;
    const auto world = static_cast<uint32_t>(spec_.world());
    const int stage = PlaceRank(spec_, static_cast<int>(core.rank)).stage;
    const StepOps& ops = ops_[static_cast<size_t>(stage)];
    absl::StatusOr<nrt_model_t*> micro = LoadOpList(core, ops.micro_step, name + " micro-step",
                                                    spec_.tp > 1 || spec_.pp > 1 ? world : 0);
    if (!micro.ok()) return micro.status();
    absl::StatusOr<nrt_model_t*> opt =
        LoadOpList(core, ops.optimizer, name + " optimizer step", spec_.dp() > 1 ? world : 0);
    if (!opt.ok()) return opt.status();
    // The slowest stage here sets the pace (Estimate).
    const std::lock_guard<std::mutex> lock(estimate_mu_);
    slowest_micro_ = std::max(slowest_micro_, EstimateSeconds(*micro));
    slowest_opt_ = std::max(slowest_opt_, EstimateSeconds(*opt));
    return absl::OkStatus();
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

  // As predict costs the job: the slowest stage's micro-step (accum + PP - 1) times, 1F1B's fill
  // and drain included, then the optimizer phase.
  std::string Estimate(const CoreContext& /*core*/) const override {
    const std::lock_guard<std::mutex> lock(estimate_mu_);
    const double micro = slowest_micro_;
    const double step = micro * (accum_ + spec_.pp - 1) + slowest_opt_;
    const double seqs = SeqPerStep();
    const double tokens = seqs * spec_.seq;
    const std::string bubble =
        spec_.pp > 1 ? fmt::format("  bubble {:.3f} s", micro * (spec_.pp - 1)) : "";
    return fmt::format(
        "micro-step {:.4f} s  optimizer phase {:.3f} s{}  step {:.3f} s  seq/s {:.1f} per core, "
        "{:.1f} (this node)  tokens/s {:.0f} {}",
        micro, slowest_opt_, bubble, step, step > 0 ? seqs / step / info_.cores * Width() : 0.0,
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
    seqs /= Width();  // a replica's TP x PP ranks work on one micro-batch
    const double per_core = seqs / std::max<size_t>(cores.size(), 1) / seconds * Width();
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

  int Width() const { return spec_.tp * spec_.pp; }
  // Sequences this node's ranks complete per optimizer step (a fraction of a replica's when the
  // replica spans nodes).
  double SeqPerStep() const {
    return static_cast<double>(spec_.cores_per_node) / Width() * accum_ * spec_.micro_batch;
  }
  // The stages this node's ranks hold.
  std::pair<int, int> LocalStages() const {
    const int first = spec_.rank_base();
    const int last = first + spec_.cores_per_node - 1;
    if (spec_.cores_per_node >= Width()) return {0, spec_.pp - 1};
    return {PlaceRank(spec_, first).stage, PlaceRank(spec_, last).stage};
  }

  // The job's shape from the flags (job_shape.h) with the workload's defaults.
  absl::Status Shape(const RunInfo& info) {
    const ShapeDefaults d =
        encoder_ ? ShapeDefaults{1, 1, 16, false} : ShapeDefaults{8, 2, 1, true};
    absl::StatusOr<ModelShape> model = ModelOf(o_.name, o_.shape);
    if (!model.ok()) return absl::InvalidArgumentError(model.status().message());
    absl::StatusOr<TrainSpec> spec = SpecOf(*model, o_.shape, d);
    if (!spec.ok()) return spec.status();
    spec_ = *std::move(spec);
    spec_.node_rank = o_.node_rank;
    spec_.cores_per_node = static_cast<int>(info.cores);
    spec_.scale = o_.scale;
    return absl::OkStatus();
  }
  // The shape's micro-steps and global batch, the run's micro-steps, and each local stage's lists.
  absl::Status Micro() {
    shape_micro_steps_ = o_.micro_steps.value_or(32);
    if (o_.shape.global_batch) {
      absl::StatusOr<int> k = MicroStepsOf(spec_, *o_.shape.global_batch);
      if (!k.ok()) return k.status();
      shape_micro_steps_ = *k;
    }
    accum_ = o_.micro_steps.value_or(shape_micro_steps_);
    global_batch_ = spec_.dp() * spec_.micro_batch * shape_micro_steps_;
    ops_.assign(static_cast<size_t>(spec_.pp), StepOps{});
    const auto [first, last] = LocalStages();
    for (int stage = first; stage <= last; ++stage) {
      ops_[static_cast<size_t>(stage)] = BuildStepOps(spec_, stage);
    }
    return absl::OkStatus();
  }

  WorkloadOptions o_;
  bool encoder_;
  TrainSpec spec_;
  RunInfo info_;
  std::vector<StepOps> ops_;   // by stage; filled for the stages this node holds
  int accum_ = 1;              // micro-steps run per optimizer step
  int shape_micro_steps_ = 1;  // the shape's: global batch / (DP x micro-batch)
  int global_batch_ = 0;
  mutable std::mutex estimate_mu_;
  double slowest_micro_ = 0;  // the models' estimates, seconds
  double slowest_opt_ = 0;
};

}  // namespace

std::unique_ptr<Workload> MakeTraining(const WorkloadOptions& o) {
  absl::StatusOr<ModelShape> m = FindModel(o.name);
  if (!m.ok()) return nullptr;
  return std::make_unique<Training>(o, !m->causal);
}

}  // namespace neuron::workloads

// The two training workloads of docs/runtime.md#calibration-workloads: Llama-2-7B as AI-on-EKS
// trains it (TP groups of 8, gradient accumulation, a data-parallel gradient all-reduce over EFA
// with the peers on other nodes) and BERT-Large phase 1 (data parallel on every core).
// driver-sim/README.md#workloads explains every constant; the calibration targets are
// those of docs/runtime.md#calibration-workloads.

#include <fmt/format.h>

#include <cmath>

#include "driver-sim/workloads/job.h"

namespace neuron::workloads {
namespace {

// The NeuronCore-v2 roofline the fillers are calibrated against (docs/hardware.md#roofline): HBM
// bandwidth per core 410 GiB/s at η_m 0.8.
constexpr double kHbmBytesPerSecond = 410.0 * 1024 * 1024 * 1024 * 0.8;
constexpr double kGiB = 1024.0 * 1024 * 1024;

std::string Groups(const std::vector<std::vector<uint32_t>>& groups) {
  std::vector<std::string> parts;
  for (const auto& g : groups) parts.push_back(fmt::format("[{}]", fmt::join(g, ",")));
  return fmt::format("[{}]", fmt::join(parts, ","));
}

std::string StepOf(int step, int steps) {
  return steps > 0 ? fmt::format("{}/{}", step, steps) : fmt::format("{}", step);
}

uint64_t Bytes(double b) { return static_cast<uint64_t>(std::max(b, 0.0)); }

// ---------------------------------------------------------------------------------------------
// Llama-2-7B (docs/runtime.md#calibration-workloads; docs/hardware.md#llama-targets)

constexpr double kLlamaParams = 6.74e9;
constexpr int kLlamaLayers = 32;
constexpr double kLlamaHidden = 4096;
constexpr int kLlamaSeq = 4096;
// Non-matmul work of one micro-step per rank at seq 4096, TP 8 (norms, softmax, activations,
// rotary embeddings, dropout and their HBM traffic), as VectorE memory traffic: 0.30 s at the
// roofline above, which with 0.304 s of matmuls and the TP all-reduces gives a micro-step of
// about 0.68 s (target 0.63-0.79 s at 31-32 % MFU).
constexpr double kLlamaFillerSeconds = 0.30;
// AdamW touches about 28 bytes per parameter (fp32 master weight, m, v read and written, bf16
// gradient read and weights written).
constexpr double kAdamBytesPerParam = 28;

class Llama2 : public Workload {
 public:
  explicit Llama2(const WorkloadOptions& o) : o_(o) {
    if (o_.seq <= 0) o_.seq = kLlamaSeq;
  }

  absl::Status Configure(const JobInfo& info) override {
    info_ = info;
    if (o_.tp < 1 || o_.micro_steps < 1 || o_.nodes < 1 || !(o_.scale > 0)) {
      return absl::InvalidArgumentError(
          "llama2-7b: --tp, --micro-steps and --nodes must be >= 1 and --scale > 0");
    }
    if (info.cores % static_cast<uint32_t>(o_.tp) != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "llama2-7b runs tensor-parallel groups of {} cores, and this process has {} visible "
          "core{}; give it a multiple of {} (NEURON_RT_VISIBLE_CORES or NEURON_RT_NUM_CORES) or "
          "change --tp",
          o_.tp, info.cores, info.cores == 1 ? "" : "s", o_.tp));
    }
    if (o_.nodes > 1 && !info.has_efa) {
      return absl::InvalidArgumentError(fmt::format(
          "llama2-7b with --nodes {} all-reduces gradients over EFA, and this {} node has no "
          "EFA; pass --nodes 1",
          o_.nodes, info.instance));
    }
    dp_local_ = info.cores / static_cast<uint32_t>(o_.tp);
    return absl::OkStatus();
  }

  std::string Banner() const override {
    return fmt::format(
        "llama2-7b: {} cores here, TP {} x DP {} ({} on this node, {} node{}), seq {}, "
        "micro-batch 1, {} micro-steps per optimizer step, scale {}; tokens per optimizer step: "
        "{} here, {} in the job",
        info_.cores, o_.tp, dp_local_ * static_cast<uint32_t>(o_.nodes), dp_local_, o_.nodes,
        o_.nodes == 1 ? "" : "s", o_.seq, o_.micro_steps, o_.scale, TokensPerStep(),
        TokensPerStep() * o_.nodes);
  }

  int Phases() const override { return o_.micro_steps + 1; }

  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, 1 << 20); !s.ok()) return s;
    absl::StatusOr<nrt_model_t*> micro =
        LoadOpList(core, MicroStepOps(), "llama2-7b micro-step", info_.cores);
    if (!micro.ok()) return micro.status();
    absl::StatusOr<nrt_model_t*> opt =
        LoadOpList(core, OptimizerOps(), "llama2-7b optimizer step", info_.cores);
    return opt.ok() ? absl::OkStatus() : opt.status();
  }

  void Step(CoreContext& core, int, int phase) override {
    if (phase < o_.micro_steps) {
      if (std::optional<double> t = Execute(core, core.models[0], "micro-step")) {
        core.kernel_seconds.push_back(*t);
        core.units += o_.seq;
      }
    } else if (std::optional<double> t = Execute(core, core.models[1], "optimizer step")) {
      core.sync_seconds += *t;
    }
  }

  std::string Estimate(const CoreContext& core) const override {
    const double micro = EstimateSeconds(core.models[0]);
    const double opt = EstimateSeconds(core.models[1]);
    const double step = micro * o_.micro_steps + opt;
    const double tokens = static_cast<double>(TokensPerStep());
    return fmt::format(
        "micro-step {:.3f} s  gradient all-reduce + AdamW {:.3f} s  step {:.2f} s  tokens/s "
        "{:.0f} (this node), {:.0f} (job of {} node{})",
        micro, opt, step, step > 0 ? tokens / step : 0.0, step > 0 ? tokens * o_.nodes / step : 0.0,
        o_.nodes, o_.nodes == 1 ? "" : "s");
  }
  std::string Report(int step, int steps, double seconds,
                     std::span<const CoreContext> cores) override {
    std::vector<double> micro;
    double sync = 0;
    for (const CoreContext& c : cores) {
      micro.insert(micro.end(), c.kernel_seconds.begin(), c.kernel_seconds.end());
      sync = std::max(sync, c.sync_seconds);
    }
    const double tokens = static_cast<double>(TokensPerStep());
    return fmt::format(
        "step {}  step_time {:.2f} s  tokens/s {:.0f} (this node), {:.0f} (job of {} node{})  "
        "micro-step {:.3f} s  gradient all-reduce + AdamW {:.3f} s",
        StepOf(step, steps), seconds, tokens / seconds, tokens * o_.nodes / seconds, o_.nodes,
        o_.nodes == 1 ? "" : "s", Median(micro), sync);
  }

 private:
  uint64_t TokensPerStep() const {
    return static_cast<uint64_t>(dp_local_) * static_cast<uint64_t>(o_.micro_steps) *
           static_cast<uint64_t>(o_.seq);
  }
  // Work per rank relative to the recipe (seq 4096, TP 8), and the model share per rank.
  double TokenScale() const { return o_.scale * o_.seq / kLlamaSeq * 8.0 / o_.tp; }
  double ParamsPerRank() const { return kLlamaParams / o_.tp * o_.scale; }

  std::string MicroStepOps() const {
    // 6N + 12·L·s·d FLOP per token (docs/runtime.md#calibration-workloads: 46.9 GFLOP at s = 4096),
    // the rank's 1/TP.
    const double per_token = 6 * kLlamaParams + 12.0 * kLlamaLayers * o_.seq * kLlamaHidden;
    const double flops = per_token * o_.seq / o_.tp * o_.scale / kLlamaLayers;
    // Each layer's weights are read three times (forward, backward data, backward weights).
    const double weights = 3 * 2 * ParamsPerRank() / kLlamaLayers;
    const double filler = kLlamaFillerSeconds * kHbmBytesPerSecond * TokenScale() / kLlamaLayers;
    // Megatron layout: 4 all-reduces of s x d x 2 bytes per layer within the TP group.
    const double tp_bytes = o_.seq * kLlamaHidden * 2 * o_.scale;
    std::vector<std::vector<uint32_t>> tp_groups(info_.cores / static_cast<uint32_t>(o_.tp));
    for (uint32_t r = 0; r < info_.cores; ++r) tp_groups[r / o_.tp].push_back(r);
    const std::string tp_op = o_.tp > 1 ? fmt::format(
                                              R"(,
    {{"op": "allreduce", "name": "tp_allreduce", "count": 4, "bytes": {}, "groups": {}}})",
                                              Bytes(tp_bytes), Groups(tp_groups))
                                        : "";
    return fmt::format(R"({{"version": 1,
 "memory": {{"code": 33554432, "constants": {}, "scratchpad": {}}},
 "ops": [{{"op": "repeat", "count": {}, "ops": [
    {{"op": "tensor", "name": "layer_matmuls", "flops": {:.6e}, "bytes": {}, "dtype": "bfloat16"}},
    {{"op": "vector", "name": "layer_elementwise", "flops": 0, "bytes": {}}}{}]}}]}})",
                       Bytes(2 * ParamsPerRank()), Bytes(std::max(2 * kGiB * o_.scale, 1048576.0)),
                       kLlamaLayers, flops, Bytes(weights), Bytes(filler), tp_op);
  }

  std::string OptimizerOps() const {
    const uint32_t dp = dp_local_ * static_cast<uint32_t>(o_.nodes);
    std::string ops;
    if (dp > 1) {
      // Each TP rank all-reduces its bf16 gradient shard with the same rank of every DP replica,
      // here and (modelled) on the other nodes, so the ring crosses EFA.
      std::vector<std::vector<uint32_t>> dp_groups(static_cast<size_t>(o_.tp));
      for (uint32_t r = 0; r < info_.cores; ++r) dp_groups[r % o_.tp].push_back(r);
      ops = fmt::format(
          R"({{"op": "allreduce", "name": "dp_gradient_allreduce", "bytes": {}, "groups": {}, "nodes": {}}},
    )",
          Bytes(2 * ParamsPerRank()), Groups(dp_groups), o_.nodes);
    }
    return fmt::format(R"({{"version": 1,
 "memory": {{"misc": {}}},
 "ops": [{}{{"op": "vector", "name": "adamw", "flops": 0, "bytes": {}}}]}})",
                       Bytes(12 * ParamsPerRank()), ops,
                       Bytes(kAdamBytesPerParam * ParamsPerRank()));
  }

  WorkloadOptions o_;
  JobInfo info_;
  uint32_t dp_local_ = 1;
};

// ---------------------------------------------------------------------------------------------
// BERT-Large phase 1 (docs/runtime.md#calibration-workloads; docs/hardware.md#calibration-points
// row 4)

constexpr double kBertParams = 335e6;
constexpr int kBertSeq = 128;
// 3,826.6 seq/s on 32 cores with micro-batch 16 and 32 accumulation steps (Neuron 2.28) is
// 119.6 seq/s per core: 0.134 s per 16 sequences. The micro-step is modelled as its matmuls
// (6·N·s FLOP per sequence, about 257 GFLOP) plus non-matmul work sized so that a micro-step
// takes 0.133 s and an optimizer step (32 of them, the gradient all-reduce and AdamW) about
// 4.28 s on NeuronCore-v2.
constexpr double kBertMicroStepSeconds = 0.133;
constexpr double kBertLaunchSeconds = 60e-6;
constexpr double kBertMatmulSeconds16 = 16 * 6 * kBertParams * kBertSeq / (91.75e12 * 0.86);

class Bert : public Workload {
 public:
  explicit Bert(const WorkloadOptions& o) : o_(o) {
    if (o_.seq <= 0) o_.seq = kBertSeq;
  }

  absl::Status Configure(const JobInfo& info) override {
    info_ = info;
    if (o_.batch < 1 || o_.accum < 1 || !(o_.scale > 0)) {
      return absl::InvalidArgumentError(
          "bert-large: --batch and --accum must be >= 1, --scale > 0");
    }
    return absl::OkStatus();
  }
  std::string Banner() const override {
    return fmt::format(
        "bert-large: data parallel on {} core{}, micro-batch {}, seq {}, gradient all-reduce "
        "every {} micro-steps, scale {}; published: 119.6 seq/s per core",
        info_.cores, info_.cores == 1 ? "" : "s", o_.batch, o_.seq, o_.accum, o_.scale);
  }
  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, 1 << 20); !s.ok()) return s;
    const double work = o_.scale * o_.batch / 16.0 * o_.seq / kBertSeq;
    const double flops = 6 * kBertParams * o_.seq * o_.batch * o_.scale;
    const double filler =
        (kBertMicroStepSeconds - kBertLaunchSeconds - kBertMatmulSeconds16) * kHbmBytesPerSecond;
    const std::string micro =
        fmt::format(R"({{"version": 1,
 "memory": {{"code": 16777216, "constants": {}, "scratchpad": {}}},
 "ops": [{{"op": "tensor", "name": "matmuls", "flops": {:.6e}, "bytes": {}, "dtype": "bfloat16"}},
         {{"op": "vector", "name": "elementwise", "flops": 0, "bytes": {}}}]}})",
                    Bytes(2 * kBertParams * o_.scale), Bytes(std::max(kGiB * o_.scale, 1048576.0)),
                    flops, Bytes(3 * 2 * kBertParams * o_.scale), Bytes(filler * work));
    absl::StatusOr<nrt_model_t*> m = LoadOpList(core, micro, "bert-large micro-step");
    if (!m.ok()) return m.status();
    const std::string allreduce =
        info_.cores > 1
            ? fmt::format(R"({{"op": "allreduce", "name": "gradient_allreduce", "bytes": {}}},
         )",
                          Bytes(2 * kBertParams * o_.scale))
            : "";
    const std::string opt = fmt::format(R"({{"version": 1,
 "memory": {{"misc": {}}},
 "ops": [{}{{"op": "vector", "name": "adamw", "flops": 0, "bytes": {}}}]}})",
                                        Bytes(12 * kBertParams * o_.scale), allreduce,
                                        Bytes(kAdamBytesPerParam * kBertParams * o_.scale));
    absl::StatusOr<nrt_model_t*> o =
        LoadOpList(core, opt, "bert-large optimizer step", info_.cores > 1 ? info_.cores : 0);
    return o.ok() ? absl::OkStatus() : o.status();
  }
  void Step(CoreContext& core, int step, int) override {
    const std::optional<double> t = Execute(core, core.models[0], "micro-step");
    if (!t) return;
    core.kernel_seconds.push_back(*t);
    core.units += o_.batch;
    if (step % o_.accum != 0) return;
    if (std::optional<double> s = Execute(core, core.models[1], "optimizer step")) {
      core.sync_seconds += *s;
    }
  }
  std::string Estimate(const CoreContext& core) const override {
    const double micro = EstimateSeconds(core.models[0]);
    const double opt = EstimateSeconds(core.models[1]);
    const double step = micro * o_.accum + opt;
    return fmt::format(
        "step {:.4f} s  seq/s {:.1f} per core  optimizer step ({} micro-steps, gradient "
        "all-reduce + AdamW {:.3f} s) {:.2f} s, {:.1f} seq/s per core",
        micro, micro > 0 ? o_.batch / micro : 0.0, o_.accum, opt, step,
        step > 0 ? o_.batch * o_.accum / step : 0.0);
  }
  std::string Report(int step, int steps, double seconds,
                     std::span<const CoreContext> cores) override {
    double seqs = 0, sync = 0;
    for (const CoreContext& c : cores) {
      seqs += c.units;
      sync = std::max(sync, c.sync_seconds);
    }
    const double per_core = seqs / std::max<size_t>(cores.size(), 1) / seconds;
    std::string line = fmt::format("step {}  step_time {:.3f} s  seq/s {:.1f} ({:.1f} per core)",
                                   StepOf(step, steps), seconds, seqs / seconds, per_core);
    if (sync > 0)
      line += fmt::format("  optimizer step: gradient all-reduce + AdamW {:.3f} s", sync);
    return line;
  }

 private:
  WorkloadOptions o_;
  JobInfo info_;
};

}  // namespace

std::unique_ptr<Workload> MakeLlama2(const WorkloadOptions& o) {
  return std::make_unique<Llama2>(o);
}
std::unique_ptr<Workload> MakeBert(const WorkloadOptions& o) { return std::make_unique<Bert>(o); }

}  // namespace neuron::workloads

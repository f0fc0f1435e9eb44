// matmul: the calibration GEMM of docs/hardware.md#calibration-points row 1 on every core, and
// `empty`, kernels that do nothing, for the runtime's own cost per execution.

#include <fmt/format.h>

#include "driver-sim/workloads/workload_runner.h"

namespace neuron::workloads {
namespace {

// BF16 [4096,8192] x [8192,8192]: F = 2·m·k·n = 549.76 GFLOP (docs/hardware.md#calibration-points).
constexpr double kMatmulFlops = 2.0 * 4096 * 8192 * 8192;
// A, B and C in HBM: (4096·8192 + 8192·8192 + 4096·8192) x 2 bytes.
constexpr uint64_t kMatmulOperandBytes = (4096ull * 8192 + 8192ull * 8192 + 4096ull * 8192) * 2;

constexpr const char* kMatmulOps = R"({{"version": 1,
 "memory": {{"code": 1048576, "scratchpad": {}}},
 "ops": [{{"op": "matmul", "name": "gemm_bf16_4096x8192x8192",
           "m": 4096, "k": 8192, "n": 8192, "dtype": "bfloat16"}}]}})";

class Matmul : public Workload {
 public:
  explicit Matmul(const WorkloadOptions& o) : kernels_(o.kernels > 0 ? o.kernels : 10) {}

  absl::Status Configure(const RunInfo& info) override {
    cores_ = info.cores;
    return absl::OkStatus();
  }
  std::string Banner() const override {
    return fmt::format(
        "matmul: BF16 [4096,8192] x [8192,8192] (549.76 GFLOP) on {} core{}, {} kernels per core "
        "per step; published: 6.97 ms on one NeuronCore-v2",
        cores_, cores_ == 1 ? "" : "s", kernels_);
  }
  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, 1 << 20); !s.ok()) return s;
    absl::StatusOr<nrt_model_t*> m =
        LoadOpList(core, fmt::format(kMatmulOps, kMatmulOperandBytes), "matmul");
    return m.ok() ? absl::OkStatus() : m.status();
  }
  void Step(CoreContext& core, int, int) override {
    for (int i = 0; i < kernels_; ++i) {
      const std::optional<double> t = Execute(core, core.models.front(), "matmul");
      if (!t) return;
      core.kernel_seconds.push_back(*t);
      core.units += 1;
    }
  }
  std::string Estimate(const CoreContext& core) const override {
    const double t = EstimateSeconds(core.models.front());
    return fmt::format("kernel {:.3f} ms, {:.1f} TFLOPS per core", t * 1e3,
                       t > 0 ? kMatmulFlops / t / 1e12 : 0.0);
  }
  std::string Report(int step, int steps, double seconds,
                     std::span<const CoreContext> cores) override {
    std::vector<double> all;
    double kernels = 0;
    for (const CoreContext& c : cores) {
      all.insert(all.end(), c.kernel_seconds.begin(), c.kernel_seconds.end());
      kernels += c.units;
    }
    const double kernel = Median(all);
    const double per_core = kernels / std::max<size_t>(cores.size(), 1) / seconds;
    return fmt::format(
        "step {}{}  step_time {:.3f} s  kernel {:.3f} ms  throughput {:.1f} kernels/s per core, "
        "{:.1f} TFLOPS per core",
        step, steps > 0 ? fmt::format("/{}", steps) : "", seconds, kernel * 1e3, per_core,
        kernel > 0 ? kMatmulFlops / kernel / 1e12 : 0.0);
  }

 private:
  int kernels_;
  uint32_t cores_ = 0;
};

class Empty : public Workload {
 public:
  explicit Empty(const WorkloadOptions& o) : kernels_(o.kernels > 0 ? o.kernels : 1000) {}

  absl::Status Configure(const RunInfo& info) override {
    cores_ = info.cores;
    return absl::OkStatus();
  }
  std::string Banner() const override {
    return fmt::format("empty: zero-work kernels on {} core{}, {} per core per step", cores_,
                       cores_ == 1 ? "" : "s", kernels_);
  }
  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, 4096); !s.ok()) return s;
    absl::StatusOr<nrt_model_t*> m = LoadOpList(
        core, R"({"version": 1, "ops": [{"op": "dma", "name": "nothing", "bytes": 0}]})", "empty");
    return m.ok() ? absl::OkStatus() : m.status();
  }
  void Step(CoreContext& core, int, int) override {
    for (int i = 0; i < kernels_; ++i) {
      const std::optional<double> t = Execute(core, core.models.front(), "empty");
      if (!t) return;
      core.kernel_seconds.push_back(*t);
      core.units += 1;
    }
  }
  std::string Estimate(const CoreContext& core) const override {
    return fmt::format("execution {:.1f} us", EstimateSeconds(core.models.front()) * 1e6);
  }
  std::string Report(int step, int steps, double seconds,
                     std::span<const CoreContext> cores) override {
    std::vector<double> all;
    double executions = 0;
    for (const CoreContext& c : cores) {
      all.insert(all.end(), c.kernel_seconds.begin(), c.kernel_seconds.end());
      executions += c.units;
    }
    return fmt::format(
        "step {}{}  step_time {:.3f} s  execution {:.1f} us (median)  throughput {:.0f} "
        "executions/s per core, {:.0f} in all",
        step, steps > 0 ? fmt::format("/{}", steps) : "", seconds, Median(all) * 1e6,
        executions / std::max<size_t>(cores.size(), 1) / seconds, executions / seconds);
  }

 private:
  int kernels_;
  uint32_t cores_ = 0;
};

}  // namespace

std::unique_ptr<Workload> MakeMatmul(const WorkloadOptions& o) {
  return std::make_unique<Matmul>(o);
}
std::unique_ptr<Workload> MakeEmpty(const WorkloadOptions& o) { return std::make_unique<Empty>(o); }

}  // namespace neuron::workloads

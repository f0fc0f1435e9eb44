// The single-kernel workloads: one kernel executed --kernels times per core per step. A row of
// kKernels is a workload: `neuron-sim run --workload NAME`, its line in the help and its
// --kernels default all come from it (a new one is a row here and nothing else).

#include <fmt/format.h>

#include <span>

#include "driver-sim/workloads/workload_runner.h"

namespace neuron::workloads {
namespace {

struct KernelRow {
  std::string_view name;
  std::string_view help;  // WorkloadHelp's lines after the name, wrapped at column 14
  std::string_view what;  // the banner's description of the kernel
  std::string_view per;   // the banner's unit of --kernels
  std::string_view published;
  int default_kernels = 0;
  uint64_t device_bytes = 0;  // the device tensor PrepareCore gives each core
  std::string op_list;        // loaded on every core (nrtsim's op-list model, workload_runner.h)
  double flops = 0;           // per kernel; 0: no work, reported per execution in microseconds
};

// BF16 [4096,8192] x [8192,8192]: F = 2·m·k·n = 549.76 GFLOP (docs/hardware.md#calibration-points);
// A, B and C in HBM: (4096·8192 + 8192·8192 + 4096·8192) x 2 bytes.
constexpr double kMatmulFlops = 2.0 * 4096 * 8192 * 8192;
constexpr uint64_t kMatmulOperandBytes = (4096ull * 8192 + 8192ull * 8192 + 4096ull * 8192) * 2;

const std::vector<KernelRow>& Kernels() {
  static const std::vector<KernelRow> rows{
      // The calibration GEMM of docs/hardware.md#calibration-points row 1.
      {.name = "matmul",
       .help = "BF16 [4096,8192] x [8192,8192] on every core; prints the kernel time\n"
               "              (published: 6.97 ms on one NeuronCore-v2). --kernels N per core "
               "per step (10)",
       .what = "BF16 [4096,8192] x [8192,8192] (549.76 GFLOP)",
       .per = "kernels per core per step",
       .published = "; published: 6.97 ms on one NeuronCore-v2",
       .default_kernels = 10,
       .device_bytes = 1 << 20,
       .op_list = fmt::format(R"({{"version": 1,
 "memory": {{"code": 1048576, "scratchpad": {}}},
 "ops": [{{"op": "matmul", "name": "gemm_bf16_4096x8192x8192",
           "m": 4096, "k": 8192, "n": 8192, "dtype": "bfloat16"}}]}})",
                              kMatmulOperandBytes),
       .flops = kMatmulFlops},
      // Kernels that do nothing: the runtime's own cost per execution.
      {.name = "empty",
       .help = "zero-work kernels, --kernels N per core per step (1000): the runtime's own cost",
       .what = "zero-work kernels",
       .per = "per core per step",
       .published = "",
       .default_kernels = 1000,
       .device_bytes = 4096,
       .op_list = R"({"version": 1, "ops": [{"op": "dma", "name": "nothing", "bytes": 0}]})",
       .flops = 0},
  };
  return rows;
}

class Kernel : public Workload {
 public:
  Kernel(const KernelRow& row, const WorkloadOptions& o)
      : row_(row), kernels_(o.kernels > 0 ? o.kernels : row.default_kernels) {}

  absl::Status Configure(const RunInfo& info) override {
    cores_ = info.cores;
    return absl::OkStatus();
  }
  std::string Banner() const override {
    return fmt::format("{}: {} on {} core{}, {} {}{}", row_.name, row_.what, cores_,
                       cores_ == 1 ? "" : "s", kernels_, row_.per, row_.published);
  }
  absl::Status Setup(CoreContext& core) override {
    if (absl::Status s = PrepareCore(core, row_.device_bytes); !s.ok()) return s;
    absl::StatusOr<nrt_model_t*> m = LoadOpList(core, row_.op_list, std::string{row_.name});
    return m.ok() ? absl::OkStatus() : m.status();
  }
  void Step(CoreContext& core, int, int) override {
    for (int i = 0; i < kernels_; ++i) {
      const std::optional<double> t = Execute(core, core.models.front(), std::string{row_.name});
      if (!t) return;
      core.kernel_seconds.push_back(*t);
      core.units += 1;
    }
  }
  std::string Estimate(const CoreContext& core) const override {
    const double t = EstimateSeconds(core.models.front());
    if (row_.flops == 0) return fmt::format("execution {:.1f} us", t * 1e6);
    return fmt::format("kernel {:.3f} ms, {:.1f} TFLOPS per core", t * 1e3,
                       t > 0 ? row_.flops / t / 1e12 : 0.0);
  }
  std::string Report(int step, int steps, double seconds,
                     std::span<const CoreContext> cores) override {
    std::vector<double> all;
    double kernels = 0;
    for (const CoreContext& c : cores) {
      all.insert(all.end(), c.kernel_seconds.begin(), c.kernel_seconds.end());
      kernels += c.units;
    }
    const std::string head = fmt::format("step {}{}  step_time {:.3f} s", step,
                                         steps > 0 ? fmt::format("/{}", steps) : "", seconds);
    const double median = Median(all);
    const double per_core =
        kernels / static_cast<double>(std::max<size_t>(cores.size(), 1)) / seconds;
    if (row_.flops == 0) {
      return fmt::format(
          "{}  execution {:.1f} us (median)  throughput {:.0f} executions/s per core, {:.0f} in "
          "all",
          head, median * 1e6, per_core, kernels / seconds);
    }
    return fmt::format(
        "{}  kernel {:.3f} ms  throughput {:.1f} kernels/s per core, {:.1f} TFLOPS per core", head,
        median * 1e3, per_core, median > 0 ? row_.flops / median / 1e12 : 0.0);
  }

 private:
  const KernelRow& row_;
  int kernels_;
  uint32_t cores_ = 0;
};

}  // namespace

std::vector<std::string_view> KernelWorkloadNames() {
  std::vector<std::string_view> names;
  for (const KernelRow& r : Kernels()) names.push_back(r.name);
  return names;
}

std::unique_ptr<Workload> MakeKernelWorkload(std::string_view name, const WorkloadOptions& o) {
  for (const KernelRow& r : Kernels()) {
    if (r.name == name) return std::make_unique<Kernel>(r, o);
  }
  return nullptr;
}

std::string KernelWorkloadHelp() {
  std::string out;
  for (const KernelRow& r : Kernels()) out += fmt::format("  {:<11} {}\n", r.name, r.help);
  return out;
}

std::string KernelsFlagHelp() {
  std::vector<std::string_view> names;
  std::vector<int> defaults;
  for (const KernelRow& r : Kernels()) {
    names.push_back(r.name);
    defaults.push_back(r.default_kernels);
  }
  return fmt::format("{}: executions per core per step ({})", fmt::join(names, ", "),
                     fmt::join(defaults, ", "));
}

}  // namespace neuron::workloads

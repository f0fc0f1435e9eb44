#include "driver-sim/model/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/model/catalog.h"
#include "driver-sim/runtime/engine_model.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/timing.h"

namespace neuron::workloads {
namespace {

constexpr const char* kNccom = "nccom-test documentation, SDK 2.10";

absl::StatusOr<nrt::NodeModel> Trn1() {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance("trn1.32xlarge");
  if (!spec.ok()) return spec.status();
  NodeInfo info;
  info.instance_type = "trn1.32xlarge";
  return nrt::NodeModel(RootPaths("/"), info, *spec, 1);
}

// A graph of `count` [m,k]x[k,n] BF16 matmuls in one execution on one NeuronCore-v2, in TFLOPS.
double GemmTflops(const nrt::NodeModel& node, double m, double k, double n, int count) {
  const nrt::CoreEngines e = nrt::EnginesFor(node.spec().chip->chip, node.lnc(), node.Perf());
  nrt::Op op;
  op.m = m;
  op.k = k;
  op.n = n;
  op.flops = 2 * m * k * n;
  op.bytes = 2 * (m * k + k * n + m * n);
  const double seconds =
      (static_cast<double>(nrt::kLaunchNs) + count * static_cast<double>(nrt::CostOp(op, e).ns)) *
      1e-9;
  return count * op.flops / seconds / 1e12;
}

// One nccom-test operation: neuron-bench executes a graph holding the one collective, so each
// reported time is an execution (its launch) plus the collective.
double NccomSeconds(const nrt::NodeModel& node, nrt::CollKind kind, double bytes, int local,
                    int nodes) {
  const nrt::CollectiveCost c = nrt::CostCollective(kind, bytes, local, nodes, nrt::PathFor(node));
  return static_cast<double>(nrt::kLaunchNs + c.ns) * 1e-9;
}

void AddCalibrations(const nrt::NodeModel& node, std::vector<ValidationRow>& rows) {
  // docs/hardware.md#calibration-points row 1, docs/hardware.md#collective-calibration.
  const double gemm_s = 2.0 * 4096 * 8192 * 8192 / (GemmTflops(node, 4096, 8192, 8192, 1) * 1e12);
  rows.push_back({"NKI GEMM [4096,8192]x[8192,8192] BF16, 1 NC-v2", "ms", 6.97, gemm_s * 1e3,
                  "NKI matrix-multiplication tutorial, SDK 2.20", RowRole::kCalibration});
  rows.push_back({"all-reduce 1073741824 B FP32, 2 ranks, 1 node", "us", 18930,
                  NccomSeconds(node, nrt::CollKind::kAllReduce, 1073741824.0, 2, 1) * 1e6, kNccom,
                  RowRole::kCalibration});
  rows.push_back({"all-gather 1024 B FP32, 32 ranks, 1 node", "us", 151,
                  NccomSeconds(node, nrt::CollKind::kAllGather, 1024, 32, 1) * 1e6, kNccom,
                  RowRole::kCalibration});
  rows.push_back({"all-reduce 8 B FP32, 64 ranks, 2 nodes (EFA)", "us", 520,
                  NccomSeconds(node, nrt::CollKind::kAllReduce, 8, 32, 2) * 1e6, kNccom,
                  RowRole::kCalibration});
}

// nccom-test's example tables, every size but the calibrations above. The tables print bytes:
// their 1 GiB rows are 1073741824 B.
void AddCollectives(const nrt::NodeModel& node, std::vector<ValidationRow>& rows) {
  struct Size {
    double bytes;
    double us;
  };
  const Size two_ranks[] = {{1024, 58},       {4096, 58},       {16384, 58},    {65536, 58},
                            {262144, 60},     {1048576, 68},    {4194304, 107}, {16777216, 332},
                            {67108864, 1214}, {268435456, 4750}};
  for (const Size& s : two_ranks) {
    rows.push_back({fmt::format("all-reduce {:.0f} B FP32, 2 ranks, 1 node", s.bytes), "us", s.us,
                    NccomSeconds(node, nrt::CollKind::kAllReduce, s.bytes, 2, 1) * 1e6, kNccom,
                    RowRole::kCollective});
  }
  const Size gather[] = {{8192, 149}, {65536, 150}, {524288, 179}};
  for (const Size& s : gather) {
    rows.push_back({fmt::format("all-gather {:.0f} B FP32, 32 ranks, 1 node", s.bytes), "us", s.us,
                    NccomSeconds(node, nrt::CollKind::kAllGather, s.bytes, 32, 1) * 1e6, kNccom,
                    RowRole::kCollective});
  }
  // 64 ranks on 2 nodes, every fourfold size after the 8-byte calibration.
  const Size efa[] = {{32, 523},          {128, 553},         {512, 782},       {2048, 881},
                      {8192, 1013},       {32768, 1174},      {131072, 1315},   {524288, 1312},
                      {2097152, 1329},    {8388608, 1419},    {33554432, 2711}, {134217728, 6279},
                      {536870912, 21803}, {1073741824, 41806}};
  for (const Size& s : efa) {
    rows.push_back({fmt::format("all-reduce {:.0f} B FP32, 64 ranks, 2 nodes (EFA)", s.bytes), "us",
                    s.us, NccomSeconds(node, nrt::CollKind::kAllReduce, s.bytes, 32, 2) * 1e6,
                    kNccom, RowRole::kCollective});
  }
}

const char* RoleName(RowRole r) {
  switch (r) {
    case RowRole::kCalibration:
      return "calibration";
    case RowRole::kMicrobenchmark:
      return "microbenchmark";
    case RowRole::kCollective:
      return "collective";
  }
  return "?";
}

}  // namespace

absl::StatusOr<std::vector<ValidationRow>> ValidationTable() {
  absl::StatusOr<nrt::NodeModel> node = Trn1();
  if (!node.ok()) return node.status();
  std::vector<ValidationRow> rows;
  AddCalibrations(*node, rows);
  rows.push_back({"1024^3 BF16 nn.Linear chain, 1 NC-v2", "TFLOPS", 77.6,
                  GemmTflops(*node, 1024, 1024, 1024, 64),
                  "aws-neuron-samples torch-neuronx microbenchmark", RowRole::kMicrobenchmark});
  AddCollectives(*node, rows);
  return rows;
}

ErrorSummary Summarise(const std::vector<std::pair<double, std::string>>& errors) {
  ErrorSummary s;
  std::vector<double> magnitudes;
  for (const auto& [error, name] : errors) {
    const double e = std::abs(error);
    magnitudes.push_back(e);
    if (e > s.worst || s.worst_row.empty()) {
      s.worst = e;
      s.worst_row = name;
    }
  }
  s.rows = static_cast<int>(magnitudes.size());
  if (magnitudes.empty()) return s;
  std::sort(magnitudes.begin(), magnitudes.end());
  const size_t mid = magnitudes.size() / 2;
  s.median =
      magnitudes.size() % 2 == 1 ? magnitudes[mid] : (magnitudes[mid - 1] + magnitudes[mid]) / 2;
  return s;
}

std::string ValidationText(const std::vector<ValidationRow>& rows) {
  std::string out = fmt::format("{:<66} {:>6} {:>10} {:>10} {:>8}  {}\n", "figure", "unit",
                                "published", "predicted", "error", "role / source");
  for (const ValidationRow& r : rows) {
    const std::string role = r.calibration() ? "calibration"
                                             : fmt::format("{} (band ±{:.0f} %)", RoleName(r.role),
                                                           kValidationBand * 100);
    out += fmt::format("{:<66} {:>6} {:>10.6g} {:>10.4g} {:>+7.1f}%  {} / {}\n", r.name, r.unit,
                       r.published, r.predicted, r.Error() * 100, role, r.source);
  }
  return out;
}

}  // namespace neuron::workloads

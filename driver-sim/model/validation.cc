#include "driver-sim/model/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/model/catalog.h"
#include "driver-sim/model/predict.h"
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
                  "NKI matrix-multiplication tutorial, SDK 2.20", RowRole::kCalibration, ""});
  rows.push_back({"all-reduce 1073741824 B FP32, 2 ranks, 1 node", "us", 18930,
                  NccomSeconds(node, nrt::CollKind::kAllReduce, 1073741824.0, 2, 1) * 1e6, kNccom,
                  RowRole::kCalibration, ""});
  rows.push_back({"all-gather 1024 B FP32, 32 ranks, 1 node", "us", 151,
                  NccomSeconds(node, nrt::CollKind::kAllGather, 1024, 32, 1) * 1e6, kNccom,
                  RowRole::kCalibration, ""});
  rows.push_back({"all-reduce 8 B FP32, 64 ranks, 2 nodes (EFA)", "us", 520,
                  NccomSeconds(node, nrt::CollKind::kAllReduce, 8, 32, 2) * 1e6, kNccom,
                  RowRole::kCalibration, ""});
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
                    RowRole::kCollective, ""});
  }
  const Size gather[] = {{8192, 149}, {65536, 150}, {524288, 179}};
  for (const Size& s : gather) {
    rows.push_back({fmt::format("all-gather {:.0f} B FP32, 32 ranks, 1 node", s.bytes), "us", s.us,
                    NccomSeconds(node, nrt::CollKind::kAllGather, s.bytes, 32, 1) * 1e6, kNccom,
                    RowRole::kCollective, ""});
  }
  // 64 ranks on 2 nodes, every fourfold size after the 8-byte calibration.
  const Size efa[] = {{32, 523},          {128, 553},         {512, 782},       {2048, 881},
                      {8192, 1013},       {32768, 1174},      {131072, 1315},   {524288, 1312},
                      {2097152, 1329},    {8388608, 1419},    {33554432, 2711}, {134217728, 6279},
                      {536870912, 21803}, {1073741824, 41806}};
  for (const Size& s : efa) {
    rows.push_back({fmt::format("all-reduce {:.0f} B FP32, 64 ranks, 2 nodes (EFA)", s.bytes), "us",
                    s.us, NccomSeconds(node, nrt::CollKind::kAllReduce, s.bytes, 32, 2) * 1e6,
                    kNccom, RowRole::kCollective, ""});
  }
}

absl::StatusOr<double> JobSeqPerS(const char* model, int nodes, int tp, int seq, int mb,
                                  int global_batch, Precision precision, Optimizer opt, bool zero1,
                                  bool sequence_parallel) {
  absl::StatusOr<ModelShape> m = FindModel(model);
  if (!m.ok()) return m.status();
  PredictRequest r;
  r.global_batch = global_batch;
  r.train.model = *m;
  r.train.nodes = nodes;
  r.train.tp = tp;
  r.train.seq = seq;
  r.train.micro_batch = mb;
  r.train.precision = precision;
  r.train.optimizer = opt;
  r.train.zero1 = zero1;
  r.train.sequence_parallel = sequence_parallel;
  absl::StatusOr<Prediction> p = Predict(r);
  if (!p.ok()) return p.status();
  return p->seq_per_s;
}

// The trn1 training rows of AWS's performance tables (BENCH in docs/hardware.md): the oldest
// and newest figure of each configuration, scored against their middle.
absl::Status AddTraining(std::vector<ValidationRow>& rows) {
  struct Job {
    const char* name;
    double low, high;
    const char* range;
    const char* model;
    int nodes, tp, seq, mb, gbs;
    Precision precision;
    Optimizer opt;
    bool zero1;
    bool sequence_parallel;  // as the row's recipe runs it (docs/hardware.md#sequence-parallel)
    const char* source;
  };
  constexpr Precision kBf16 = Precision::kBf16;
  const Job jobs[] = {
      {"Llama-2-7B, 16 nodes, TP8 SP DP64 ZeRO-1, seq 4096, gb1024, AdamW", 81, 101.3,
       "81 (2.15) - 101.3 (2.20)", "llama2-7b", 16, 8, 4096, 1, 1024, kBf16, Optimizer::kAdamW,
       true, true, "training_data_decoder.csv history, SDK 2.15-2.21"},
      {"BERT-Large ph1, 1 node, DP32, mb16, gb16384, AdamW, BF16+SR", 3530, 3836.5,
       "3530 (2.15) - 3836.5 (2.27)", "bert-large", 1, 1, 128, 16, 16384, kBf16, Optimizer::kAdamW,
       false, false, "trn1_trn1n_nlp_data.csv 2.13-2.15, training_data_encoder.csv"},
      {"BERT-Large ph1, 1 node, DP32, mb16, gb65536, LAMB, BF16+SR", 3401, 3733,
       "3401 (2.13) - 3733 (2.15)", "bert-large", 1, 1, 128, 16, 65536, kBf16, Optimizer::kLamb,
       false, false, "trn1_trn1n_nlp_data.csv, SDK 2.13-2.15"},
      {"BERT-Large ph1, 16 nodes, DP512, mb16, gb1048576, LAMB, BF16+SR", 52585.9, 57407.9,
       "52586 (2.13) - 57408 (2.28)", "bert-large", 16, 1, 128, 16, 1048576, kBf16,
       Optimizer::kLamb, false, false,
       "trn1_trn1n_nlp_data.csv 2.13-2.15, training_data_encoder.csv"},
      {"BERT-Large ph1, 16 nodes, DP512, mb8, gb1048576, LAMB, FP32", 28402.6, 32752.8,
       "28403 (2.13) - 32753 (2.27)", "bert-large", 16, 1, 128, 8, 1048576, Precision::kFp32,
       Optimizer::kLamb, false, false,
       "trn1_trn1n_nlp_data.csv 2.13, training_data_encoder.csv 2.27"},
      {"BERT-Large ph1, 16 nodes, DP512, mb16, gb16384, AdamW, BF16", 25547.6, 25547.6, "",
       "bert-large", 16, 1, 128, 16, 16384, kBf16, Optimizer::kAdamW, false, false,
       "trn1_trn1n_nlp_data.csv, SDK 2.13"},
  };
  for (const Job& j : jobs) {
    absl::StatusOr<double> seq = JobSeqPerS(j.model, j.nodes, j.tp, j.seq, j.mb, j.gbs, j.precision,
                                            j.opt, j.zero1, j.sequence_parallel);
    if (!seq.ok()) return seq.status();
    rows.push_back(
        {j.name, "seq/s", (j.low + j.high) / 2, *seq, j.source, RowRole::kTraining, j.range});
  }
  return absl::OkStatus();
}

const char* RoleName(RowRole r) {
  switch (r) {
    case RowRole::kCalibration:
      return "calibration";
    case RowRole::kMicrobenchmark:
      return "microbenchmark";
    case RowRole::kCollective:
      return "collective";
    case RowRole::kTraining:
      return "training";
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
                  "aws-neuron-samples torch-neuronx microbenchmark", RowRole::kMicrobenchmark, ""});
  AddCollectives(*node, rows);
  if (absl::Status s = AddTraining(rows); !s.ok()) return s;
  return rows;
}

ErrorSummary TrainingErrors(const std::vector<ValidationRow>& rows) {
  std::vector<double> errors;
  ErrorSummary s;
  for (const ValidationRow& r : rows) {
    if (r.role != RowRole::kTraining) continue;
    const double e = std::abs(r.Error());
    errors.push_back(e);
    if (e > s.worst) {
      s.worst = e;
      s.worst_row = r.name;
    }
  }
  s.rows = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const size_t mid = errors.size() / 2;
  s.median = errors.size() % 2 == 1 ? errors[mid] : (errors[mid - 1] + errors[mid]) / 2;
  return s;
}

std::string ValidationText(const std::vector<ValidationRow>& rows) {
  std::string out = fmt::format("{:<66} {:>6} {:>10} {:>10} {:>8}  {}\n", "figure", "unit",
                                "published", "predicted", "error", "role / source");
  for (const ValidationRow& r : rows) {
    const std::string role = r.calibration() ? "calibration"
                                             : fmt::format("{} (band ±{:.0f} %)", RoleName(r.role),
                                                           kValidationBand * 100);
    out += fmt::format(
        "{:<66} {:>6} {:>10.6g} {:>10.4g} {:>+7.1f}%  {} / {}{}\n", r.name, r.unit, r.published,
        r.predicted, r.Error() * 100, role, r.source,
        r.range.empty() ? "" : fmt::format("; published {}, scored at the middle", r.range));
  }
  const ErrorSummary s = TrainingErrors(rows);
  out += fmt::format("training rows: {}  median |error| {:.1f} %  worst |error| {:.1f} % ({})\n",
                     s.rows, s.median * 100, s.worst * 100, s.worst_row);
  return out;
}

}  // namespace neuron::workloads

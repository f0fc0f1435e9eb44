#include "driver-sim/workloads/validation.h"

#include <fmt/format.h>

#include <cmath>

#include "core/model/catalog.h"
#include "driver-sim/runtime/engine_model.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/timing.h"
#include "driver-sim/workloads/predict.h"

namespace neuron::workloads {
namespace {

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

double AllReduceSeconds(const nrt::NodeModel& node, double bytes, int local, int nodes) {
  const nrt::CollectiveCost c =
      nrt::CostCollective(nrt::CollKind::kAllReduce, bytes, local, nodes, nrt::PathFor(node));
  return static_cast<double>(c.ns) * 1e-9;
}

absl::StatusOr<double> JobSeqPerS(const std::string& model, int nodes, int tp, int seq, int mb,
                                  int global_batch, Optimizer opt, bool zero1) {
  absl::StatusOr<ModelShape> m = FindModel(model);
  if (!m.ok()) return m.status();
  PredictRequest r;
  r.global_batch = global_batch;
  r.train.model = *m;
  r.train.nodes = nodes;
  r.train.tp = tp;
  r.train.seq = seq;
  r.train.micro_batch = mb;
  r.train.optimizer = opt;
  r.train.zero1 = zero1;
  absl::StatusOr<Prediction> p = Predict(r);
  if (!p.ok()) return p.status();
  return p->seq_per_s;
}

}  // namespace

absl::StatusOr<std::vector<ValidationRow>> ValidationTable() {
  absl::StatusOr<nrt::NodeModel> node = Trn1();
  if (!node.ok()) return node.status();
  std::vector<ValidationRow> rows;
  // Calibrations (docs/hardware.md#calibration-points row 1, docs/hardware.md#collective-timing).
  const double gemm_s = 2.0 * 4096 * 8192 * 8192 / (GemmTflops(*node, 4096, 8192, 8192, 1) * 1e12);
  rows.push_back({"NKI GEMM [4096,8192]x[8192,8192] BF16, 1 NC-v2", "ms", 6.97, gemm_s * 1e3,
                  "NKI matrix-multiplication tutorial, SDK 2.20", true});
  rows.push_back({"all-reduce 1e9 B FP32, 2 ranks, 1 trn1.32xlarge", "ms", 18.9,
                  AllReduceSeconds(*node, 1e9, 2, 1) * 1e3, "nccom-test documentation, SDK 2.10",
                  true});
  rows.push_back({"all-reduce 8 B, 64 ranks, 2 trn1.32xlarge (EFA)", "us", 520,
                  AllReduceSeconds(*node, 8, 32, 2) * 1e6, "nccom-test documentation, SDK 2.10",
                  true});
  // Validation.
  rows.push_back({"1024^3 BF16 nn.Linear chain, 1 NC-v2", "TFLOPS", 77.6,
                  GemmTflops(*node, 1024, 1024, 1024, 64),
                  "aws-neuron-samples torch-neuronx microbenchmark", false});
  rows.push_back({"all-reduce 1e9 B FP32, 64 ranks, 2 trn1.32xlarge (EFA)", "ms", 41.8,
                  AllReduceSeconds(*node, 1e9, 32, 2) * 1e3, "nccom-test documentation, SDK 2.10",
                  false});
  struct Job {
    const char* name;
    double published;
    const char* model;
    int nodes, tp, seq, mb, gbs;
    Optimizer opt;
    bool zero1;
    const char* source;
  };
  const Job jobs[] = {
      {"BERT-Large ph1, 1 trn1.32xl, DP32, mb16, AdamW", 3826.6, "bert-large", 1, 1, 128, 16, 16384,
       Optimizer::kAdamW, false, "training_data_encoder.csv, SDK 2.28"},
      {"BERT-Large ph1, 1 trn1.32xl, DP32, mb16, LAMB gb65536", 3733, "bert-large", 1, 1, 128, 16,
       65536, Optimizer::kLamb, false, "trn1_trn1n_nlp_data.csv, SDK 2.15"},
      {"Llama-2-7B, 16 trn1.32xl, TP8 DP64 ZeRO-1, gb1024", 101.3, "llama2-7b", 16, 8, 4096, 1,
       1024, Optimizer::kAdamW, true, "training_data_decoder.csv, SDK 2.20"},
  };
  for (const Job& j : jobs) {
    absl::StatusOr<double> seq =
        JobSeqPerS(j.model, j.nodes, j.tp, j.seq, j.mb, j.gbs, j.opt, j.zero1);
    if (!seq.ok()) return seq.status();
    rows.push_back({j.name, "seq/s", j.published, *seq, j.source, false});
  }
  return rows;
}

std::string ValidationText(const std::vector<ValidationRow>& rows) {
  std::string out = fmt::format("{:<58} {:>9} {:>10} {:>10} {:>8}  {}\n", "figure", "unit",
                                "published", "predicted", "error", "role / source");
  for (const ValidationRow& r : rows) {
    out += fmt::format("{:<58} {:>9} {:>10.6g} {:>10.4g} {:>+7.1f}%  {} / {}\n", r.name, r.unit,
                       r.published, r.predicted, r.Error() * 100,
                       r.calibration
                           ? "calibration"
                           : fmt::format("validation (band ±{:.0f} %)", kValidationBand * 100),
                       r.source);
  }
  return out;
}

}  // namespace neuron::workloads

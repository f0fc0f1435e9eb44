#include "driver-sim/model/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/model/catalog.h"
#include "driver-sim/model/job_shape.h"
#include "driver-sim/runtime/engine_model.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/program.h"
#include "driver-sim/runtime/timing.h"

namespace neuron::workloads {
namespace {

// One execution of an op list on one rank, as the runtime times it (executor.cc: the launch,
// each op's engine cost, each collective's cost once every rank has arrived).
struct ListTime {
  double total = 0;
  double compute = 0;
  double memory = 0;
  double coll_node = 0;
  double coll_efa = 0;
  double efa_bytes = 0;  // one rank, sent
};

absl::StatusOr<ListTime> CostList(const std::string& text, const nrt::NodeModel& node, int world) {
  absl::StatusOr<nrt::Program> p = nrt::ParseOpList(text);
  if (!p.ok()) return p.status();
  const nrt::CoreEngines e = nrt::EnginesFor(node.spec().chip->chip, node.lnc(), node.Perf());
  const nrt::CollectivePath path = nrt::PathFor(node);
  ListTime t;
  t.compute = static_cast<double>(nrt::kLaunchNs) * 1e-9;
  for (const nrt::Op& op : p->ops) {
    if (op.engine == nrt::Engine::kCollectives) {
      const uint64_t local = op.groups.empty() ? static_cast<uint64_t>(world) : op.groups[0].size();
      const nrt::CollectiveCost c =
          nrt::CostCollective(op.coll, op.bytes, local, nrt::NodesOf(op, local), path);
      t.coll_node += static_cast<double>(c.intra_ns) * 1e-9;
      t.coll_efa += static_cast<double>(c.efa_ns) * 1e-9;
      t.efa_bytes += c.efa_bytes;
      continue;
    }
    const nrt::OpCost c = nrt::CostOp(op, e);
    (c.bound == nrt::Bound::kMemory ? t.memory : t.compute) += static_cast<double>(c.ns) * 1e-9;
  }
  t.total = t.compute + t.memory + t.coll_node + t.coll_efa;
  return t;
}

absl::StatusOr<nrt::NodeModel> NodeFor(const std::string& instance) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(instance);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<int> lnc = ResolveLnc(**spec, 0);
  if (!lnc.ok()) return lnc.status();
  NodeInfo info;
  info.instance_type = instance;
  info.lnc = *lnc;
  return nrt::NodeModel(RootPaths("/"), info, *spec, *lnc);
}

}  // namespace

absl::StatusOr<Prediction> Predict(const PredictRequest& r) {
  absl::StatusOr<nrt::NodeModel> node = NodeFor(r.instance);
  if (!node.ok()) return node.status();
  TrainSpec s = r.train;
  if (s.cores_per_node == 0) s.cores_per_node = node->total_cores();
  if (s.cores_per_node < 0 || s.cores_per_node > node->total_cores()) {
    return absl::InvalidArgumentError(fmt::format(
        "--cores {}: {} has {} logical cores", s.cores_per_node, r.instance, node->total_cores()));
  }
  if (absl::Status v = Validate(s); !v.ok()) return v;
  if (s.nodes > 1 && node->spec().efa_count == 0) {
    return absl::InvalidArgumentError(
        fmt::format("{} has no EFA: a job of --nodes {} cannot run on it", r.instance, s.nodes));
  }
  Prediction p;
  p.dp = s.dp();
  absl::StatusOr<int> micro_steps = MicroStepsOf(s, r.global_batch);
  if (!micro_steps.ok()) return micro_steps.status();
  p.micro_steps = *micro_steps;
  // The slowest stage sets the pace: every stage costs its own lists, point-to-point exchanges
  // with its neighbours included (over NeuronLink or EFA as parallel.h places them); the first
  // holds the embedding, the last the loss.
  ListTime micro, opt;
  for (int stage = 0; stage < s.pp; ++stage) {
    const StepOps ops = BuildStepOps(s, stage);
    absl::StatusOr<ListTime> m = CostList(ops.micro_step, *node, s.cores_per_node);
    absl::StatusOr<ListTime> o = CostList(ops.optimizer, *node, s.cores_per_node);
    if (!m.ok()) return m.status();
    if (!o.ok()) return o.status();
    if (m->total > micro.total) micro = *m;
    if (o->total > opt.total) opt = *o;
  }
  const double k = p.micro_steps;
  Breakdown& b = p.breakdown;
  b.compute = k * micro.compute;
  b.memory = k * micro.memory;
  b.collectives_node = k * micro.coll_node + opt.coll_node;
  b.collectives_efa = k * micro.coll_efa + opt.coll_efa;
  b.optimizer = opt.compute + opt.memory;
  b.bubble = (s.pp - 1) * micro.total;  // 1F1B: PP-1 micro-batches of fill and drain
  p.micro_step_seconds = micro.total;
  p.optimizer_phase_seconds = opt.total;
  p.step_seconds = k * micro.total + opt.total + b.bubble;
  p.seq_per_s = r.global_batch / p.step_seconds;
  p.tokens_per_s = p.seq_per_s * s.seq;
  const double peak = node->Perf().p_bf16 * node->total_cores() * s.nodes;
  p.mfu = FlopsPerToken(s.model, s.seq) * p.tokens_per_s / peak;
  p.efa_bytes_per_node = (k * micro.efa_bytes + opt.efa_bytes) * s.cores_per_node;
  return p;
}

std::string PredictionText(const PredictRequest& r, const Prediction& p) {
  const TrainSpec& s = r.train;
  const Breakdown& b = p.breakdown;
  return fmt::format(
      "{} on {} x {}: TP {} PP {} DP {}{}, seq {}, micro-batch {}, global batch {} ({} "
      "micro-steps)\n"
      "step {:.3f} s  seq/s {:.1f}  tokens/s {:.0f}  MFU {:.1f} %\n"
      "breakdown (s): compute {:.3f}  memory {:.3f}  collectives_node {:.3f}  collectives_efa "
      "{:.3f}  optimizer {:.3f}  bubble {:.3f}\n"
      "micro-step {:.4f} s  optimizer phase {:.3f} s  EFA {:.3f} GB sent per node per step\n",
      s.model.name, s.nodes, r.instance, s.tp, s.pp, p.dp, s.zero1 ? " ZeRO-1" : "", s.seq,
      s.micro_batch, r.global_batch, p.micro_steps, p.step_seconds, p.seq_per_s, p.tokens_per_s,
      p.mfu * 100, b.compute, b.memory, b.collectives_node, b.collectives_efa, b.optimizer,
      b.bubble, p.micro_step_seconds, p.optimizer_phase_seconds, p.efa_bytes_per_node / 1e9);
}

std::string PredictionJson(const PredictRequest& r, const Prediction& p) {
  const Breakdown& b = p.breakdown;
  nlohmann::json j = {{"model", r.train.model.name},
                      {"instance", r.instance},
                      {"nodes", r.train.nodes},
                      {"tp", r.train.tp},
                      {"pp", r.train.pp},
                      {"dp", p.dp},
                      {"micro_steps", p.micro_steps},
                      {"step_seconds", p.step_seconds},
                      {"seq_per_s", p.seq_per_s},
                      {"tokens_per_s", p.tokens_per_s},
                      {"mfu", p.mfu},
                      {"micro_step_seconds", p.micro_step_seconds},
                      {"optimizer_phase_seconds", p.optimizer_phase_seconds},
                      {"efa_bytes_per_node", p.efa_bytes_per_node},
                      {"breakdown",
                       {{"compute", b.compute},
                        {"memory", b.memory},
                        {"collectives_node", b.collectives_node},
                        {"collectives_efa", b.collectives_efa},
                        {"optimizer", b.optimizer},
                        {"bubble", b.bubble}}}};
  return j.dump() + "\n";
}

}  // namespace neuron::workloads

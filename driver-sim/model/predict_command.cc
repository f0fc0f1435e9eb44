#include "driver-sim/model/predict_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <memory>
#include <string>

#include "driver-sim/model/job_shape.h"
#include "driver-sim/model/predict.h"

namespace neuron::sim {
namespace {

struct PredictFlags {
  std::string model;
  std::string instance = "trn1.32xlarge";
  int cores = 0;
  bool json = false;
  workloads::JobShapeFlags shape;
};

int Fail(const absl::Status& status) {
  const std::string message(status.message());
  std::fprintf(stderr, "neuron-sim predict: %s\nRun with --help for more information.\n",
               message.c_str());
  return 2;
}

int RunPredict(const PredictFlags& f) {
  absl::StatusOr<workloads::ModelShape> shape = workloads::ModelOf(f.model, f.shape);
  if (!shape.ok()) return Fail(shape.status());
  absl::StatusOr<workloads::TrainSpec> spec =
      workloads::SpecOf(*shape, f.shape, workloads::ShapeDefaults{});
  if (!spec.ok()) return Fail(spec.status());
  workloads::PredictRequest r;
  r.instance = f.instance;
  r.global_batch = f.shape.global_batch.value_or(0);  // required on the command line
  r.train = *spec;
  r.train.cores_per_node = f.cores;
  absl::StatusOr<workloads::Prediction> p = workloads::Predict(r);
  if (!p.ok()) return Fail(p.status());
  const std::string text =
      f.json ? workloads::PredictionJson(r, *p) : workloads::PredictionText(r, *p);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddPredictCommand(CLI::App& app) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "predict a training job's step time, throughput and MFU without running it, from the op "
      "lists `neuron-sim run` executes and the runtime's timing model");
  cmd->add_option("--model", f->model,
                  fmt::format("model: {}", fmt::join(workloads::ModelNames(), ", ")));
  cmd->add_option("--instance", f->instance, "instance type (trn1.32xlarge)");
  cmd->add_option("--cores", f->cores,
                  "ranks per node, one per logical core (0: every logical core of the instance)");
  cmd->add_flag("--json", f->json, "print one JSON object");
  // The job shape run and job run take too (job_shape.h); predict's defaults: TP 1, PP 1,
  // micro-batch 1, no ZeRO-1.
  workloads::AddShapeFlags(cmd, &f->shape, "nodes in the job (1)");
  cmd->get_option("--global-batch")->required();
  return {cmd, [f]() { return RunPredict(*f); }};
}

}  // namespace neuron::sim

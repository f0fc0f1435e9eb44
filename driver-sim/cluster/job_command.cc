// `neuron-sim job`: the command line over job.h.

#include "driver-sim/cluster/job_command.h"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "driver-sim/cluster/job.h"
#include "driver-sim/kubelet/kubelet_control.h"
#include "driver-sim/model/job_shape.h"

namespace neuron::sim {
namespace {

struct JobFlags {
  std::string cluster;
  std::string recipe;
  std::string name;
  int steps = 0;
  int micro_steps = 0;
  double scale = 0;
  // The job shape run and predict take (job_shape.h); --nodes is the recipe's node count.
  workloads::JobShapeFlags shape;
  int timeout = 0;
  int grace_period = 30;
  // job attach
  std::string kubelet_dir;
  std::string namespace_name;
  std::vector<std::string> command;
};

std::string RecipeHelp() {
  std::string text = "recipes:\n";
  for (const Recipe& r : Recipes()) text += fmt::format("  {:<20} {}\n", r.name, r.summary);
  return text;
}

int RunCommand(const JobFlags& f, const CLI::App& run) {
  JobRunRequest r;
  r.cluster_dir = std::filesystem::absolute(f.cluster).lexically_normal();
  r.recipe = f.recipe;
  r.options.name = f.name;
  r.options.steps = f.steps;
  if (run.count("--micro-steps") > 0) r.options.micro_steps = f.micro_steps;
  if (run.count("--scale") > 0) r.options.scale = f.scale;
  r.options.seq = f.shape.seq;
  r.options.nodes = f.shape.nodes;
  // Every other shape flag goes to each pod's `neuron-sim run` as given.
  workloads::JobShapeFlags rest = f.shape;
  rest.seq.reset();
  rest.nodes.reset();
  r.options.shape_args = workloads::ShapeArgs(rest);
  r.timeout_seconds = f.timeout;
  r.grace_period_seconds = f.grace_period;
  return RunJob(r, std::cout, std::cerr);
}

void AddRun(CLI::App* run, JobFlags* f) {
  run->add_option("--cluster", f->cluster, "the cluster's directory (`neuron-sim cluster up`)")
      ->required();
  run->add_option("--recipe", f->recipe, "the job to run (below)")->required();
  run->add_option("--name", f->name, "job name; its pods are NAME-worker-I (the recipe's name)");
  run->add_option("--steps", f->steps, "optimizer steps; 0 (default) until stopped")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--micro-steps", f->micro_steps,
                  "accumulation micro-steps run per optimizer step (the shape's); fewer is a "
                  "shorter run");
  run->add_option("--scale", f->scale, "multiply every op's work: time compression (1.0)");
  workloads::AddShapeFlags(run, &f->shape,
                           "nodes, for recipes that take it (bert-large-torchx: 1)");
  run->add_option("--timeout", f->timeout, "delete every pod after this many seconds (0: never)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--grace-period", f->grace_period,
                  "seconds between SIGTERM and SIGKILL when pods are deleted (30)")
      ->check(CLI::NonNegativeNumber);
  run->footer(RecipeHelp());
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> AddJobCommand(CLI::App& app) {
  auto f = std::make_shared<JobFlags>();
  CLI::App* job = app.add_subcommand(
      "job",
      "run a recipe's training job on a simulated cluster: every pod admitted or none, one "
      "`neuron-sim run` per node forming one collective world; delete and list jobs");
  job->require_subcommand(1);
  CLI::App* run = job->add_subcommand(
      "run",
      "admit the job's pods on the cluster's nodes (all or none), run them, print the job's "
      "throughput per step; exits 0 when every pod exited 0");
  AddRun(run, f.get());
  CLI::App* del = job->add_subcommand("delete", "delete a job's pods from every node");
  del->add_option("--cluster", f->cluster, "the cluster's directory")->required();
  del->add_option("--name", f->name, "job name")->required();
  del->add_option("--grace-period", f->grace_period, "seconds between SIGTERM and SIGKILL (30)")
      ->check(CLI::NonNegativeNumber);
  CLI::App* list = job->add_subcommand("list", "the jobs recorded in the cluster's directory");
  list->add_option("--cluster", f->cluster, "the cluster's directory")->required();
  // One pod's command in a pod `job run` admitted: started by `job run` only.
  CLI::App* attach = job->add_subcommand("attach", "run CMD in an admitted pod")->group("");
  attach->add_option("--kubelet-dir", f->kubelet_dir, "the pod's kubelet")->required();
  attach->add_option("--namespace", f->namespace_name, "pod namespace")->required();
  attach->add_option("--name", f->name, "pod name")->required();
  attach->add_option("--grace-period", f->grace_period, "seconds between SIGTERM and SIGKILL");
  attach->add_option("command", f->command, "-- CMD [ARGS...]")->required();

  return {job, [f, run, del, list, attach]() -> int {
            const auto dir = [&] {
              return std::filesystem::absolute(f->cluster).lexically_normal();
            };
            if (run->parsed()) return RunCommand(*f, *run);
            if (del->parsed()) {
              return DeleteJob(dir(), f->name, f->grace_period, std::cout, std::cerr);
            }
            if (list->parsed()) return ListJobs(dir(), std::cout, std::cerr);
            if (attach->parsed()) {
              PodRunArgs args;
              args.kubelet_dir = f->kubelet_dir;
              args.namespace_name = f->namespace_name;
              args.name = f->name;
              args.command = f->command;
              args.grace_period_seconds = f->grace_period;
              return RunInAdmittedPod(args, std::cerr);
            }
            return 2;
          }};
}

}  // namespace neuron::sim

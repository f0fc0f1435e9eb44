#pragma once
// `neuron-sim run`: registers the subcommand's flags on the CLI (the job shape from job_shape.h,
// shared with `predict` and `job run`) and returns what runs it: under the simulated driver
// (re-executing itself under it when needed), RunWorkload (workload.h). Not thread-safe
// (command-line set-up).

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace neuron::sim {

std::pair<CLI::App*, std::function<int()>> AddRunCommand(CLI::App& app);

}  // namespace neuron::sim

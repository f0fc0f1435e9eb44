#pragma once
// `neuron-sim cluster up|down|status` (driver-sim/README.md#cluster): registers the subcommand's
// flags on the CLI and returns what runs it (supervisor.h and cluster.h do the work). Not
// thread-safe (command-line set-up).

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace neuron::sim {

std::pair<CLI::App*, std::function<int()>> AddClusterCommand(CLI::App& app);

}  // namespace neuron::sim

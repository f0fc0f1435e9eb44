#pragma once
// `neuron-sim up`: the node daemon (daemon.h) over an instance type of the catalog, until SIGTERM.
// Not thread-safe (command-line set-up).

#include "driver-sim/command.h"

namespace neuron::sim {

Command AddUpCommand(CLI::App& app);

}  // namespace neuron::sim

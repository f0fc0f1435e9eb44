#pragma once
// `neuron-sim exec --root DIR -- CMD [ARGS...]`: CMD under the simulated driver's device node
// (exec.h); the words after "--" come through `tail`. Not thread-safe (command-line set-up).

#include "driver-sim/command.h"

namespace neuron::sim {

Command AddExecCommand(CLI::App& app, CommandTail& tail);

}  // namespace neuron::sim

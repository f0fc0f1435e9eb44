#pragma once
// `neuron-sim kubelet` (the emulator, and `restart`/`status` against a running one) and
// `neuron-sim pod run|delete|list` (its clients, kubelet_control.h). `pod run -- CMD` takes CMD
// through `tail`. Not thread-safe (command-line set-up).

#include "driver-sim/command.h"

namespace neuron::sim {

Command AddKubeletCommand(CLI::App& app);
Command AddPodCommand(CLI::App& app, CommandTail& tail);

}  // namespace neuron::sim

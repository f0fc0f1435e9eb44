#pragma once
// `neuron-sim schedule`: the scheduler's DRA allocation of claims on a node, through the API
// server (schedule.h), as kube-scheduler would do it for a pod bound to that node.
//
//   neuron-sim schedule --api-server URL --token-file F [--ca-file F] --node NAME NS/CLAIM...
//
// Prints one line per claim, "NS/CLAIM on NAME: device device ..." (results in order), and exits
// 0; 1 when a claim cannot be allocated (the line says why), 2 on a usage error.
// Not thread-safe (command-line set-up).

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace neuron::sim {

std::pair<CLI::App*, std::function<int()>> AddScheduleCommand(CLI::App& app);

}  // namespace neuron::sim

#pragma once
// `neuron-sim apiserver`: the API stand-in (api_server.h) as a process, for scripts, the demo and
// tests that run neuron-dra-api as a binary.
//
//   neuron-sim apiserver --dir DIR --token-file F [--read-only-token-file F] [--listen ADDR]
//                        [--plain] [--node NAME]... [--load FILE.json]...
//
// Writes DIR/apiserver.json ({"url", "caFile"}) once it listens, creates a Node object for each
// --node (a slice's owner) and the objects of each --load file (a JSON array of objects with
// apiVersion, kind and metadata; DeviceClasses, claims), then serves until SIGTERM or SIGINT.
// SIGUSR1 makes it unreachable (stops listening), SIGUSR2 reachable again on the same port.
// Not thread-safe (command-line set-up).

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace neuron::sim {

std::pair<CLI::App*, std::function<int()>> AddApiServerCommand(CLI::App& app);

}  // namespace neuron::sim

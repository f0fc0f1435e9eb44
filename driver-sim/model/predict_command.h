#pragma once
// `neuron-sim predict`: registers the subcommand's flags on the CLI and returns what runs it
// (predict.h does the work; job_shape.h the flags it shares with run and job run). Not thread-safe
// (command-line set-up).

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace neuron::sim {

std::pair<CLI::App*, std::function<int()>> AddPredictCommand(CLI::App& app);

}  // namespace neuron::sim

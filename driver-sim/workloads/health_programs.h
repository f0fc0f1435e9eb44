#pragma once
// `neuron-sim health-programs --out DIR`: the reference programs of the active health check
// (docs/OPERATIONS.md#active-check) for the simulator: simulated NEFFs (program.h's format),
// their inputs and their expected outputs, and the manifest.json that names them, as an image
// would ship compiled programs for a real node. Not thread-safe (command-line set-up).

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <utility>

#include "absl/status/status.h"

namespace neuron::sim {

// Writes the programs into `dir` (created if missing): "matmul" (kind compute: a 32x32x32 float32
// matmul of integer-valued matrices, exact in float32) and "allgather" (kind exchange: a 2-rank
// all-gather of 256 float32 values per rank).
absl::Status WriteHealthPrograms(const std::filesystem::path& dir);

std::pair<CLI::App*, std::function<int()>> AddHealthProgramsCommand(CLI::App& app);

}  // namespace neuron::sim

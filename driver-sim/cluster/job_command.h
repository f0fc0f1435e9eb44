#pragma once
// `neuron-sim job run|delete|list` (driver-sim/README.md#jobs, job.h) and the hidden `job attach`
// that runs one pod's command in a pod the job admitted (RunInAdmittedPod).

#include <CLI/CLI.hpp>
#include <functional>
#include <utility>

namespace neuron::sim {

// Registers `job` on `app`; the function runs it once the command line is parsed and returns
// the exit code (0 success, 1 failure, 2 usage).
std::pair<CLI::App*, std::function<int()>> AddJobCommand(CLI::App& app);

}  // namespace neuron::sim

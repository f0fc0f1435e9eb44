#pragma once
// Running real binaries from tests (neuron-sim, neuron-ls, neuron-top): spawning with output in
// files, waiting with ceilings (DESIGN decision 15), and small file helpers. Thread-compatible.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace neuron::testing {

std::string ReadFile(const std::filesystem::path& p);
// Written whole and renamed into place, so a reader never sees half a file.
void WriteFile(const std::filesystem::path& p, const std::string& text);

// Polls `pred` until it holds or the ceiling passes; returns its last value.
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds ceiling);

// Starts `args` (argv[0] looked up in PATH unless it has a '/') with stdin from /dev/null and
// stdout/stderr in files (/dev/null when empty). The environment is ours without NEURON_ROOT and
// NEURON_RT_* (a test decides those), plus `env`. Returns -1 and fails the test on error.
pid_t Spawn(std::vector<std::string> args, const std::filesystem::path& out,
            const std::filesystem::path& err, const std::vector<std::string>& env = {});

// Exit code (128 + signal when killed), or nullopt when still running at the ceiling.
std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds ceiling);

// Stops `pid` with SIGTERM (SIGKILL after `ceiling`) and returns its exit code.
std::optional<int> Stop(pid_t pid, std::chrono::milliseconds ceiling);

}  // namespace neuron::testing

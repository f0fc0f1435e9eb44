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

// The N of the last "listening on port N" line in a log (the plugin and the exporter print one
// when they bind port 0), or 0.
int ListeningPort(const std::string& log);

// What /proc says about a process, for leak checks; all zero when the process is gone.
struct ProcessUsage {
  int fds = 0;
  int threads = 0;
  // Of `threads`, those a library named (gRPC names its pools: event_engine, timer_manager,
  // default-executor, ...; ours keep the process's name). gRPC grows those pools when all their
  // threads are busy and keeps them, so a peak of load shows up there without a leak.
  int library_threads = 0;
  int64_t rss_kib = 0;
};
ProcessUsage ReadUsage(pid_t pid);
// The least of `samples` readings taken `gap` apart, field by field: transient fds and threads
// (a scrape or an RPC in flight) are not what a leak looks like.
ProcessUsage QuietUsage(pid_t pid, int samples, std::chrono::milliseconds gap);

}  // namespace neuron::testing

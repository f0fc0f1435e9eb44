#pragma once
// Running real binaries from tests, soaks and benchmarks (neuron-sim, neuron-ls, the plugin,
// the exporter, Prometheus): spawning with output in files, waiting with ceilings
// (docs/architecture.md#timing-in-tests), stopping, and small file helpers. No GoogleTest
// dependency, so benchmarks and the soak link it; tests/support/process.h adds the test-failing
// conveniences on top. Thread-compatible.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace neuron::testing {

std::string ReadFile(const std::filesystem::path& p);
// A counter file's value ("%llu\n", as sysfs prints one), or nullopt when missing or malformed.
std::optional<uint64_t> ReadU64File(const std::filesystem::path& p);
// Written whole and renamed into place, so a reader never sees half a file.
void WriteFile(const std::filesystem::path& p, const std::string& text);

// Polls `pred` until it holds or the ceiling passes; returns its last value.
bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds ceiling);

// Starts `args` (argv[0] looked up in PATH unless it has a '/') with stdin from /dev/null and
// stdout/stderr in files (/dev/null when empty). The environment is ours without NEURON_ROOT and
// NEURON_RT_* (the caller decides those), plus `env`. Returns the PID, or -1 with the reason in
// *error when given.
pid_t StartProcess(std::vector<std::string> args, const std::filesystem::path& out,
                   const std::filesystem::path& err, const std::vector<std::string>& env = {},
                   std::string* error = nullptr);

// Exit code (128 + signal when killed), or nullopt when still running at the ceiling (or `pid`
// is not a child we may wait for: never -1, which would reap any child).
std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds ceiling);

// Stops `pid` with SIGTERM (SIGKILL after `ceiling`) and returns its exit code; nullopt when it
// needed SIGKILL. A `pid` <= 0 (a failed start) is left alone: kill(-1) would signal everything.
std::optional<int> Stop(pid_t pid, std::chrono::milliseconds ceiling);

// What a command printed and how it ended.
struct RunResult {
  int code = -1;  // exit code; -1 when it could not start or outlived its ceiling
  std::string out;
  std::string err;
};
// Runs `args` to completion (killed after `ceiling`), its stdout and stderr captured through
// files in `work` that are removed afterwards. A failed start leaves the reason in `err`.
RunResult RunCommand(const std::filesystem::path& work, std::vector<std::string> args,
                     const std::vector<std::string>& env = {},
                     std::chrono::milliseconds ceiling = std::chrono::seconds(60));

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

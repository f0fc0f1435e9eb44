#pragma once
// Counting a program's system calls with `strace -f -c`, for tests/top/ls_syscalls_test.cc and
// bench/top_bench.cc (neuron-ls's syscall budget, bench/README.md#neuron-ls-cost). No GoogleTest
// dependency.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace neuron::testing {

// `args` under `strace -f -c -o summary` (the program and every child it starts), for
// RunCommand or a wrapper such as `neuron-sim exec` in front of it.
std::vector<std::string> UnderStrace(const std::filesystem::path& summary,
                                     const std::vector<std::string>& args);
// The system calls in a `strace -c` summary file (its `total` row's calls); nullopt when the
// file holds none (strace could not run or trace: the run's stderr says why).
std::optional<int64_t> StraceTotalCalls(const std::filesystem::path& summary);
// Whether strace's stderr says it may not trace here (ptrace denied): a reason to skip, not fail.
bool StraceDenied(const std::string& strace_err);

// A running process's system calls per second, every thread's, over `seconds` (`strace -f -c -p`
// attached for that long; the idle-cost tests, bench/README.md#idle-cost). `per_second` is
// nullopt when strace counted nothing: `strace_err` says why (StraceDenied: skip).
struct AttachedCount {
  std::optional<int64_t> per_second;
  std::string strace_err;
  std::filesystem::path summary;  // strace's table, for a failure's message
};
AttachedCount CountAttached(const std::filesystem::path& work, int pid, int seconds);

}  // namespace neuron::testing

#pragma once
// The idle-cost tests' judgement (bench/README.md#idle-cost): a running agent's system calls per
// second, counted by CountAttached once it is past start-up, printed and held to a ceiling. The
// process is stopped once counted. Header-only, for GoogleTest bodies: it skips the test when
// strace may not attach here, so call it last.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/strace_count.h"
#include "tests/support/subprocess.h"

namespace neuron::testing {

inline void ExpectIdleSyscallsWithin(const std::filesystem::path& work, pid_t pid,
                                     const std::string& what, int64_t ceiling, int seconds) {
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past start-up: first scans and lists
  const AttachedCount count = CountAttached(work, pid, seconds);
  Stop(pid, std::chrono::seconds(20));
  if (!count.per_second && StraceDenied(count.strace_err)) {
    GTEST_SKIP() << "strace cannot attach here (ptrace denied): " << count.strace_err;
  }
  ASSERT_TRUE(count.per_second.has_value()) << "no total in strace's summary: " << count.strace_err;
  std::printf("%s: %lld syscalls/s (ceiling %lld)\n", what.c_str(),
              static_cast<long long>(*count.per_second), static_cast<long long>(ceiling));
  EXPECT_LE(*count.per_second, ceiling) << "strace -c -f summary:\n" << ReadFile(count.summary);
}

}  // namespace neuron::testing

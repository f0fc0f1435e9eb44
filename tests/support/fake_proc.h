#pragma once
// Fake ROOT/proc entries (docs/architecture.md#process-information): core/proc reads ROOT/proc
// when it exists, so a test can give a process any PID, command line, cgroup and open files, as
// the host's /proc would show them. Used by core/proc's tests and the tools' tests above them.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace neuron::testing {

// ROOT/proc/<pid>/{cmdline,stat,cgroup} and fd links.
struct FakeProcess {
  int pid = 0;
  std::vector<std::string> argv;
  std::vector<std::string> open_files;  // fd targets, e.g. "/dev/neuron0"
  std::string cgroup = "0::/user.slice\n";
  uint64_t utime = 0;
  uint64_t stime = 0;
};

inline void AddFakeProcess(const std::filesystem::path& root, const FakeProcess& p) {
  namespace fs = std::filesystem;
  const fs::path dir = root / "proc" / std::to_string(p.pid);
  std::string cmdline;
  for (const std::string& a : p.argv) cmdline += a + '\0';
  WriteFile(dir / "cmdline", cmdline);
  const std::string comm = p.argv.empty() ? "x" : fs::path(p.argv.front()).filename().string();
  WriteFile(dir / "stat", std::to_string(p.pid) + " (" + comm + ") S 1 1 1 0 -1 4194304 0 0 0 0 " +
                              std::to_string(p.utime) + " " + std::to_string(p.stime) +
                              " 0 0 20 0 1 0 12345 1000000 250 18446744073709551615\n");
  WriteFile(dir / "cgroup", p.cgroup);
  fs::create_directories(dir / "fd");
  int fd = 3;
  for (const std::string& target : p.open_files) {
    fs::create_symlink(target, dir / "fd" / std::to_string(fd++));
  }
}

// ROOT/proc/stat with the system's CPU times and `cpus` per-CPU lines.
inline void WriteProcStat(const std::filesystem::path& root, uint64_t user, uint64_t system,
                          uint64_t idle, int cpus) {
  std::string text = "cpu  " + std::to_string(user) + " 0 " + std::to_string(system) + " " +
                     std::to_string(idle) + " 0 0 0 0 0 0\n";
  for (int i = 0; i < cpus; ++i) text += "cpu" + std::to_string(i) + " 1 0 1 1 0 0 0 0 0 0\n";
  WriteFile(root / "proc/stat", text);
}

}  // namespace neuron::testing

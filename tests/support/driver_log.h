#pragma once
// The simulated driver's kernel log as the tests read it: ROOT/dev/kmsg's records
// ("<prio>,<seq>,<usec>,-;<text>", as /dev/kmsg gives them) and the npid_attach / npid_detach
// lines the driver writes for one process (docs/driver-interface.md#open-close-log).
// Header-only; no state.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace neuron::testing {

struct KmsgRecord {
  int priority = -1;
  uint64_t usec = 0;  // CLOCK_MONOTONIC, as the kernel stamps it
  std::string text;
};

inline std::vector<KmsgRecord> ReadKmsg(const std::filesystem::path& file) {
  static const std::regex kLine("([0-9]+),[0-9]+,([0-9]+),-;(.*)");
  std::vector<KmsgRecord> out;
  std::istringstream in(ReadFile(file));
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, kLine)) {
      out.push_back({std::stoi(m[1]), std::stoull(m[2]), m[3]});
    }
  }
  return out;
}

// The driver's npid_attach and npid_detach records that name `pid=<pid>,`, in log order.
inline std::vector<KmsgRecord> DriverLinesOf(const std::filesystem::path& file, pid_t pid) {
  std::vector<KmsgRecord> out;
  const std::string needle = "pid=" + std::to_string(pid) + ",";
  for (KmsgRecord& r : ReadKmsg(file)) {
    if (r.text.find("npid_") != std::string::npos && r.text.find(needle) != std::string::npos) {
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace neuron::testing

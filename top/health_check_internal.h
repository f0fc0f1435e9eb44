#pragma once
// The active check's parts (top/health_check.h): the programs' manifest, the baseline, and the
// children that run one program each. Internal to top/; thread-compatible.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron::top::check {

// One reference program of manifest.json (docs/OPERATIONS.md#active-check).
struct RefProgram {
  std::string name;
  bool exchange = false;  // kind "exchange": one rank per device of a link; else "compute"
  std::filesystem::path neff;
  // Per rank: input tensor name -> file. A compute program has one rank.
  std::vector<std::vector<std::pair<std::string, std::filesystem::path>>> inputs;
  // Output tensor name -> the file of its expected bytes (every rank's are the same).
  std::vector<std::pair<std::string, std::filesystem::path>> expected;
};

struct Manifest {
  std::vector<RefProgram> programs;
  const RefProgram* Find(std::string_view name) const;
  const RefProgram* FirstOf(bool exchange) const;
};

// DIR/manifest.json with every file it names resolved under DIR. NotFound when DIR or the
// manifest does not exist; InvalidArgument naming the field when it is malformed or names a file
// that does not exist.
absl::StatusOr<Manifest> LoadManifest(const std::filesystem::path& dir);

// Execution times a healthy node measured (STATE/health-check/baseline.json): the median of a
// program's executions in the first passing check. A later execution is "slow" when it takes
// more than `factor` times its program's baseline and more than `margin_us` over it (the margin
// keeps microsecond programs from failing on scheduling noise); both are in the file, for an
// operator to tune.
struct Baseline {
  double factor = 3.0;
  int64_t margin_us = 50'000;
  std::map<std::string, int64_t> execute_us;  // by program name
};

std::filesystem::path BaselinePath(const std::filesystem::path& state_dir);
// NotFound when there is none yet; InvalidArgument naming the file when it is malformed.
absl::StatusOr<Baseline> LoadBaseline(const std::filesystem::path& path);
absl::Status SaveBaseline(const std::filesystem::path& path, const Baseline& baseline);
bool IsSlow(const Baseline& b, const std::string& program, int64_t execute_us);

// One child: program `program` as rank `rank` on global logical core `core`.
struct ChildJob {
  std::string program;
  uint32_t rank = 0;
  int core = 0;
  std::string comm_id = {};  // NEURON_RT_ROOT_COMM_ID for an exchange
};

struct ChildOutcome {
  bool passed = false;
  std::string failure = {};  // "mismatch", "error", "timeout", "slow" when not passed
  std::string detail = {};   // what failed, in libnrt's or the comparison's words
  int64_t execute_us = 0;
};

struct SpawnContext {
  std::string self_exe;
  std::string programs;
  std::string libnrt;
  std::chrono::milliseconds timeout{5000};
};

// Runs `jobs` in children, at most `parallel` at once, and returns their outcomes in order.
// Jobs of one group (consecutive jobs sharing a comm_id) start together.
std::vector<ChildOutcome> RunChildren(const SpawnContext& ctx, const std::vector<ChildJob>& jobs,
                                      size_t parallel);

// A free TCP port on 127.0.0.1 for an exchange's rank 0 to listen on ("127.0.0.1:PORT").
absl::StatusOr<std::string> LocalCommId();

}  // namespace neuron::top::check

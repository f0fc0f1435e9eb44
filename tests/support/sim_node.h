#pragma once
// A running simulated node for tests, the soak and benchmarks: `neuron-sim up` over ROOT, the
// processes started on it (workloads, programs under the simulated driver), `neuron-sim ctl`,
// and their logs. Stopping the node (Stop, or the destructor) sends SIGTERM to every process it
// started, newest first, the daemon last. No GoogleTest dependency: failures come back as values
// (Up() is false and Log() says why); a test that wants the daemon's clean exit checked passes
// ExpectCleanExit (tests/support/sim_testing.h) as on_stop. Thread-compatible: one owner.

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "tests/support/subprocess.h"

namespace neuron::testing {

// What a simulated node waits for at most by default (sim.ready, a workload's first step).
inline constexpr std::chrono::seconds kSimReadyCeiling{180};

struct SimNodeOptions {
  std::string sim_bin;          // the neuron-sim binary
  std::filesystem::path root;   // ROOT; created if missing
  std::filesystem::path logs;   // the processes' stdout and stderr; created if missing
  std::string log_name = "up";  // the daemon's are logs/<log_name>.out and .err
  // ROOT/proc an empty directory of its own (made before `up`, which then links the host's
  // nowhere): what reads the node's /proc sees no process, so counts of its work (the syscall
  // tests) are the agent's and not this machine's processes'.
  bool empty_proc = false;
  // How long Up() waits for sim.ready (a ceiling: docs/architecture.md#timing-in-tests). It
  // stops waiting as soon as the daemon has exited.
  std::chrono::milliseconds ready_ceiling = kSimReadyCeiling;
  // Called once with the daemon's exit code (nullopt: it needed SIGKILL) and its log, when the
  // node has stopped a daemon it started.
  std::function<void(std::optional<int> exit_code, const std::string& log)> on_stop{};
};

class SimNode {
 public:
  explicit SimNode(SimNodeOptions options);
  ~SimNode();
  SimNode(const SimNode&) = delete;
  SimNode& operator=(const SimNode&) = delete;

  // Starts `neuron-sim up --instance <instance> --root ROOT <extra...>` and waits until it
  // wrote sim.ready. False when it could not start, exited first, or the ceiling passed.
  bool Up(std::string_view instance, const std::vector<std::string>& extra = {});
  bool ready() const { return ready_; }
  // The daemon's PID; -1 before Up() or when it could not start.
  pid_t pid() const { return pid_; }
  // The daemon's exit code once it has exited (reaped without waiting); nullopt while it runs
  // or before Up().
  std::optional<int> Poll();

  const std::filesystem::path& root() const { return options_.root; }
  RootPaths paths() const { return RootPaths(options_.root); }
  const std::filesystem::path& logs() const { return options_.logs; }
  std::filesystem::path Device(int device) const;          // the device's sysfs directory
  std::filesystem::path Core(int device, int core) const;  // neuron_coreN under it
  // Why Up() failed (if it did), then what the daemon wrote to stderr.
  std::string Log() const;

  // `args` as a command line that runs under the simulated driver
  // (`neuron-sim exec --root ROOT -- args...`).
  std::vector<std::string> UnderDriver(const std::vector<std::string>& args) const;
  // Starts `args` under the simulated driver with output in logs/<name>.out and .err; it is
  // stopped with the node. -1 when it could not start.
  pid_t StartUnderDriver(const std::vector<std::string>& args, const std::string& name);
  // `neuron-sim run --workload <workload> --steps 0` on `cores` (NEURON_RT_VISIBLE_CORES) until
  // stopped with the node, its output in logs/run.<n>.out and .out.err (n counts from 0).
  // Returns its PID once it completed a step, i.e. holds its cores and datastores; -1 when it
  // exited first or did not within the ready ceiling.
  pid_t StartWorkload(const std::string& cores, const std::string& workload = "matmul");
  // `neuron-sim ctl --root ROOT args...` to completion.
  RunResult Ctl(const std::vector<std::string>& args,
                std::chrono::milliseconds ceiling = std::chrono::seconds(60)) const;

  // Stops what the node started, newest first, then the daemon; returns the daemon's exit code
  // (nullopt: none was started, or it needed SIGKILL). Later calls return the same.
  std::optional<int> Stop();

 private:
  SimNodeOptions options_;
  pid_t pid_ = -1;
  bool ready_ = false;
  bool stopped_ = false;
  std::optional<int> exit_code_;
  std::string error_;  // why Up() failed
  std::vector<pid_t> started_;
  int workloads_ = 0;  // numbers their logs: logs/run.<n>.out
};

}  // namespace neuron::testing

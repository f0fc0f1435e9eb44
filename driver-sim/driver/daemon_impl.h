#pragma once
// Internal to the node daemon (daemon.cc: lifecycle and loop; daemon_commands.cc: ctl commands
// and status; daemon_driver.cc: the driver's own behaviour: device state, resets, sysfs writes,
// power rollups). Not part of libneuron_sim's interface.

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/base/unique_fd.h"
#include "core/driver/health_components.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/driver/daemon.h"
#include "driver-sim/driver/device_power.h"
#include "driver-sim/driver/driver_server.h"
#include "driver-sim/driver/ds_mirror.h"
#include "driver-sim/driver/faults.h"
#include "driver-sim/driver/node_info.h"
#include "driver-sim/driver/printk_levels.h"
#include "driver-sim/driver/sim_tree.h"

namespace neuron::sim {

namespace daemon_internal {

using Clock = std::chrono::steady_clock;

// Request id of probe and sysfs resets, NEURON_RESET_REQUEST_ALL
// (docs/driver-interface.md#reset-and-state).
inline constexpr uint32_t kResetRequestAll = 0xffffffffu;
// How often the datastores are mirrored into sysfs (docs/architecture.md#daemon-is-the-driver: at
// most every 100 ms).
inline constexpr std::chrono::milliseconds kMirrorPeriod{80};

std::shared_ptr<spdlog::logger> Logger();
int64_t EpochMs();

}  // namespace daemon_internal

class NodeDaemon::Impl final : private DriverHost {
 public:
  using Clock = daemon_internal::Clock;

  explicit Impl(DaemonOptions options);

  absl::Status Start();
  absl::Status Run();
  absl::Status Shutdown();
  bool started() const { return started_; }

 private:
  struct Device {
    bool present = true;
    DeviceState state = DeviceState::kReady;
    bool reset_pending = false;
    bool reset_fail = false;
    Clock::time_point reset_done_at;
    PowerSampler power;  // samples only while READY
    // Driver 2.30's health files, where the node has them (SimTree::HasHealthComponents): the
    // heartbeat's count, whether ctl stalled it (until resumed or a reset to READY), and the
    // components unhealthy_components lists.
    uint64_t heartbeat = 0;
    bool heartbeat_stalled = false;
    HealthComponents unhealthy;
  };

  // Start steps (daemon.cc).
  absl::Status MakeDir(const std::filesystem::path& dir);
  absl::Status TakeLock();
  absl::Status LinkProc();
  absl::Status ClearStale();
  absl::Status OpenEventFds();

  // The loop (daemon.cc).
  void AcceptClients();
  void ServeClient(size_t index, int16_t revents);
  void ProcessDue(Clock::time_point now);
  void ArmTimer();

  // ctl verbs (daemon_commands.cc): one row per verb, its grammar (CtlVerbs) beside its handler.
  struct VerbRow {
    CtlVerb verb;
    CtlReply (*handle)(Impl& daemon, const CtlRequest& req);
  };
  static const std::vector<VerbRow>& VerbRows();
  friend const std::vector<CtlVerb>& CtlVerbs();
  CtlReply Handle(const CtlRequest& req);
  absl::Status CheckDevice(int device, bool must_be_present) const;
  CtlReply Unplug(int d);
  CtlReply Plug(int d);
  CtlReply Inject(const CtlRequest& req);
  CtlReply InjectCorrected(int d, CorrectedEcc kind, uint64_t n);
  // `what` leads the reply's note: "corrected: " for inject's corrected ECC kinds.
  CtlReply Raise(int d, std::string_view counter, uint64_t n, std::string_view what = "");
  std::string MarkUnhealthy(int d, HealthComponent c);
  absl::Status CheckHealthFiles(int d) const;
  CtlReply Heartbeat(int d, bool stall);
  CtlReply SetComponents(int d, HealthComponents components);
  // `file` relative to device d's directory, as replies name files.
  std::string DeviceRelative(int d, const std::filesystem::path& file) const;
  CtlReply Reset(int d, bool fail);
  CtlReply LinkDown(int a, int b);
  CtlReply Efa(const std::string& name, bool up);
  CtlReply ClearFault(uint64_t id);
  std::string Status() const;
  std::string HealthStatus() const;
  std::string ProcessStatus() const;

  // Driver behaviour (daemon_driver.cc).
  void StartReset(int d, bool fail);
  void CompleteReset(int d);
  void SetState(int d, DeviceState s);
  void WatchDevice(int d);
  void UnwatchDevice(int d);
  void HandleInotify();
  void OnResetWrite(int d);
  void OnNotifyDelayWrite(int d);
  void WriteNotifyDelay(int d);
  void RollUpPower(Clock::time_point now);
  void BeatHeartbeats();
  void WriteUnhealthy(int d);
  void Kmsg(int priority, const std::string& text) override;  // also DriverHost's
  void LogProbeReset(int device);
  void SaveFaults();
  // DriverHost: what the simulated driver's device ABI asks of the daemon.
  std::optional<DeviceState> StateOf(int device) const override;

  DaemonOptions opts_;
  RootPaths paths_;
  FaultBook faults_;
  std::shared_ptr<spdlog::logger> log_;
  // The "neuron" major this node holds while it runs (sim_tree.h).
  std::optional<NeuronMajorLease> major_;
  std::unique_ptr<SimTree> tree_;
  std::unique_ptr<DatastoreMirror> mirror_;  // reads the datastore slots, writes through tree_
  std::unique_ptr<DriverServer> driver_;     // the device ABI; uses mirror_
  Clock::time_point next_mirror_;
  NodeInfo node_;
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<CtlConnection>> clients_;
  std::map<int, std::pair<int, bool>> watches_;   // inotify wd -> (device, is the info/ dir)
  std::map<int, std::array<int, 2>> device_wds_;  // device -> its two wds
  // One global flag for all devices (docs/driver-interface.md#device-files)
  std::string notify_delay_ = "-1";

  std::vector<std::filesystem::path> created_dirs_;
  UniqueFd lock_fd_, listen_fd_, signal_fd_, timer_fd_, inotify_fd_;
  sigset_t old_mask_{};
  bool mask_changed_ = false;
  bool started_ = false;
  bool proc_link_ = false;  // ROOT/proc is our link to this machine's /proc
  bool stop_ = false;
  std::chrono::milliseconds power_period_{60000};
  Clock::time_point next_power_;
  int64_t last_minute_ = 0;
  // Never on a node without the heartbeat file, so its timer does not wake the loop for nothing.
  Clock::time_point next_heartbeat_ = Clock::time_point::max();
};

}  // namespace neuron::sim

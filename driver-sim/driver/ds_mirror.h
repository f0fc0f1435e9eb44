#pragma once
// The node daemon's view of the runtime processes' datastores
// (docs/architecture.md#daemon-is-the-driver: the daemon is the driver). The simulated driver
// (driver/driver_server.h) owns the slots; it tells the mirror when a process claims one
// (ACQUIRE_NEURON_DS with pid 0) and when the slot is released (the process's last close,
// RELEASE_NEURON_DS, or its death). Every Poll() (the daemon calls it at most 100 ms apart), for
// each claimed slot:
//   - mirrors its live memory counters into sysfs, as the driver's allocator updates them on
//     every allocation and free: per physical core device_mem/<category> and device_mem/ total,
//     per device host_mem/<category>; an increase is one inc(delta), a decrease one dec(delta);
//   - adds the growth of its EFA traffic extension (nds::kEfaTraffic*) to the EFA's
//     ports/1/hw_counters;
//   - measures the growth of TIME_IN_USE per device, for the power model.
// Release() folds the slot into sysfs as the driver's release does
// (docs/driver-interface.md#live-vs-exit): status counters, model_load_count, inference_count,
// flop_count and nc_time_in_use, each one inc of that process's total, and frees its memory from
// sysfs, before the driver zeroes it. Counter sets are per physical core: set i is mirrored and
// folded into neuron_core<i> at every LNC, as the driver does.
// driver-sim/README.md#the-daemon-and-the-datastores documents the mapping, the LNC rule and the
// power model.
//
// Files are written only when a value changed, through SimTree (whole files, renamed into
// place). Devices that are unplugged are skipped; what a process would have written there is
// lost, as on hardware.
//
// Not thread-safe: the node daemon's loop owns it, as it owns the SimTree.

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/device_power.h"
#include "driver-sim/driver/sim_tree.h"

namespace spdlog {
class logger;
}

namespace neuron::sim {

// Device memory categories the datastore carries, by NC index 22-26 (MEM_USAGE_*_DEVICE), and
// the per-core sysfs category each is mirrored into.
inline constexpr std::array<std::string_view, 5> kDeviceMemMirror{
    "model_code", "tensors", "constants", "model_shared_scratchpad", "runtime_memory"};
// Host categories by ND index 6-10 (MEM_USAGE_*_HOST). SCRATCHPAD_HOST has no category of its
// own in the driver's table; the simulator counts it as application memory.
inline constexpr std::array<std::string_view, 5> kHostMemMirror{
    "dma_buffers", "tensors", "constants", "application_memory", "application_memory"};

// One live runtime process on one device, for `ctl status`.
struct DatastoreProcess {
  int device = -1;
  pid_t pid = 0;
  std::string tag;            // NEURON_PROCESS_TAG, else the short tag, else the PID
  std::vector<int> slots;     // logical core slots within the device with any counter or memory
  uint64_t device_bytes = 0;  // device memory the process holds on this device
};

// Memory a process holds through the driver, from its datastore (GET_ALL_APPS_INFO).
struct DatastoreMemory {
  uint64_t host_bytes = 0;
  uint64_t device_bytes = 0;
};

class DatastoreMirror {
 public:
  using Clock = std::chrono::steady_clock;

  DatastoreMirror(SimTree* tree, const InstanceSpec& spec, int lnc,
                  std::shared_ptr<spdlog::logger> log);
  ~DatastoreMirror();
  DatastoreMirror(const DatastoreMirror&) = delete;
  DatastoreMirror& operator=(const DatastoreMirror&) = delete;

  // `pid` claimed datastore slot `slot` of `device`, whose nds::kSize bytes are at `base` (the
  // driver's memory; valid until Release).
  void Attach(int device, int slot, pid_t pid, const uint8_t* base);
  // The slot is released: folded into sysfs and forgotten. The driver zeroes it afterwards.
  void Release(int device, int slot);
  DatastoreMemory MemoryOf(int device, int slot) const;

  // One pass over the claimed slots (see the class comment).
  void Poll(Clock::time_point now);

  // The device came back (plug): its sysfs is in post-probe state again, so what was mirrored
  // there is forgotten and the next Poll() adds the live memory anew.
  void ForgetDevice(int device);

  // The busy share of `device` since the previous call (or since start), and starts a new window.
  // Busy time arrives when an execution ends; what exceeds a poll interval carries into the
  // next ones, so a long execution spreads over the time it took rather than spiking.
  BusyWindow TakeBusyWindow(int device);

  // Live (not yet folded) datastores, ascending (device, pid).
  std::vector<DatastoreProcess> Processes() const;

 private:
  struct Entry;

  // Brings sysfs in line with the entry's current counters; `release` mirrors zero memory.
  void Sync(Entry& e, bool release);
  void Fold(Entry& e);
  void Apply(const std::filesystem::path& dir, int64_t delta);

  SimTree* tree_;
  const InstanceSpec& spec_;
  int lnc_;
  int sets_per_device_;  // per-physical-core counter sets read: min(physical cores, 16)
  int physical_cores_;
  std::shared_ptr<spdlog::logger> log_;
  std::map<std::pair<int, int>, std::unique_ptr<Entry>> entries_;  // by (device, slot)

  struct DeviceBusy {
    uint64_t pending_us = 0;  // busy time reported but not yet credited to a poll interval
    double weighted = 0;      // sum of share x seconds in the window
    double seconds = 0;
    double min = 1, max = 0;
  };
  std::vector<DeviceBusy> busy_;
  Clock::time_point last_poll_{};
  bool polled_ = false;
};

// Global logical cores whose lock file ROOT/run/neuron/cores/<core> is held, by holder PID, from
// /proc/locks (the kernel's list of flock holders; docs/architecture.md#core-reservation). Empty
// when unreadable.
std::map<pid_t, std::vector<int>> CoreLockHolders(const RootPaths& paths);

}  // namespace neuron::sim

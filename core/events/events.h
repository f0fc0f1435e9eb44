#pragma once
// Node events: Neuron devices and EFA interfaces appearing and vanishing, device state and EFA
// port state changes, and NEURON_HW_ERR= kernel log records (docs/architecture.md#core,
// docs/architecture.md#discovery, #health).
//
// Sources, watched by one thread that polls all of them:
//   - presence: in directory mode, inotify on ROOT/sys/class/neuron_device,
//     ROOT/sys/devices/virtual/neuron_device and ROOT/sys/class/infiniband (watches are re-armed
//     when those directories vanish and return), plus a periodic rescan as a safety net, since
//     the plain tree has no uevents (D10, driver-sim/README.md#deviations); in udev mode, a udev
//     monitor on the neuron_device and infiniband subsystems, plus the same periodic rescan
//     through libudev.
//   - state: the `reset` file and ports/1/state have no change uevent and no sysfs_notify
//     (docs/driver-interface.md#device-nodes). A device's state moves only by a probe or sysfs
//     reset, which the driver's reset thread logs: while the kernel log is read, its reset
//     records are the device state's events (kDeviceReset) and the `reset` files are read only
//     every `device_state_recheck`, the safety net under a lost record; without the log they are
//     read every `state_poll`. The EFA port state logs nothing, so it is read every `state_poll`.
//   - kernel log: KmsgReader on `kmsg_path`, from the end of the log (docs/architecture.md#health):
//     NEURON_HW_ERR records and the reset thread's records. A regular file (the simulator's) is
//     watched with inotify, a device (the real /dev/kmsg) polled for input: neither costs a read
//     while nothing is logged.
// Start() takes a silent snapshot of what is present; events report changes after it, so a
// consumer scans its Inventory first and then applies events (or simply rescans on each).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/driver/sysfs_names.h"
#include "core/events/kmsg.h"

namespace neuron {

enum class EventKind {
  kDeviceAdded,
  kDeviceRemoved,
  kDeviceStateChanged,
  kEfaAdded,
  kEfaRemoved,
  kEfaPortStateChanged,
  kHardwareError,
  kDeviceReset,  // the driver logged a step of a device reset; the consumer reads the state
};
std::string_view EventKindName(EventKind kind);

struct Event {
  EventKind kind = EventKind::kDeviceAdded;
  // Device events; for kHardwareError the record's nd-id when it has one, else -1.
  int device = -1;
  std::string efa;                        // EFA events: the RDMA device name
  std::optional<DeviceState> state;       // kDeviceAdded, kDeviceStateChanged: the new state
  std::string port_state;                 // kEfaAdded, kEfaPortStateChanged: "ACTIVE", "DOWN", ...
  std::optional<HwErrorRecord> hw_error;  // kHardwareError
  std::optional<ResetStep> reset;         // kDeviceReset
  std::chrono::steady_clock::time_point time;  // when the watcher noticed the change
};

enum class WatchMode { kDirectory, kUdev };

struct EventsOptions {
  WatchMode mode = WatchMode::kDirectory;
  // How often EFA port states are read (and device states, while the kernel log cannot be):
  // bounds how late such a change is seen.
  std::chrono::milliseconds state_poll{1000};
  // While the kernel log is read: how often every device's state is read anyway.
  std::chrono::milliseconds device_state_recheck{10000};
  // Full presence rescan, the safety net under inotify / the udev monitor (an overflowed inotify
  // queue already forces one at once).
  std::chrono::milliseconds rescan{10000};
  // Kernel log to tail; empty means RootPaths::Kmsg(). Set `watch_kmsg` false to skip it.
  std::filesystem::path kmsg_path;
  bool watch_kmsg = true;
};

// Watches the node and delivers Events to subscribers.
//
// Thread-safety: Subscribe/Unsubscribe may be called from any thread, also from inside a
// callback. Callbacks run on the Events thread, one at a time, in the order events were seen;
// they must not block for long (they delay every later event) and must not call Stop().
// After Unsubscribe returns (when called from another thread) the callback is not running and
// will not run again. Start/Stop belong to the owner.
class Events {
 public:
  using Callback = std::function<void(const Event&)>;
  using SubscriptionId = uint64_t;

  Events(const RootPaths& root, EventsOptions options);
  ~Events();  // Stop()s
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;

  SubscriptionId Subscribe(Callback callback);
  void Unsubscribe(SubscriptionId id);

  // Opens the sources, snapshots the current state and starts the thread. Fails if the udev
  // monitor cannot be created (udev mode) or inotify is unavailable (directory mode, e.g.
  // "raise fs.inotify.max_user_instances"). A missing kernel log is logged, not fatal.
  absl::Status Start();
  // Joins the thread; no callback runs after it returns. Idempotent.
  void Stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron

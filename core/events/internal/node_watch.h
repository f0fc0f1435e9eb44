#pragma once
#if !defined(NEURON_ROOM_EVENTS)
#error "core/events/internal/ is private to core/events: include its public headers instead"
#endif
// Private to core/events/events.cc: what is present on the node and how to notice changes, for the
// two watch modes. Directory mode lists ROOT/sys and keeps inotify watches on the directories
// where devices appear and vanish, re-arming them when those directories themselves vanish and
// return; udev mode enumerates through libudev and listens on a udev monitor.
// Not thread-safe: owned by the Events thread.

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/base/udev_util.h"
#include "core/base/unique_fd.h"
#include "core/driver/sysfs_names.h"
#include "core/events/events.h"

namespace neuron::events_internal {

// What is present right now: device index -> state, EFA name -> port state.
struct Presence {
  std::map<int, std::optional<DeviceState>> devices;
  std::map<std::string, std::string> efas;
};

// An add or remove the udev monitor reported.
struct Uevent {
  bool add = false;
  bool neuron = false;  // neuron_device; else infiniband
  int index = -1;       // neuron devices
  std::string name;     // sysname
  std::string syspath;
};

class NodeWatch {
 public:
  NodeWatch(RootPaths root, WatchMode mode);
  ~NodeWatch();
  NodeWatch(const NodeWatch&) = delete;
  NodeWatch& operator=(const NodeWatch&) = delete;

  // Creates inotify (always: it also serves a regular-file kernel log) and, in udev mode, the
  // monitor. Errors say what to do about them.
  absl::Status Open();
  void Close();

  int inotify_fd() const { return inotify_fd_.get(); }
  int monitor_fd() const;

  // Also watch the directory holding a regular-file kernel log (the simulator's).
  void WatchKmsgFile(const std::filesystem::path& kmsg);
  // Reads pending inotify events. `presence` is set when devices may have come or gone, `kmsg`
  // when the watched kernel log file changed.
  void DrainInotify(bool* presence, bool* kmsg);
  std::vector<Uevent> DrainMonitor();

  // What is present now. A device or EFA that `known` holds keeps the state it has there: the
  // safety-net rescan looks for arrivals and departures, and reading every state each time would
  // cost more than the state polls it backs up.
  Presence ReadPresence(const Presence& known = {});
  std::optional<DeviceState> ReadDeviceState(int index);
  std::optional<std::string> ReadPortState(const std::string& efa);
  // udev mode: whether an infiniband device is an EFA (its PCI function's driver is "efa").
  bool IsEfaSyspath(const std::string& syspath);

 private:
  void ArmWatches();
  bool ServesPresence(const std::filesystem::path& dir) const;

  RootPaths root_;
  WatchMode mode_;
  UniqueFd inotify_fd_;
  std::map<std::filesystem::path, int> target_wd_;  // presence dirs -> wd, or -1 when unarmed
  std::map<int, std::filesystem::path> wd_path_;
  std::filesystem::path kmsg_;  // empty unless WatchKmsgFile
  udev_util::Udev udev_;
  udev_util::UdevMonitor monitor_;
};

}  // namespace neuron::events_internal

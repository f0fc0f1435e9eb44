#pragma once
// What the node tells a runtime process while it runs (docs/architecture.md#faults,
// docs/runtime.md#hardware-errors to #faults): pending faults from ROOT/run/neuron/faults.json
// (re-read only when its inode, size or mtime changed), the state of each device the process uses
// (its sysfs `reset` file) and device resets (`reset_req_count` of its first core). A background
// thread polls every 50 ms; executions read only atomics, so the hot path makes no system call.
// Requests to the node daemon (printk of NEURON_HW_ERR records, clear-fault) go out on the same
// thread, never on an execution's.
//
// Thread-safety: all methods are thread-safe. The listener runs on the watch thread (or on the
// caller of RefreshNow).

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/faults.h"

namespace neuron::nrt {

class FaultWatch {
 public:
  // (device, ready now, a reset completed since the last call): called on every change.
  using Listener = std::function<void(int device, bool ready, bool reset_completed)>;

  FaultWatch(RootPaths root, std::vector<int> devices, int node_devices, Listener listener);
  ~FaultWatch();  // stops the thread, sending what is queued first
  FaultWatch(const FaultWatch&) = delete;
  FaultWatch& operator=(const FaultWatch&) = delete;

  void Start();
  void Stop();
  // One poll now, on the caller's thread (nrt_init; tests that just wrote faults.json).
  void RefreshNow();
  void set_poll_interval_ms(int ms) { poll_ms_.store(ms); }

  bool DeviceReady(int device) const {
    return ready_[static_cast<size_t>(device)].load(std::memory_order_acquire);
  }
  bool MayHaveFault(int device) const {
    return has_fault_[static_cast<size_t>(device)].load(std::memory_order_acquire);
  }
  // The oldest pending execution fault (not link-down) for a core of the device (`core` as
  // faults.json numbers cores: logical within the device) that this process has not acted on;
  // marks it acted on (one-shot per process) and queues `ctl clear-fault --id`.
  std::optional<sim::PendingFault> TakeFault(int device, int device_core);
  // Pending link-down faults as unordered device pairs (a < b).
  std::vector<std::pair<int, int>> DownLinks() const;
  bool AnyLinkDown() const { return any_link_down_.load(std::memory_order_acquire); }

  // The EFAs (catalog index, name) this process's collectives leave the node through; each poll
  // reads whether their port is ACTIVE (`ctl efa-down` removes the interface). Call before
  // Start().
  void WatchEfas(std::vector<std::pair<int, std::string>> efas);
  // False while the EFA's port is not ACTIVE; true for EFAs not watched.
  bool EfaUp(int efa) const;

  // Queued for the daemon (failures are ignored: there may be no daemon, e.g. in unit tests).
  void Printk(int level, std::string text);

 private:
  struct Request {
    bool printk = false;
    int level = 3;
    std::string text;
    uint64_t fault_id = 0;
  };
  void Run();
  void Poll();
  void PollFaults();
  void PollDevice(int device);
  void PollEfas();
  void Flush();
  void RecomputeFlags();  // under mu_

  RootPaths root_;
  std::vector<int> devices_;
  Listener listener_;
  std::unique_ptr<std::atomic<bool>[]> ready_;
  std::unique_ptr<std::atomic<bool>[]> has_fault_;
  std::atomic<int> poll_ms_{50};
  std::atomic<bool> any_link_down_{false};
  std::vector<std::pair<int, std::string>> efas_;  // watched (index, name)
  std::unique_ptr<std::atomic<bool>[]> efa_down_;  // by catalog index
  size_t efa_slots_ = 0;

  std::mutex poll_mu_;  // one Poll at a time
  struct DeviceSeen {
    bool known = false;
    bool ready = false;
    std::optional<uint64_t> reset_count;
  };
  std::vector<DeviceSeen> seen_;  // by device; under poll_mu_
  struct FileId {
    uint64_t ino = 0, size = 0;
    int64_t mtime_ns = 0;
    bool exists = false;
    bool operator==(const FileId&) const = default;
  };
  std::optional<FileId> faults_file_;  // under poll_mu_

  mutable std::mutex mu_;
  std::vector<sim::PendingFault> faults_;         // pending, from faults.json
  std::set<std::pair<uint64_t, int64_t>> acted_;  // (id, time_ms) one-shot memory
  std::deque<Request> requests_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace neuron::nrt

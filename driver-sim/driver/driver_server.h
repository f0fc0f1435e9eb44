#pragma once
// The simulated driver's device ABI, daemon side: answers the interposer (preload_*.c) over
// ROOT/run/neuron/driver.sock as docs/driver-interface.md "The device node" says the kernel
// driver answers a runtime and a monitor. It owns what the driver owns: per device, the process
// attach table (16 slots), the open count that gates sysfs reset, and the 16 datastore slots
// of 256 KiB (one memfd per device; monitors get a read-only reopen of it).
//
// The node daemon's loop drives it (AppendPollFds / Serve) and tells it about device state
// changes. A process's last close of a device costs it the driver's ~10 ms flush sleep: its reply
// waits on a timer of ours, so the loop goes on serving everyone else meanwhile; it tells the
// DatastoreMirror when a slot is claimed and when it is released (the mirror folds the counters
// into sysfs before the slot is zeroed, docs/architecture.md#daemon-is-the-driver).
//
// Not thread-safe: the daemon's loop owns it.

#include <poll.h>
#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/ds_mirror.h"
#include "driver-sim/driver/sim_tree.h"

namespace spdlog {
class logger;
}

struct nsim_request;
struct nsim_reply;

namespace neuron::sim {

// What the device ABI needs from the rest of the node daemon.
class DriverHost {
 public:
  virtual ~DriverHost() = default;
  // nullopt while the device is unplugged.
  virtual std::optional<DeviceState> StateOf(int device) const = 0;
  // One kernel-log record at `priority` (KERN_ERR 3, KERN_INFO 6): NEURON_IOCTL_PRINTK's message,
  // the driver's own lines (npid_attach, npid_detach, ncdev_open's refusals).
  virtual void Kmsg(int priority, const std::string& text) = 0;
};

class DriverServer {
 public:
  // Listens on ROOT/run/neuron/driver.sock (mode 0666, as AWS's udev rule makes the device
  // nodes) and makes every device's datastore memory.
  static absl::StatusOr<std::unique_ptr<DriverServer>> Start(const RootPaths& paths,
                                                             const InstanceSpec& spec, int lnc,
                                                             DriverHost* host,
                                                             DatastoreMirror* mirror,
                                                             std::shared_ptr<spdlog::logger> log);
  ~DriverServer();  // closes every connection and removes the socket
  DriverServer(const DriverServer&) = delete;
  DriverServer& operator=(const DriverServer&) = delete;

  // The listening socket, the flush timer, then one entry per connection; Serve takes them back
  // with revents.
  void AppendPollFds(std::vector<pollfd>* fds) const;
  void Serve(std::span<const pollfd> fds);

  // A device's state changed (reset started or finished): waiting opens are answered.
  void OnStateChange(int device);
  // Unplug forgets the device (its slots' counters are lost, as on hardware); plug brings it
  // back in post-probe state with fresh, zeroed datastore memory.
  void OnUnplug(int device);
  void OnPlug(int device);

  // Normal opens still referenced (fds or mappings): sysfs reset is ignored while > 0.
  int OpenCount(int device) const;
  // Processes attached to the device (GET_ALL_APPS_INFO's list), ascending.
  std::vector<pid_t> Attached(int device) const;

 private:
  struct Client;
  struct Device;
  DriverServer(RootPaths paths, const InstanceSpec& spec, int lnc, DriverHost* host,
               DatastoreMirror* mirror, std::shared_ptr<spdlog::logger> log);

  absl::Status MakeMemory(int device);
  void FreeMemory(int device);
  void Accept();
  // False when the connection ended (the process is gone or exec'd).
  bool Receive(Client& c);
  void Drop(Client& c);
  // Handles one request; false when it must wait (the device is in RESET). `*send_fd` is a device
  // memfd to pass with the reply: borrowed, the device keeps owning it (SCM_RIGHTS sends a copy).
  bool Handle(Client& c, const nsim_request& rq, nsim_reply* rp, int* send_fd);
  void Reply(Client& c, const nsim_reply& rp, int send_fd);

  int Open(Client& c, const nsim_request& rq, bool* wait);
  // A flush that detaches the process sleeps first (returns true: the reply waits for
  // FinishFlushes); any other is done at once.
  bool DelayFlush(Client& c, int device);
  void FinishFlushes();
  void ArmFlushTimer();
  void Flush(Client& c, int device);
  void Release(Client& c, int device);
  int Ioctl(Client& c, const nsim_request& rq, nsim_reply* rp, bool* wait);
  int AppsInfo(int device, const nsim_request& rq, nsim_reply* rp);
  int AcquireDs(Client& c, int device, const nsim_request& rq, nsim_reply* rp);
  int ReleaseDs(Client& c, int device, const nsim_request& rq);
  int BdfExt(const nsim_request& rq, nsim_reply* rp) const;
  int Printk(const nsim_request& rq);
  int Memfd(int device, const nsim_request& rq, nsim_reply* rp, int* send_fd);

  // The driver's attach table: one of 16 slots per process, logged as npid_attach.
  void Attach(int device, pid_t pid);
  void Detach(int device, pid_t pid);
  void RefuseOpen(int device, pid_t pid);
  void ReleaseSlot(int device, int slot);
  std::optional<int> SlotOf(int device, pid_t pid) const;
  // Physical cores 0-3 of `device` whose reservation `pid` holds, as GET_ALL_APPS_INFO's map.
  uint8_t CoreLockMap(int device, pid_t pid);
  void FillAppInfo(int device, pid_t pid, uint16_t flags, uint8_t* out);
  bool Valid(int device) const;

  RootPaths paths_;
  const InstanceSpec& spec_;
  int lnc_;
  DriverHost* host_;
  DatastoreMirror* mirror_;
  std::shared_ptr<spdlog::logger> log_;
  UniqueFd listen_fd_;
  UniqueFd flush_timer_;  // timerfd: the earliest delayed flush reply is due
  std::vector<Device> devices_;
  std::vector<std::unique_ptr<Client>> clients_;
  uint64_t clear_seq_ = 0;
  std::map<pid_t, std::vector<int>> lock_holders_;
  std::chrono::steady_clock::time_point holders_read_{};
};

}  // namespace neuron::sim

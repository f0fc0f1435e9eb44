// DriverServer, the driver's open, flush and release (driver-sim/README.md#device-node): the
// attach table of 16 processes per device with the driver's kernel-log lines
// (docs/driver-interface.md#open-close-log), and the 10 ms sleep of a process's last flush, which
// delays only that process's reply (a timer of ours), never the daemon's loop.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "driver-sim/driver/driver_server.h"
#include "driver-sim/driver/driver_server_internal.h"

namespace neuron::sim {

using driver_server_internal::kFlushSleep;
using driver_server_internal::kSlots;

int DriverServer::Open(Client& c, const nsim_request& rq, bool* wait) {
  if (rq.mode == NSIM_MODE_FREE) return 0;  // no attach, no open count
  const DeviceState state = *host_->StateOf(rq.device);
  if (state == DeviceState::kReset) {  // the driver spins until the reset is over
    *wait = true;
    return 0;
  }
  if (state == DeviceState::kInvalid) {
    host_->Kmsg(kKernErr, fmt::format("neuron:ncdev_open: nd{} is in an invalid state", rq.device));
    return EINVAL;
  }
  Device& dev = devices_[static_cast<size_t>(rq.device)];
  if (!dev.attached.contains(c.pid) &&
      static_cast<int>(dev.attached.size()) >= NEURON_ABI_MAX_PROCESSES) {
    RefuseOpen(rq.device, c.pid);
    return EBUSY;
  }
  Attach(rq.device, c.pid);
  dev.open_count++;
  c.fds[rq.device]++;
  c.opens[rq.device]++;
  return 0;
}

bool DriverServer::DelayFlush(Client& c, int device) {
  if (!c.fds.contains(device)) return false;
  const auto& attached = devices_[static_cast<size_t>(device)].attached;
  const auto it = attached.find(c.pid);
  if (it == attached.end() || it->second.fds != 1) return false;
  c.closing = Client::Closing{device, std::chrono::steady_clock::now() + kFlushSleep};
  ArmFlushTimer();
  return true;
}

void DriverServer::FinishFlushes() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& c : clients_) {
    if (!c->closing || c->closing->due > now) continue;
    const int device = c->closing->device;
    c->closing.reset();
    if (Valid(device) && host_->StateOf(device)) Flush(*c, device);  // unplugged: nothing left
    Reply(*c, nsim_reply{}, -1);
  }
  ArmFlushTimer();
}

// Arms the timer for the earliest sleeping flush, or disarms it.
void DriverServer::ArmFlushTimer() {
  std::optional<std::chrono::steady_clock::time_point> next;
  for (const auto& c : clients_) {
    if (c->closing && (!next || c->closing->due < *next)) next = c->closing->due;
  }
  itimerspec spec{};
  if (next) {
    const auto left =
        std::max(std::chrono::nanoseconds(1), *next - std::chrono::steady_clock::now());
    spec.it_value.tv_sec = static_cast<time_t>(left.count() / 1000000000);
    spec.it_value.tv_nsec = static_cast<decltype(spec.it_value.tv_nsec)>(left.count() % 1000000000);
  }
  if (timerfd_settime(flush_timer_.get(), 0, &spec, nullptr) != 0) {
    log_->warn("flush timer: {}", std::strerror(errno));
  }
}

// The close of one normal fd. The process's last one detaches it, which releases its
// datastore (folded into sysfs, then zeroed).
void DriverServer::Flush(Client& c, int device) {
  auto own = c.fds.find(device);
  if (own == c.fds.end() || !Valid(device)) return;
  if (--own->second == 0) c.fds.erase(own);
  auto& attached = devices_[static_cast<size_t>(device)].attached;
  if (auto it = attached.find(c.pid); it != attached.end() && --it->second.fds <= 0) {
    Detach(device, c.pid);
  }
}

void DriverServer::Release(Client& c, int device) {
  auto own = c.opens.find(device);
  if (own == c.opens.end() || !Valid(device)) return;
  if (--own->second == 0) c.opens.erase(own);
  Device& dev = devices_[static_cast<size_t>(device)];
  dev.open_count = std::max(0, dev.open_count - 1);
  if (dev.open_count > 0) return;
  // The device's last normal open is gone: every slot is zeroed.
  for (int s = 0; s < kSlots; ++s) {
    if (dev.slots[static_cast<size_t>(s)].pid != 0) ReleaseSlot(device, s);
  }
}

// The first normal open of a process takes the lowest free entry of the table, and says so; the
// same process's later opens only count (neuron_pid.c npid_attach).
void DriverServer::Attach(int device, pid_t pid) {
  auto& attached = devices_[static_cast<size_t>(device)].attached;
  if (auto it = attached.find(pid); it != attached.end()) {
    it->second.fds++;
    return;
  }
  int slot = 0;
  while (std::any_of(attached.begin(), attached.end(),
                     [slot](const auto& a) { return a.second.slot == slot; })) {
    ++slot;
  }
  attached[pid] = {1, slot};
  host_->Kmsg(kKernInfo,
              fmt::format("neuron:npid_attach: neuron:npid_attach: pid={}, slot={}", pid, slot));
}

// The process's last fd is gone (neuron_pid.c npid_detach): its entry goes, with its datastore.
void DriverServer::Detach(int device, pid_t pid) {
  auto& attached = devices_[static_cast<size_t>(device)].attached;
  if (auto it = attached.find(pid); it != attached.end()) {
    host_->Kmsg(kKernInfo, fmt::format("neuron:npid_detach: neuron:npid_detach: pid={}, slot={}",
                                       pid, it->second.slot));
    attached.erase(it);
  }
  if (std::optional<int> slot = SlotOf(device, pid)) ReleaseSlot(device, *slot);
}

// The 17th process: ncdev_open's error line, then npid_print_usage's table.
void DriverServer::RefuseOpen(int device, pid_t pid) {
  host_->Kmsg(kKernErr, fmt::format("neuron:ncdev_open: nd{}: pid {} failed to open", device, pid));
  const std::string usage = "neuron:npid_print_usage: ";
  host_->Kmsg(kKernInfo, fmt::format("{}neuron: nd{} usage:", usage, device));
  host_->Kmsg(kKernInfo, fmt::format("{}current pid: {}", usage, pid));
  std::vector<std::pair<int, pid_t>> by_slot;
  for (const auto& [p, a] : devices_[static_cast<size_t>(device)].attached) {
    by_slot.emplace_back(a.slot, p);
  }
  std::sort(by_slot.begin(), by_slot.end());
  for (const auto& [slot, p] : by_slot) {
    const int fds = devices_[static_cast<size_t>(device)].attached.at(p).fds;
    host_->Kmsg(kKernInfo, fmt::format("{}pid {} open count {}", usage, p, fds));
  }
}

}  // namespace neuron::sim

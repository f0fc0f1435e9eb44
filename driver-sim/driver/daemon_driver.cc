// The node daemon's driver behaviour, what the kernel driver does on its own or in answer to the
// hardware and to users' sysfs writes: device state, probe and reset sequences, the inotify
// watches on writable sysfs files, power rollups, driver 2.30's health files and the kernel log.
// The ctl commands that trigger some of it are in daemon_commands.cc; the device's power figures in
// device_power.cc.

#include <fmt/format.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/base/file_io.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/daemon_impl.h"

namespace neuron::sim {
namespace {

using daemon_internal::Clock;
using daemon_internal::EpochMs;
using daemon_internal::kResetRequestAll;

}  // namespace

void NodeDaemon::Impl::Kmsg(int priority, const std::string& text) {
  if (absl::Status s = tree_->AppendKmsg(priority, text); !s.ok()) {
    log_->warn("kmsg: {}", std::string{s.message()});
  }
}

void NodeDaemon::Impl::SaveFaults() {
  if (absl::Status s = faults_.Write(); !s.ok()) log_->error("{}", std::string{s.message()});
}

void NodeDaemon::Impl::SetState(int d, DeviceState s) {
  Device& dev = devices_[static_cast<size_t>(d)];
  dev.power.SetReady(s == DeviceState::kReady, Clock::now());
  dev.state = s;
  if (absl::Status st = tree_->SetDeviceState(d, s); !st.ok()) {
    log_->error("{}", std::string{st.message()});
  }
  if (driver_) driver_->OnStateChange(d);  // opens waiting out a reset go on
}

std::optional<DeviceState> NodeDaemon::Impl::StateOf(int device) const {
  if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return std::nullopt;
  const Device& dev = devices_[static_cast<size_t>(device)];
  if (!dev.present) return std::nullopt;
  return dev.state;
}

// Probe resets every device it binds (docs/driver-interface.md#post-load-values); the tree is
// already in its post-probe state, so only the driver's log pair is missing.
void NodeDaemon::Impl::LogProbeReset(int d) {
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: initiating device reset request {}",
                              d, kResetRequestAll));
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: reset request {} completed", d,
                              kResetRequestAll));
}

// ---------------------------------------------------------------------------------------------
// Resets (docs/driver-interface.md#reset-and-state). Counters and state are written before the
// kernel-log record, so a reader reacting to the record finds the state it announces.

void NodeDaemon::Impl::StartReset(int d, bool fail) {
  for (int c = 0; c < opts_.spec->chip->physical_cores; ++c) {
    if (absl::Status s =
            tree_->ApplyCounter(tree_->OtherInfoDir(d, c, "reset_req_count"), CounterOp::kInc, 1);
        !s.ok()) {
      log_->error("{}", std::string{s.message()});
    }
  }
  SetState(d, DeviceState::kReset);
  Device& dev = devices_[static_cast<size_t>(d)];
  dev.reset_pending = true;
  dev.reset_fail = fail;
  dev.reset_done_at = Clock::now() + opts_.reset_duration;
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: initiating device reset request {}",
                              d, kResetRequestAll));
}

void NodeDaemon::Impl::CompleteReset(int d) {
  Device& dev = devices_[static_cast<size_t>(d)];
  dev.reset_pending = false;
  if (dev.reset_fail) {
    for (int c = 0; c < opts_.spec->chip->physical_cores; ++c) {
      if (absl::Status s = tree_->ApplyCounter(tree_->OtherInfoDir(d, c, "reset_fail_count"),
                                               CounterOp::kInc, 1);
          !s.ok()) {
        log_->error("{}", std::string{s.message()});
      }
    }
    SetState(d, DeviceState::kInvalid);
    Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: reset request {} failed", d,
                                kResetRequestAll));
    return;
  }
  // Fresh hardware state: whatever was injected into the device is gone, the driver's health
  // check finds every component healthy again and its heartbeat runs (driver 2.30's files,
  // written before the state so that a reader who sees READY sees them too).
  if (faults_.ClearDevice(d) > 0) SaveFaults();
  dev.heartbeat_stalled = false;
  if (!dev.unhealthy.empty()) {
    dev.unhealthy = {};
    WriteUnhealthy(d);
  }
  SetState(d, DeviceState::kReady);
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: reset request {} completed", d,
                              kResetRequestAll));
}

// ---------------------------------------------------------------------------------------------
// Driver 2.30's health files (driver-sim/README.md#driver-versions: formats and period assumed)

// One beat per period on every device whose health check runs: present, READY (a device in
// reset or left INVALID by a failed one has no firmware to answer it) and not stalled by ctl.
// One write per such device.
void NodeDaemon::Impl::BeatHeartbeats() {
  for (size_t i = 0; i < devices_.size(); ++i) {
    Device& dev = devices_[i];
    if (!dev.present || dev.state != DeviceState::kReady || dev.heartbeat_stalled) continue;
    ++dev.heartbeat;
    if (absl::Status s = tree_->WriteHeartbeat(static_cast<int>(i), dev.heartbeat); !s.ok()) {
      log_->error("{}", std::string{s.message()});
    }
  }
}

void NodeDaemon::Impl::WriteUnhealthy(int d) {
  const Device& dev = devices_[static_cast<size_t>(d)];
  if (absl::Status s = tree_->WriteUnhealthyComponents(d, dev.unhealthy); !s.ok()) {
    log_->error("{}", std::string{s.message()});
  }
}

// ---------------------------------------------------------------------------------------------
// User writes to sysfs files (D4, driver-sim/README.md#deviations: noticed through inotify,
// answered asynchronously)

void NodeDaemon::Impl::WatchDevice(int d) {
  const std::filesystem::path dir = paths_.NeuronDevice(d);
  std::array<int, 2> wds{-1, -1};
  for (int info = 0; info < 2; ++info) {
    const std::filesystem::path p = info ? dir / "info" : dir;
    wds[static_cast<size_t>(info)] =
        inotify_add_watch(inotify_fd_.get(), p.c_str(), IN_CLOSE_WRITE);
    if (wds[static_cast<size_t>(info)] < 0) {
      log_->error(
          "inotify_add_watch {}: {}; writes there go unnoticed (raise "
          "fs.inotify.max_user_watches?)",
          p.string(), std::strerror(errno));
      continue;
    }
    watches_[wds[static_cast<size_t>(info)]] = {d, info == 1};
  }
  device_wds_[d] = wds;
}

void NodeDaemon::Impl::UnwatchDevice(int d) {
  const auto it = device_wds_.find(d);
  if (it == device_wds_.end()) return;
  for (int wd : it->second) {
    if (wd < 0) continue;
    inotify_rm_watch(inotify_fd_.get(), wd);
    watches_.erase(wd);
  }
  device_wds_.erase(it);
}

void NodeDaemon::Impl::HandleInotify() {
  alignas(inotify_event) char buf[16384];
  for (;;) {
    const ssize_t n = read(inotify_fd_.get(), buf, sizeof(buf));
    if (n <= 0) return;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) log_->warn("inotify queue overflow: sysfs writes were missed");
      const auto it = watches_.find(ev->wd);
      if (it == watches_.end()) continue;
      if (ev->mask & IN_IGNORED) {
        watches_.erase(it);
        continue;
      }
      if (!(ev->mask & IN_CLOSE_WRITE) || ev->len == 0) continue;
      const std::string_view name(ev->name);
      const auto [device, is_info] = it->second;
      // Our own writes land as renames of "."-prefixed temporaries, never as these names.
      if (!is_info && name == "reset") OnResetWrite(device);
      if (is_info && name == sysfs::part::kNotifyDelay) OnNotifyDelayWrite(device);
    }
  }
}

void NodeDaemon::Impl::OnResetWrite(int d) {
  Device& dev = devices_[static_cast<size_t>(d)];
  if (!dev.present) return;
  if (driver_->OpenCount(d) > 0) {
    // The driver ignores the write silently while the device is open or mapped.
    log_->info("nd{}: sysfs reset ignored: the device is open (pid {})", d,
               fmt::join(driver_->Attached(d), ", "));
    SetState(d, dev.state);
    return;
  }
  if (dev.reset_pending) {
    Kmsg(kKernErr, fmt::format("neuron:nr_start_ncs: Pending reset request for pid {} on device {} "
                               "already exists!",
                               kResetRequestAll, d));
    SetState(d, dev.state);
    return;
  }
  log_->info("nd{}: reset requested through sysfs", d);
  StartReset(d, /*fail=*/false);
}

void NodeDaemon::Impl::OnNotifyDelayWrite(int d) {
  const std::filesystem::path file = paths_.NeuronDevice(d) / sysfs::kNotifyDelay;
  absl::StatusOr<std::string> text = ReadAttribute(file);
  if (!text.ok()) {
    log_->warn("{}", std::string{text.status().message()});
    WriteNotifyDelay(d);
    return;
  }
  const std::string_view value = StripNewline(*text);
  if (value.empty()) {  // a truncation, not a write: the driver's store would never run
    WriteNotifyDelay(d);
    return;
  }
  // kstrtoll: optional sign, decimal digits; only 0 and -1 are accepted.
  std::string_view digits = value.starts_with('+') ? value.substr(1) : value;
  int64_t v = 1;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || (v != 0 && v != -1)) {
    Kmsg(kKernErr, fmt::format("received invalid notify delay for sysfs metrics: {}", value));
    WriteNotifyDelay(d);
    return;
  }
  notify_delay_ = v == 0 ? "0" : "-1";
  log_->info("notify_delay set to {} (all devices)", notify_delay_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].present) WriteNotifyDelay(static_cast<int>(i));
  }
}

void NodeDaemon::Impl::WriteNotifyDelay(int d) {
  const std::filesystem::path file = paths_.NeuronDevice(d) / sysfs::kNotifyDelay;
  if (absl::Status s = WriteFileAtomic(file, notify_delay_ + "\n", 0644); !s.ok()) {
    log_->error("{}", std::string{s.message()});
  }
}

// ---------------------------------------------------------------------------------------------
// Power (docs/driver-interface.md#computed-formats)

// Every present device, at the end of a rollup period. A device not READY gets no rollup and its
// busy window is dropped; one READY but short of samples reads NO_DATA and its busy window grows
// on into the next rollup's.
void NodeDaemon::Impl::RollUpPower(Clock::time_point now) {
  const int64_t epoch_s = EpochMs() / 1000;
  for (size_t i = 0; i < devices_.size(); ++i) {
    Device& dev = devices_[i];
    if (!dev.present) continue;
    const int64_t samples = dev.power.EndWindow(now, power_period_);
    const int d = static_cast<int>(i);
    if (dev.state != DeviceState::kReady) {  // no rollup while not READY
      mirror_->TakeBusyWindow(d);
      continue;
    }
    absl::Status s;
    if (samples >= kPowerMinSamples) {
      const PowerFigures p =
          ModelPower(opts_.spec->chip->chip, d, epoch_s / 60, mirror_->TakeBusyWindow(d));
      s = tree_->WritePower(d, "POWER_STATUS_VALID", epoch_s, p.min_bp, p.max_bp, p.avg_bp);
    } else {
      s = tree_->WritePower(d, "POWER_STATUS_NO_DATA", epoch_s, 0, 0, 0);
    }
    if (!s.ok()) log_->error("{}", std::string{s.message()});
  }
}

}  // namespace neuron::sim

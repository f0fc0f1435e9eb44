// The node daemon's commands and driver behaviour: ctl commands, device resets, writes to sysfs
// files, power rollups and the status report. The lifecycle and loop are in daemon.cc.

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>

#include "core/base/file_io.h"
#include "driver-sim/driver/daemon_impl.h"

namespace neuron::sim {
namespace {

using daemon_internal::Clock;
using daemon_internal::EpochMs;
using daemon_internal::kKernErr;
using daemon_internal::kKernInfo;
using daemon_internal::kResetRequestAll;

CtlReply Ok(std::string payload) { return {CtlOutcome::kOk, "", std::move(payload)}; }
CtlReply Error(std::string message) { return {CtlOutcome::kError, std::move(message), ""}; }
CtlReply Error(const absl::Status& s) { return Error(std::string(s.message())); }

// Idle power as a share of the chip's maximum, in basis points (a model choice, unverified; see
// driver-sim/README.md): a per-chip idle level, a fixed per-device offset and a small
// per-minute wiggle so that devices and minutes differ.
struct PowerFigures {
  uint32_t min_bp, max_bp, avg_bp;
};
// Busy cores draw more (README "Power"): each figure moves from the idle level towards
// kFullLoadPowerBp in proportion to the share of the cores' time that was busy, the average by
// the minute's mean share, min and max by the least and most busy poll interval.
constexpr uint32_t kFullLoadPowerBp = 9000;
PowerFigures ModelPower(Chip chip, int device, int64_t minute, const BusyWindow& busy) {
  int base = 1650;
  if (chip == Chip::kTrainium2) base = 1400;
  if (chip == Chip::kInferentia2) base = 1100;
  const int offset = (device * 37) % 60;
  const int wiggle = static_cast<int>((minute * 13 + device * 7) % 21) - 10;
  const auto idle = static_cast<uint32_t>(base + offset + wiggle);
  auto at = [idle](double share) {
    share = std::clamp(share, 0.0, 1.0);
    return idle + static_cast<uint32_t>(share * (kFullLoadPowerBp - idle) + 0.5);
  };
  return {at(busy.min) - 85, std::min<uint32_t>(at(busy.max) + 140, 10000), at(busy.mean)};
}

std::string_view TopologyName(LinkTopology t) {
  switch (t) {
    case LinkTopology::kNone:
      return "none";
    case LinkTopology::kTorus4x4:
      return "4x4 torus";
    case LinkTopology::kRing:
      return "ring";
    case LinkTopology::kChain:
      return "chain";
  }
  return "?";
}

std::string CounterText(const std::filesystem::path& file) {
  absl::StatusOr<uint64_t> v = ReadU64(file);
  if (v.ok()) return std::to_string(*v);
  return absl::IsNotFound(v.status()) ? "-" : "?";
}

std::string UtcTime(int64_t epoch_ms) {
  const std::time_t t = static_cast<std::time_t>(epoch_ms / 1000);
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(t));
}

}  // namespace

void NodeDaemon::Impl::Kmsg(int priority, const std::string& text) {
  if (absl::Status s = tree_->AppendKmsg(priority, text); !s.ok()) {
    log_->warn("kmsg: {}", std::string(s.message()));
  }
}

void NodeDaemon::Impl::SaveFaults() {
  if (absl::Status s = faults_.Write(); !s.ok()) log_->error("{}", std::string(s.message()));
}

void NodeDaemon::Impl::SetState(int d, DeviceState s) {
  Device& dev = devices_[static_cast<size_t>(d)];
  const Clock::time_point now = Clock::now();
  if (dev.ready_since && s != DeviceState::kReady) {
    dev.ready_in_window += now - *dev.ready_since;
    dev.ready_since.reset();
  } else if (!dev.ready_since && s == DeviceState::kReady) {
    dev.ready_since = now;
  }
  dev.state = s;
  if (absl::Status st = tree_->SetDeviceState(d, s); !st.ok()) {
    log_->error("{}", std::string(st.message()));
  }
  if (driver_) driver_->OnStateChange(d);  // opens waiting out a reset go on
}

std::optional<DeviceState> NodeDaemon::Impl::StateOf(int device) const {
  if (device < 0 || static_cast<size_t>(device) >= devices_.size()) return std::nullopt;
  const Device& dev = devices_[static_cast<size_t>(device)];
  if (!dev.present) return std::nullopt;
  return dev.state;
}

void NodeDaemon::Impl::Printk(const std::string& text) { Kmsg(kKernErr, text); }

absl::Status NodeDaemon::Impl::CheckDevice(int device, bool must_be_present) const {
  const int n = opts_.spec->devices;
  if (device < 0 || device >= n) {
    return absl::NotFoundError(
        n == 1 ? fmt::format("unknown device {}: {} has device 0 only", device, opts_.spec->name)
               : fmt::format("unknown device {}: {} has devices 0-{}", device, opts_.spec->name,
                             n - 1));
  }
  if (must_be_present && !devices_[static_cast<size_t>(device)].present) {
    return absl::FailedPreconditionError(
        fmt::format("device {} is unplugged; plug it back with neuron-sim ctl plug --device {}",
                    device, device));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// ctl commands

CtlReply NodeDaemon::Impl::Handle(const CtlRequest& req) {
  switch (req.command) {
    case CtlCommand::kStatus:
      return Ok(Status());
    case CtlCommand::kUnplug:
      return Unplug(*req.device);
    case CtlCommand::kPlug:
      return Plug(*req.device);
    case CtlCommand::kInject:
      return Inject(req);
    case CtlCommand::kReset:
      return Reset(*req.device, req.fail);
    case CtlCommand::kLinkDown:
      return LinkDown(*req.device, *req.peer);
    case CtlCommand::kEfaDown:
      return Efa(req.efa, /*up=*/false);
    case CtlCommand::kEfaUp:
      return Efa(req.efa, /*up=*/true);
    case CtlCommand::kClearFault:
      return ClearFault(*req.fault_id);
    case CtlCommand::kPrintk:
      // NEURON_IOCTL_PRINTK: the caller's text verbatim; the kmsg writer escapes what the
      // kernel would.
      if (absl::Status s = tree_->AppendKmsg(req.level, req.text); !s.ok()) return Error(s);
      return Ok("");
  }
  return Error("unhandled command");
}

CtlReply NodeDaemon::Impl::Unplug(int d) {
  if (absl::Status s = CheckDevice(d, false); !s.ok()) return Error(s);
  Device& dev = devices_[static_cast<size_t>(d)];
  if (!dev.present) return Error(fmt::format("device {} is already unplugged", d));
  UnwatchDevice(d);
  if (absl::Status s = tree_->RemoveDevice(d); !s.ok()) {
    WatchDevice(d);
    return Error(s);
  }
  dev = Device{};
  dev.present = false;
  driver_->OnUnplug(d);
  if (faults_.ClearDevice(d) > 0) SaveFaults();
  const std::string& bdf = opts_.spec->placement[static_cast<size_t>(d)].bdf;
  // The kernel's PCIe hot-plug driver reports a surprise removal like this (README: kmsg).
  Kmsg(kKernInfo, fmt::format("pciehp {}: Slot(nd{}): Link Down", bdf, d));
  Kmsg(kKernInfo, fmt::format("pciehp {}: Slot(nd{}): Card not present", bdf, d));
  return Ok(fmt::format("device {} ({}) unplugged\n", d, bdf));
}

// Probe resets every device it binds (§3.3); the tree is already in its post-probe state, so
// only the driver's log pair is missing.
void NodeDaemon::Impl::LogProbeReset(int d) {
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: initiating device reset request {}",
                              d, kResetRequestAll));
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: reset request {} completed", d,
                              kResetRequestAll));
}

CtlReply NodeDaemon::Impl::Plug(int d) {
  if (absl::Status s = CheckDevice(d, false); !s.ok()) return Error(s);
  Device& dev = devices_[static_cast<size_t>(d)];
  if (dev.present) return Error(fmt::format("device {} is already present", d));
  if (absl::Status s = tree_->AddDevice(d); !s.ok()) return Error(s);
  dev = Device{};
  dev.ready_since = Clock::now();
  mirror_->ForgetDevice(d);
  driver_->OnPlug(d);
  WatchDevice(d);
  if (notify_delay_ != "-1") WriteNotifyDelay(d);
  const std::string& bdf = opts_.spec->placement[static_cast<size_t>(d)].bdf;
  Kmsg(kKernInfo, fmt::format("pciehp {}: Slot(nd{}): Card present", bdf, d));
  Kmsg(kKernInfo, fmt::format("pciehp {}: Slot(nd{}): Link Up", bdf, d));
  Kmsg(kKernInfo, fmt::format("pci {}: [{:04x}:{:04x}] type 00 class 0x088000", bdf,
                              kPciVendorAmazon, opts_.spec->chip->pci_device_id));
  LogProbeReset(d);
  return Ok(fmt::format("device {} ({}) plugged in; state READY\n", d, bdf));
}

CtlReply NodeDaemon::Impl::Inject(const CtlRequest& req) {
  const int d = *req.device;
  if (absl::Status s = CheckDevice(d, true); !s.ok()) return Error(s);
  const int cores = LogicalCoresPerDevice(*opts_.spec, opts_.lnc);
  if (req.core && *req.core >= cores) {
    return Error(
        fmt::format("device {} has NeuronCores 0-{} ({}, LNC {}); --core {} is out of range", d,
                    cores - 1, opts_.spec->name, opts_.lnc, *req.core));
  }
  std::string detail;
  if (*req.fault == FaultKind::kHbmUe || *req.fault == FaultKind::kSramUe) {
    // trn2 reads mem_ecc_uncorrected for repair state 0 (legacy firmware) too (§2.4), so an
    // injected HBM error lands in the same file on every generation.
    const std::string_view counter =
        *req.fault == FaultKind::kHbmUe ? "mem_ecc_uncorrected" : "sram_ecc_uncorrected";
    if (absl::Status s = tree_->AddHardwareErrors(d, counter, 1); !s.ok()) return Error(s);
    detail = fmt::format("device {}: stats/hardware/{} is now {}\n", d, counter,
                         CounterText(paths_.NeuronDevice(d) / "stats/hardware" / counter));
  }
  const PendingFault f = faults_.Add(*req.fault, d, req.core, std::nullopt);
  SaveFaults();
  return Ok(fmt::format("fault {} pending for the runtime\n", DescribeFault(f)) + detail);
}

CtlReply NodeDaemon::Impl::Reset(int d, bool fail) {
  if (absl::Status s = CheckDevice(d, true); !s.ok()) return Error(s);
  if (devices_[static_cast<size_t>(d)].reset_pending) {
    Kmsg(kKernErr, fmt::format("neuron:nr_start_ncs: Pending reset request for pid {} on device {} "
                               "already exists!",
                               kResetRequestAll, d));
    return Error(fmt::format("device {}: a reset request is already in progress", d));
  }
  StartReset(d, fail);
  return Ok(fmt::format("device {}: reset request {} initiated; state RESET, {} in {} ms\n", d,
                        kResetRequestAll, fail ? "INVALID (--fail)" : "READY",
                        opts_.reset_duration.count()));
}

CtlReply NodeDaemon::Impl::LinkDown(int a, int b) {
  if (absl::Status s = CheckDevice(a, false); !s.ok()) return Error(s);
  if (absl::Status s = CheckDevice(b, false); !s.ok()) return Error(s);
  const InstanceSpec& spec = *opts_.spec;
  if (spec.topology == LinkTopology::kNone) {
    return Error(fmt::format("{} has no NeuronLink", spec.name));
  }
  const std::vector<int> neighbours = ConnectedDevices(spec, a);
  if (a == b || std::find(neighbours.begin(), neighbours.end(), b) == neighbours.end()) {
    return Error(fmt::format(
        "devices {} and {} are not NeuronLink neighbours on {}: device {} connects to {}", a, b,
        spec.name, a, fmt::join(neighbours, ", ")));
  }
  for (const PendingFault& f : faults_.faults()) {
    if (f.kind == FaultKind::kLinkDown &&
        ((f.device == a && f.peer == b) || (f.device == b && f.peer == a))) {
      return Error(fmt::format("the link between devices {} and {} is already down (fault #{})", a,
                               b, f.id));
    }
  }
  const PendingFault f = faults_.Add(FaultKind::kLinkDown, a, std::nullopt, b);
  SaveFaults();
  return Ok(
      fmt::format("fault {} pending: collectives over this link fail after the execution "
                  "timeout\n",
                  DescribeFault(f)));
}

CtlReply NodeDaemon::Impl::Efa(const std::string& name, bool up) {
  const InstanceSpec& spec = *opts_.spec;
  if (spec.efas.empty()) return Error(fmt::format("{} has no EFA interfaces", spec.name));
  size_t i = 0;
  while (i < spec.efas.size() && spec.efas[i].name != name) ++i;
  if (i == spec.efas.size()) {
    std::vector<std::string> known;
    for (const EfaPlacement& e : spec.efas) known.push_back(e.name);
    return Error(
        fmt::format("unknown EFA '{}'; {} has {}", name, spec.name, fmt::join(known, ", ")));
  }
  if (tree_->EfaPresent(name) == up) {
    return Error(fmt::format("EFA {} is already {}", name, up ? "up" : "down"));
  }
  absl::Status s = up ? tree_->AddEfa(name) : tree_->RemoveEfa(name);
  if (!s.ok()) return Error(s);
  return Ok(
      fmt::format("EFA {} (uverbs{}, {}) is {}\n", name, i, spec.efas[i].bdf, up ? "up" : "down"));
}

CtlReply NodeDaemon::Impl::ClearFault(uint64_t id) {
  if (!faults_.Remove(id)) return Error(fmt::format("no pending fault #{}", id));
  SaveFaults();
  return Ok(fmt::format("fault #{} cleared\n", id));
}

// ---------------------------------------------------------------------------------------------
// Resets (DRIVER-INTERFACE §5). Counters and state are written before the kernel-log record, so
// a reader reacting to the record finds the state it announces.

void NodeDaemon::Impl::StartReset(int d, bool fail) {
  for (int c = 0; c < opts_.spec->chip->physical_cores; ++c) {
    if (absl::Status s =
            tree_->ApplyCounter(tree_->OtherInfoDir(d, c, "reset_req_count"), CounterOp::kInc, 1);
        !s.ok()) {
      log_->error("{}", std::string(s.message()));
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
        log_->error("{}", std::string(s.message()));
      }
    }
    SetState(d, DeviceState::kInvalid);
    Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: reset request {} failed", d,
                                kResetRequestAll));
    return;
  }
  // Fresh hardware state: whatever was injected into the device is gone.
  if (faults_.ClearDevice(d) > 0) SaveFaults();
  SetState(d, DeviceState::kReady);
  Kmsg(kKernInfo, fmt::format("neuron:nr_reset_thread_fn: nd{}: reset request {} completed", d,
                              kResetRequestAll));
}

// ---------------------------------------------------------------------------------------------
// User writes to sysfs files (D4: noticed through inotify, answered asynchronously)

void NodeDaemon::Impl::WatchDevice(int d) {
  const std::filesystem::path dir = paths_.NeuronDevice(d);
  std::array<int, 2> wds{-1, -1};
  for (int info = 0; info < 2; ++info) {
    const std::filesystem::path p = info ? dir / "info" : dir;
    wds[static_cast<size_t>(info)] = inotify_add_watch(inotify_fd_, p.c_str(), IN_CLOSE_WRITE);
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
    inotify_rm_watch(inotify_fd_, wd);
    watches_.erase(wd);
  }
  device_wds_.erase(it);
}

void NodeDaemon::Impl::HandleInotify() {
  alignas(inotify_event) char buf[16384];
  for (;;) {
    const ssize_t n = read(inotify_fd_, buf, sizeof(buf));
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
      if (is_info && name == "notify_delay") OnNotifyDelayWrite(device);
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
  const std::filesystem::path file = paths_.NeuronDevice(d) / "info/notify_delay";
  absl::StatusOr<std::string> text = ReadAttribute(file);
  if (!text.ok()) {
    log_->warn("{}", std::string(text.status().message()));
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
  const std::filesystem::path file = paths_.NeuronDevice(d) / "info/notify_delay";
  if (absl::Status s = WriteFileAtomic(file, notify_delay_ + "\n", 0644); !s.ok()) {
    log_->error("{}", std::string(s.message()));
  }
}

// ---------------------------------------------------------------------------------------------
// Power (DRIVER-INTERFACE §2.3)

void NodeDaemon::Impl::RollUpPower(Clock::time_point now) {
  const auto sample_interval = std::chrono::duration_cast<std::chrono::nanoseconds>(power_period_) /
                               daemon_internal::kPowerSamplesPerMinute;
  const int64_t epoch_s = EpochMs() / 1000;
  for (size_t i = 0; i < devices_.size(); ++i) {
    Device& dev = devices_[i];
    if (!dev.present) continue;
    if (dev.ready_since) {
      dev.ready_in_window += now - *dev.ready_since;
      dev.ready_since = now;
    }
    const int64_t samples = dev.ready_in_window / sample_interval;
    dev.ready_in_window = {};
    const int d = static_cast<int>(i);
    if (dev.state != DeviceState::kReady) {  // no rollup while not READY
      mirror_->TakeBusyWindow(d);
      continue;
    }
    absl::Status s;
    if (samples >= daemon_internal::kPowerMinSamples) {
      const PowerFigures p =
          ModelPower(opts_.spec->chip->chip, d, epoch_s / 60, mirror_->TakeBusyWindow(d));
      s = tree_->WritePower(d, "POWER_STATUS_VALID", epoch_s, p.min_bp, p.max_bp, p.avg_bp);
    } else {
      s = tree_->WritePower(d, "POWER_STATUS_NO_DATA", epoch_s, 0, 0, 0);
    }
    if (!s.ok()) log_->error("{}", std::string(s.message()));
  }
}

// ---------------------------------------------------------------------------------------------
// status

// Runtime processes: one row per (device, pid) datastore; CORES are the global logical cores
// whose lock the process holds, SLOTS the device's logical cores its datastore has counted on.
std::string NodeDaemon::Impl::ProcessStatus() const {
  const std::vector<DatastoreProcess> procs = mirror_->Processes();
  if (procs.empty()) return "\nprocesses: none\n";
  const std::map<pid_t, std::vector<int>> locks = CoreLockHolders(paths_);
  const int per_device = LogicalCoresPerDevice(*opts_.spec, opts_.lnc);
  constexpr std::string_view kRow = "{:>6}  {:>8}  {:<24}  {:<12}  {:<8}  {:>12}  {}\n";
  std::string out =
      "\n" + fmt::format(kRow, "DEVICE", "PID", "TAG", "CORES", "SLOTS", "DEVICE_MEM", "STATE");
  for (const DatastoreProcess& p : procs) {
    std::vector<int> cores;
    if (const auto it = locks.find(p.pid); it != locks.end()) {
      for (int c : it->second) {
        if (c / per_device == p.device) cores.push_back(c);
      }
    }
    std::string tag = p.tag.size() > 24 ? p.tag.substr(0, 21) + "..." : p.tag;
    out += fmt::format(kRow, p.device, p.pid, tag,
                       cores.empty() ? "-" : fmt::format("{}", fmt::join(cores, ",")),
                       p.slots.empty() ? "-" : fmt::format("{}", fmt::join(p.slots, ",")),
                       p.device_bytes, "running");
  }
  return out;
}

std::string NodeDaemon::Impl::Status() const {
  const InstanceSpec& spec = *opts_.spec;
  const auto present = std::count_if(devices_.begin(), devices_.end(),
                                     [](const Device& dev) { return dev.present; });
  std::string out;
  out += fmt::format("node        {} {}, Kubernetes node {}\n", spec.name, node_.instance_id,
                     node_.node_name);
  out += fmt::format("devices     {} ({} present), {} NeuronCores each (LNC {}, {} physical)\n",
                     spec.devices, present, LogicalCoresPerDevice(spec, opts_.lnc), opts_.lnc,
                     spec.chip->physical_cores);
  out += fmt::format("neuronlink  {}\n", TopologyName(spec.topology));
  out += fmt::format("notify      notify_delay {}\n\n", notify_delay_);

  constexpr std::string_view kRow = "{:>6}  {:<12}  {:<7}  {:<7}  {:>7}  {:>6}  {:>8}  {}\n";
  out += fmt::format(kRow, "DEVICE", "BDF", "STATE", "PRESENT", "SRAM_UE", "HBM_UE", "HBM_R_UE",
                     "OPEN BY");
  const auto now = Clock::now();
  std::string resets;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& dev = devices_[i];
    const int d = static_cast<int>(i);
    const std::string& bdf = spec.placement[i].bdf;
    if (!dev.present) {
      out += fmt::format(kRow, d, bdf, "-", "no", "-", "-", "-", "-");
      continue;
    }
    const std::filesystem::path hw = paths_.NeuronDevice(d) / "stats/hardware";
    const std::vector<pid_t> users = driver_->Attached(d);
    out += fmt::format(
        kRow, d, bdf, DeviceStateName(dev.state), "yes", CounterText(hw / "sram_ecc_uncorrected"),
        CounterText(hw / "mem_ecc_uncorrected"), CounterText(hw / "mem_ecc_repairable_uncorrected"),
        users.empty() ? "-" : fmt::format("{}", fmt::join(users, ",")));
    if (dev.reset_pending) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(dev.reset_done_at - now).count();
      resets +=
          fmt::format("device {}: reset request {} in progress, {} in {} ms\n", d, kResetRequestAll,
                      dev.reset_fail ? "INVALID" : "READY", std::max<int64_t>(left, 0));
    }
  }
  out += resets;
  out += ProcessStatus();

  if (!spec.efas.empty()) {
    constexpr std::string_view kEfaRow = "{:<14}  {:<12}  {:<8}  {}\n";
    out += "\n" + fmt::format(kEfaRow, "EFA", "BDF", "UVERBS", "STATE");
    for (size_t i = 0; i < spec.efas.size(); ++i) {
      const EfaPlacement& e = spec.efas[i];
      out += fmt::format(kEfaRow, e.name, e.bdf, fmt::format("uverbs{}", i),
                         tree_->EfaPresent(e.name) ? "up" : "down");
    }
  }

  if (faults_.faults().empty()) {
    out += "\npending faults: none\n";
  } else {
    out += fmt::format("\npending faults: {}\n", faults_.faults().size());
    for (const PendingFault& f : faults_.faults()) {
      out += fmt::format("  {}, injected {}\n", DescribeFault(f), UtcTime(f.time_ms));
    }
  }
  return out;
}

}  // namespace neuron::sim

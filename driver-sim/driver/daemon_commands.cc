// The node daemon's ctl commands and its status report. What the driver does on its own (resets,
// sysfs writes, power rollups) is in daemon_driver.cc; the lifecycle and loop in daemon.cc.

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ctime>

#include "core/base/file_io.h"
#include "core/driver/health_counters.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/daemon_impl.h"

namespace neuron::sim {
namespace {

using daemon_internal::Clock;
using daemon_internal::kResetRequestAll;

CtlReply Ok(std::string payload) { return {CtlOutcome::kOk, "", std::move(payload)}; }
CtlReply Error(std::string message) { return {CtlOutcome::kError, std::move(message), ""}; }
CtlReply Error(const absl::Status& s) { return Error(std::string{s.message()}); }

// raise's words: the file names of core/driver/health_counters.h's rows, "a|b|...".
std::string_view RaisableCounters() {
  static const std::string words = [] {
    std::vector<std::string_view> names;
    names.reserve(kHealthCounters.size());
    for (const HealthCounter& c : kHealthCounters) names.push_back(c.name);
    return fmt::format("{}", fmt::join(names, "|"));
  }();
  return words;
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

// `status`'s EFA table: name, BDF, uverbs index, up or down; nothing without EFA.
std::string EfaStatus(const InstanceSpec& spec, const SimTree& tree) {
  if (spec.efas.empty()) return "";
  constexpr std::string_view kEfaRow = "{:<14}  {:<12}  {:<8}  {}\n";
  std::string out = "\n" + fmt::format(kEfaRow, "EFA", "BDF", "UVERBS", "STATE");
  for (size_t i = 0; i < spec.efas.size(); ++i) {
    const EfaPlacement& e = spec.efas[i];
    out += fmt::format(kEfaRow, e.name, e.bdf, fmt::format("uverbs{}", i),
                       tree.EfaPresent(e.name) ? "up" : "down");
  }
  return out;
}

// `status`'s list of pending faults, oldest first.
std::string FaultStatus(const std::vector<PendingFault>& faults) {
  if (faults.empty()) return "\npending faults: none\n";
  std::string out = fmt::format("\npending faults: {}\n", faults.size());
  for (const PendingFault& f : faults) {
    out += fmt::format("  {}, injected {}\n", DescribeFault(f), UtcTime(f.time_ms));
  }
  return out;
}

}  // namespace

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
// ctl verbs: the one table (ctl.h's CtlVerbs). A row's handler runs in the daemon's loop with the
// request its grammar admitted, so the options it requires are there.

const std::vector<NodeDaemon::Impl::VerbRow>& NodeDaemon::Impl::VerbRows() {
  using enum CtlArg;
  using R = const CtlRequest&;
  static const std::vector<VerbRow> rows{
      {{"status",
        {},
        "status",
        "the node, its devices, processes, EFAs and pending faults",
        /*logged=*/false},
       [](Impl& d, R) { return Ok(d.Status()); }},
      {{"unplug",
        {.device = kRequired},
        "unplug --device N",
        "surprise-remove device N (its files vanish, pciehp kmsg lines)"},
       [](Impl& d, R r) { return d.Unplug(*r.device); }},
      {{"plug", {.device = kRequired}, "plug --device N", "plug device N back in, post-probe"},
       [](Impl& d, R r) { return d.Plug(*r.device); }},
      {{"inject",
        {.fault = kRequired, .device = kRequired, .core = kOptional, .count = kOptional},
        "inject hbm-ue|sram-ue|hbm-ce|sram-ce|nan|dma-abort|hang|sdc --device N [--core C] "
        "[--count K]",
        "a fault pending for the runtime (sdc: one flipped bit in an output, no error); K ECC "
        "errors also count in sysfs (corrected ones, -ce, only there)"},
       [](Impl& d, R r) { return d.Inject(r); }},
      {{"raise",
        {.action = kRequired, .device = kRequired, .count = kOptional},
        "raise COUNTER --device N [--count K]",
        "add K (default 1) to device N's health evidence counter COUNTER, any row of "
        "core/driver/health_counters.h by its file name; the count alone, nothing pending",
        /*logged=*/true,
        RaisableCounters()},
       [](Impl& d, R r) { return d.Raise(*r.device, r.action, r.count.value_or(1)); }},
      {{"reset",
        {.device = kRequired, .fail = kOptional},
        "reset --device N [--fail]",
        "reset device N (to INVALID with --fail)"},
       [](Impl& d, R r) { return d.Reset(*r.device, r.fail); }},
      {{"heartbeat",
        {.action = kRequired, .device = kRequired},
        "heartbeat stall|resume --device N",
        "stop or restart device N's healthcheck_heartbeat (driver 2.30, Trn2/Trn3)",
        /*logged=*/true,
        "stall|resume"},
       [](Impl& d, R r) { return d.Heartbeat(*r.device, r.action == "stall"); }},
      {{"component",
        {.action = kRequired, .components = kOptional, .device = kRequired},
        "component set LIST|clear --device N",
        "set or empty device N's unhealthy_components (LIST: hbm,link_efa,...; driver 2.30, "
        "Trn2/Trn3)",
        /*logged=*/true,
        "set|clear"},
       [](Impl& d, R r) { return d.SetComponents(*r.device, r.components); }},
      {{"link-down",
        {.device = kRequired, .peer = kRequired},
        "link-down --device A --peer B",
        "the NeuronLink between neighbours A and B fails its collectives"},
       [](Impl& d, R r) { return d.LinkDown(*r.device, *r.peer); }},
      {{"efa-down", {.efa = kRequired}, "efa-down --efa NAME", "take an EFA interface away"},
       [](Impl& d, R r) { return d.Efa(r.efa, /*up=*/false); }},
      {{"efa-up", {.efa = kRequired}, "efa-up --efa NAME", "bring an EFA interface back"},
       [](Impl& d, R r) { return d.Efa(r.efa, /*up=*/true); }},
      {{"clear-fault", {.id = kRequired}, "clear-fault --id ID", "drop pending fault ID"},
       [](Impl& d, R r) { return d.ClearFault(*r.fault_id); }},
      {{"printk",
        {.level = kOptional, .text = kRequired},
        "printk [--level N] -- TEXT...",
        "append TEXT to dev/kmsg, as the driver's NEURON_IOCTL_PRINTK does"},
       // The caller's text verbatim; the kmsg writer escapes what the kernel would.
       [](Impl& d, R r) {
         if (absl::Status s = d.tree_->AppendKmsg(r.level, r.text); !s.ok()) return Error(s);
         return Ok("");
       }},
  };
  return rows;
}

const std::vector<CtlVerb>& CtlVerbs() {
  static const std::vector<CtlVerb> verbs = [] {
    std::vector<CtlVerb> v;
    for (const NodeDaemon::Impl::VerbRow& row : NodeDaemon::Impl::VerbRows()) {
      v.push_back(row.verb);
    }
    return v;
  }();
  return verbs;
}

CtlReply NodeDaemon::Impl::Handle(const CtlRequest& req) {
  for (const VerbRow& row : VerbRows()) {
    if (row.verb.name == req.command) return row.handle(*this, req);
  }
  return Error(fmt::format("unhandled command '{}'", req.command));
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

CtlReply NodeDaemon::Impl::Plug(int d) {
  if (absl::Status s = CheckDevice(d, false); !s.ok()) return Error(s);
  Device& dev = devices_[static_cast<size_t>(d)];
  if (dev.present) return Error(fmt::format("device {} is already present", d));
  if (absl::Status s = tree_->AddDevice(d); !s.ok()) return Error(s);
  dev = Device{};
  dev.power.SetReady(true, Clock::now());
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
  if (req.corrected) return InjectCorrected(d, *req.corrected, req.count.value_or(1));
  std::string detail;
  if (*req.fault == FaultKind::kHbmUe || *req.fault == FaultKind::kSramUe) {
    // trn2 reads mem_ecc_uncorrected for repair state 0 (legacy firmware) too
    // (docs/driver-interface.md#generation-differences), so an injected HBM error lands in the same
    // file on every generation.
    const bool hbm = *req.fault == FaultKind::kHbmUe;
    const std::string_view counter = hbm ? "mem_ecc_uncorrected" : "sram_ecc_uncorrected";
    if (absl::Status s = tree_->AddHardwareErrors(d, counter, req.count.value_or(1)); !s.ok()) {
      return Error(s);
    }
    const std::filesystem::path file = tree_->HardwareDir(d) / counter;
    detail =
        fmt::format("device {}: {} is now {}\n", d, DeviceRelative(d, file), CounterText(file));
    // The driver's health check sees what its counters see (driver 2.30, where the file exists).
    detail += MarkUnhealthy(d, hbm ? HealthComponent::kHbm : HealthComponent::kSram);
  }
  const PendingFault f = faults_.Add(*req.fault, d, req.core, std::nullopt);
  SaveFaults();
  return Ok(fmt::format("fault {} pending for the runtime\n", DescribeFault(f)) + detail);
}

// Corrected errors: the driver counts them and the execution goes on, so nothing is pending.
CtlReply NodeDaemon::Impl::InjectCorrected(int d, CorrectedEcc kind, uint64_t n) {
  if (!opts_.driver.groups.Has(NodeGroup::kEccCorrected)) {
    const std::filesystem::path file = tree_->HardwareDir(d) / CorrectedEccCounter(kind);
    return Error(fmt::format(
        "device {} has no {}: driver {} counts no corrected ECC errors (they arrive with driver "
        "2.30: neuron-sim up --driver-version 2.30)",
        d, DeviceRelative(d, file), opts_.driver.name));
  }
  return Raise(d, CorrectedEccCounter(kind), n, "corrected: ");
}

// A health evidence counter raised alone (core/driver/health_counters.h), as the driver would
// count an error: nothing is pending for the runtime.
CtlReply NodeDaemon::Impl::Raise(int d, std::string_view counter, uint64_t n,
                                 std::string_view what) {
  if (absl::Status s = CheckDevice(d, true); !s.ok()) return Error(s);
  if (absl::Status s = tree_->AddHardwareErrors(d, counter, n); !s.ok()) return Error(s);
  const std::filesystem::path file = tree_->CounterFile(d, *FindHealthCounter(counter));
  return Ok(fmt::format("device {}: {} is now {} ({}nothing pending for the runtime)\n", d,
                        DeviceRelative(d, file), CounterText(file), what));
}

// Adds `c` to the device's unhealthy_components where the driver writes it; the reply's line.
std::string NodeDaemon::Impl::MarkUnhealthy(int d, HealthComponent c) {
  if (!tree_->HasHealthComponents()) return "";
  Device& dev = devices_[static_cast<size_t>(d)];
  dev.unhealthy.Add(c);
  WriteUnhealthy(d);
  return fmt::format("device {}: {} is now {}\n", d,
                     DeviceRelative(d, tree_->HealthFile(d, sysfs::kUnhealthyComponentsName)),
                     dev.unhealthy.Join());
}

// Why device d cannot have driver 2.30's health files, naming the cause; OK when it has them.
absl::Status NodeDaemon::Impl::CheckHealthFiles(int d) const {
  if (absl::Status s = CheckDevice(d, true); !s.ok()) return s;
  if (tree_->HasHealthComponents()) return absl::OkStatus();
  const std::string files = fmt::format(
      "{} and {}", DeviceRelative(d, tree_->HealthFile(d, sysfs::kUnhealthyComponentsName)),
      sysfs::kHealthcheckHeartbeatName);
  if (!opts_.driver.groups.Has(NodeGroup::kHealthComponents)) {
    return absl::FailedPreconditionError(fmt::format(
        "device {} has no {}: driver {} does not write them (they arrive with driver 2.30: "
        "neuron-sim up --driver-version 2.30)",
        d, files, opts_.driver.name));
  }
  return absl::FailedPreconditionError(fmt::format(
      "device {} has no {}: driver {} writes them on Trn2 and Trn3 only, and a {} is a {}", d,
      files, opts_.driver.name, opts_.spec->name, opts_.spec->chip->instance_type));
}

CtlReply NodeDaemon::Impl::Heartbeat(int d, bool stall) {
  if (absl::Status s = CheckHealthFiles(d); !s.ok()) return Error(s);
  Device& dev = devices_[static_cast<size_t>(d)];
  if (dev.heartbeat_stalled == stall) {
    return Error(fmt::format("device {}: healthcheck_heartbeat is {}", d,
                             stall ? "already stalled" : "not stalled"));
  }
  dev.heartbeat_stalled = stall;
  if (stall) {
    return Ok(fmt::format("device {}: healthcheck_heartbeat stalled at {}\n", d, dev.heartbeat));
  }
  return Ok(
      fmt::format("device {}: healthcheck_heartbeat resumed at {}; it advances every {} ms{}\n", d,
                  dev.heartbeat, opts_.heartbeat_period.count(),
                  dev.state == DeviceState::kReady ? "" : " once the device is READY"));
}

CtlReply NodeDaemon::Impl::SetComponents(int d, HealthComponents components) {
  if (absl::Status s = CheckHealthFiles(d); !s.ok()) return Error(s);
  devices_[static_cast<size_t>(d)].unhealthy = components;
  const std::filesystem::path file = tree_->HealthFile(d, sysfs::kUnhealthyComponentsName);
  if (absl::Status s = tree_->WriteUnhealthyComponents(d, components); !s.ok()) return Error(s);
  return Ok(fmt::format("device {}: {} is now {}\n", d, DeviceRelative(d, file),
                        components.empty() ? "empty" : components.Join()));
}

std::string NodeDaemon::Impl::DeviceRelative(int d, const std::filesystem::path& file) const {
  return file.lexically_relative(paths_.NeuronDevice(d)).string();
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

// Driver 2.30's corrected ECC counters and health files per present device, where the node has
// them. BEAT: advancing, stalled (ctl), or paused (the device is not READY).
std::string NodeDaemon::Impl::HealthStatus() const {
  const bool files = tree_->HasHealthComponents();
  if (!files && !opts_.driver.groups.Has(NodeGroup::kEccCorrected)) return "";
  constexpr std::string_view kRow = "{:>6}  {:>7}  {:>6}  {:>9}  {:<9}  {}\n";
  std::string out = "\n" + fmt::format(kRow, "DEVICE", "SRAM_CE", "HBM_CE", "HEARTBEAT", "BEAT",
                                       "UNHEALTHY_COMPONENTS");
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& dev = devices_[i];
    if (!dev.present) continue;
    const std::filesystem::path hw = tree_->HardwareDir(static_cast<int>(i));
    const std::string_view beat = !files                             ? "-"
                                  : dev.heartbeat_stalled            ? "stalled"
                                  : dev.state != DeviceState::kReady ? "paused"
                                                                     : "advancing";
    out += fmt::format(kRow, i, CounterText(hw / "sram_ecc_corrected"),
                       CounterText(hw / "mem_ecc_corrected"),
                       files ? std::to_string(dev.heartbeat) : "-", beat,
                       !files                  ? "-"
                       : dev.unhealthy.empty() ? "none"
                                               : dev.unhealthy.Join());
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
    const std::filesystem::path hw = tree_->HardwareDir(d);
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
  out += HealthStatus();
  out += ProcessStatus();
  out += EfaStatus(spec, *tree_);
  out += FaultStatus(faults_.faults());
  return out;
}

}  // namespace neuron::sim

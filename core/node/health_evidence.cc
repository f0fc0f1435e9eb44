#include "core/node/health_evidence.h"

#include <set>

#include "core/base/file_io.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "fmt/ranges.h"

namespace neuron {

HealthEvidence::HealthEvidence(RootPaths root, std::shared_ptr<spdlog::logger> log,
                               HealthEvidenceOptions options)
    : root_(std::move(root)), log_(std::move(log)), options_(options) {}

bool HealthEvidence::Apply(const Event& e) {
  switch (e.kind) {
    case EventKind::kDeviceAdded: {
      DeviceEvidence& d = devices_[e.device];
      d.present = true;
      d.state = e.state;
      NewBaseline(&d);
      log_->info("device {} appeared (state {})", e.device,
                 e.state ? DeviceStateName(*e.state) : "unknown");
      return true;
    }
    case EventKind::kDeviceRemoved:
      if (!devices_.count(e.device)) return false;
      devices_[e.device].present = false;
      log_->warn("device {} vanished", e.device);
      return false;
    case EventKind::kDeviceStateChanged:
      if (!devices_.count(e.device)) return true;
      SetState(e.device, devices_[e.device], e.state);
      return false;
    case EventKind::kHardwareError:
      if (devices_.count(e.device)) {
        std::vector<std::string>& types = devices_[e.device].hw_errors;
        const std::string type = e.hw_error ? e.hw_error->type : "";
        if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
        log_->warn("device {}: {}", e.device, e.hw_error ? e.hw_error->text : "NEURON_HW_ERR");
      } else {
        log_->warn("NEURON_HW_ERR record without nd-id: not attributed to a device");
      }
      return false;
    case EventKind::kEfaAdded: {
      EfaEvidence& f = efas_[e.efa];
      f.present = true;
      f.port_state = e.port_state;
      return true;  // uverbs number and NUMA node come from the inventory
    }
    case EventKind::kEfaRemoved:
      efas_[e.efa].present = false;
      log_->warn("EFA {} vanished", e.efa);
      return false;
    case EventKind::kDeviceReset:
      if (devices_.count(e.device) && e.reset) ApplyReset(e.device, devices_[e.device], *e.reset);
      return false;
    case EventKind::kEfaPortStateChanged:
      efas_[e.efa].port_state = e.port_state;
      log_->info("EFA {} port {}", e.efa, e.port_state);
      return false;
  }
  return false;
}

void HealthEvidence::NewBaseline(DeviceEvidence* d) const {
  d->rebaseline = true;
  d->counter_rose = {};
  d->hw_errors.clear();
  d->heartbeat.reset();  // timed afresh from the next reading
  d->heartbeat_stalled = false;
}

void HealthEvidence::SetState(int index, DeviceEvidence& d,
                              std::optional<DeviceState> state) const {
  if (state == d.state) return;
  const bool recovered = state == DeviceState::kReady && d.state != DeviceState::kReady;
  d.state = state;
  if (recovered) NewBaseline(&d);
  log_->info("device {} state {}", index, state ? DeviceStateName(*state) : "?");
}

// The file holds the state's number, as DeviceState numbers them
// (docs/driver-interface.md#reset-and-state); unreadable or out of range: unknown.
std::optional<DeviceState> HealthEvidence::ReadState(int index) const {
  absl::StatusOr<uint64_t> raw = ReadU64(root_.NeuronDevice(index) / sysfs::kReset);
  if (!raw.ok() || *raw > static_cast<uint64_t>(DeviceState::kInvalid)) return std::nullopt;
  return static_cast<DeviceState>(*raw);
}

// The driver writes the state before it logs the step, so the state read now is the one the
// record announces, or a later one. A completed reset whose RESET state was never read (it began
// and ended between two reads) still happened: the device's evidence starts afresh.
void HealthEvidence::ApplyReset(int index, DeviceEvidence& d, ResetStep step) const {
  const std::optional<DeviceState> state = ReadState(index);
  if (step == ResetStep::kCompleted && state == DeviceState::kReady &&
      d.state == DeviceState::kReady) {
    NewBaseline(&d);
    log_->info("device {} reset (RESET -> READY between two reads)", index);
    return;
  }
  SetState(index, d, state);
}

// The node's shape: absent devices are known too.
void HealthEvidence::ApplyCatalog(const InstanceSpec& spec) {
  for (int d = 0; d < spec.devices; ++d) {
    DeviceEvidence& e = devices_[d];
    if (!e.numa && d < static_cast<int>(spec.placement.size())) {
      e.numa = spec.placement[d].numa_node;
    }
    if (e.links.empty()) e.links = ConnectedDevices(spec, d);
    if (e.bdf.empty() && d < static_cast<int>(spec.placement.size())) {
      e.bdf = spec.placement[d].bdf;
    }
  }
  for (const EfaPlacement& p : spec.efas) {
    EfaEvidence& f = efas_[p.name];
    if (!f.numa) f.numa = p.numa_node;
    if (f.bdf.empty()) f.bdf = p.bdf;
  }
}

void HealthEvidence::ApplyScan(const Inventory& inv) {
  scan_since_poll_ = true;
  const InstanceSpec* spec = inv.Spec();
  if (spec != nullptr) ApplyCatalog(*spec);
  std::set<int> present;
  for (const NeuronDevice& nd : inv.devices) {
    DeviceEvidence& e = devices_[nd.index];
    present.insert(nd.index);
    const bool recovered = nd.state == DeviceState::kReady && e.state != DeviceState::kReady;
    if (!e.present || recovered) NewBaseline(&e);
    e.present = true;
    e.state = nd.state;
    e.groups = nd.sysfs_groups;
    e.v2_chip = IsV2Chip(nd.instance_type);
    if (nd.numa_node) e.numa = nd.numa_node;
    if (!nd.bdf.empty()) e.bdf = nd.bdf;
    e.attributes = nd.attributes;
    if (!nd.connected.empty() && spec == nullptr) e.links = nd.connected;
  }
  for (auto& [index, e] : devices_) {
    if (!present.count(index)) e.present = false;
  }
  std::set<std::string> efa_present;
  for (const EfaInterface& ei : inv.efas) {
    EfaEvidence& f = efas_[ei.name];
    efa_present.insert(ei.name);
    f.present = true;
    f.port_state = ei.port_state;
    if (ei.numa_node) f.numa = ei.numa_node;
    if (ei.uverbs) f.uverbs = ei.uverbs;
    if (!ei.bdf.empty()) f.bdf = ei.bdf;
  }
  for (auto& [name, f] : efas_) {
    if (!efa_present.count(name)) f.present = false;
  }
  // The module's own directory goes with the driver: devices missing without it are unknown.
  const bool driver_gone = !std::filesystem::exists(root_.ModuleVersion().parent_path());
  for (auto& [index, e] : devices_) e.driver_gone = driver_gone && !e.present;
  const int cpd = inv.LogicalCoresPerDevice();
  if (cpd > 0) cores_per_device_ = cpd;
  if (!inv.instance_type.empty()) instance_type_ = inv.instance_type;
  if (inv.driver.version) driver_version_ = *inv.driver.version;
}

// What Events tells a consumer that watches it: a device's directory came or went, its state
// changed. One stat and one small read per device.
void HealthEvidence::PollPresence(std::chrono::steady_clock::time_point now) {
  const bool driver_gone = !std::filesystem::exists(root_.ModuleVersion().parent_path());
  // A logged reset is applied as its record comes; the states are read besides only now and then.
  const bool read_states = !resets_logged_ || now - states_read_ >= options_.state_recheck;
  if (read_states) states_read_ = now;
  // One listing of the devices' parent, not a stat per device.
  const std::vector<std::string> listed = ListDir(root_.NeuronDevicesDir());
  const std::set<std::string> names(listed.begin(), listed.end());
  for (auto& [index, d] : devices_) {
    if (!names.contains(root_.NeuronDevice(index).filename().string())) {
      if (d.present) log_->warn("device {} vanished", index);
      d.present = false;
      d.driver_gone = driver_gone;
      continue;
    }
    if (d.present && !read_states) continue;
    const std::optional<DeviceState> state = ReadState(index);
    if (!d.present) {
      d.present = true;
      d.driver_gone = false;
      d.state = state;
      NewBaseline(&d);
      log_->info("device {} appeared (state {})", index, state ? DeviceStateName(*state) : "?");
      continue;
    }
    SetState(index, d, state);
  }
}

void HealthEvidence::PollCounters(std::chrono::steady_clock::time_point now) {
  // A scan applied since the last poll read presence and state itself: reading them again at
  // once would only repeat it (neuron-ls reads each device's directory and reset state once).
  if (options_.poll_state && !scan_since_poll_) PollPresence(now);
  scan_since_poll_ = false;
  for (auto& [index, d] : devices_) {
    if (!d.present) continue;
    std::vector<UnreadableFile> unreadable;
    PollCounterRows(index, d, &unreadable);
    PollDriverHealth(index, d, now, &unreadable);
    NoteUnreadable(index, d, std::move(unreadable));
  }
}

// Each row of kHealthCounters the device's tree should hold: after a rebaseline, and when it
// appeared or restarted lower, its value is the baseline; else a rise above the baseline is
// evidence until the next one. A kFault row's file that cannot be read is noted unreadable; a
// kDegraded row's is not, since a degraded flag cannot make health unknown.
void HealthEvidence::PollCounterRows(int index, DeviceEvidence& d,
                                     std::vector<UnreadableFile>* unreadable) {
  const std::filesystem::path dir = root_.NeuronDevice(index);
  for (size_t i = 0; i < kHealthCounters.size(); ++i) {
    const HealthCounter& c = kHealthCounters[i];
    std::optional<uint64_t>& base = d.counter_baseline[i];
    if (d.rebaseline) base.reset();
    if (c.group && !d.groups.Has(*c.group)) continue;
    if (c.still_on_v2 && d.v2_chip) continue;
    const absl::StatusOr<uint64_t> now = ReadU64(dir / c.dir / c.name);
    if (!now.ok()) {
      if (c.meaning == CounterMeaning::kFault) {
        unreadable->push_back({(std::filesystem::path(c.dir) / c.name).string(), c.evidence_class});
      }
      continue;
    }
    if (!base || *now < *base) {
      base = *now;
    } else if (*now > *base) {
      if (!d.counter_rose[i]) {
        log_->warn("device {}: {}/{} rose {} -> {}{}", index, c.dir, c.name, *base, *now,
                   c.meaning == CounterMeaning::kDegraded ? " (degraded)" : "");
      }
      d.counter_rose[i] = true;
    }
  }
  d.rebaseline = false;
}

void HealthEvidence::PollDriverHealth(int index, DeviceEvidence& d,
                                      std::chrono::steady_clock::time_point now,
                                      std::vector<UnreadableFile>* unreadable) {
  if (!d.groups.Has(NodeGroup::kHealthComponents)) return;
  const std::filesystem::path dir = root_.NeuronDevice(index);
  absl::StatusOr<std::string> list = ReadAttribute(dir / sysfs::kUnhealthyComponents);
  ParsedComponents reported = list.ok() ? ParseHealthComponents(*list) : ParsedComponents{};
  if (!list.ok()) {
    unreadable->push_back({std::string(sysfs::kUnhealthyComponents), EvidenceClass::kComponents});
  }
  if (reported.known != d.reported.known || reported.unknown != d.reported.unknown) {
    log_->warn("device {}: the driver lists unhealthy components [{}{}{}]", index,
               reported.known.Join(), reported.unknown.empty() ? "" : ",",
               fmt::join(reported.unknown, ","));
  }
  d.reported = std::move(reported);

  absl::StatusOr<uint64_t> beat = ReadU64(dir / sysfs::kHealthcheckHeartbeat);
  if (!beat.ok()) {
    unreadable->push_back({std::string(sysfs::kHealthcheckHeartbeat), EvidenceClass::kHeartbeat});
    return;
  }
  if (!d.heartbeat || *beat != *d.heartbeat) {
    if (d.heartbeat_stalled) log_->info("device {}: heartbeat moves again", index);
    d.heartbeat = *beat;
    d.heartbeat_moved = now;
    d.heartbeat_stalled = false;
  } else if (!d.heartbeat_stalled && now - d.heartbeat_moved > 2 * options_.heartbeat_period) {
    log_->warn(
        "device {}: healthcheck_heartbeat stalled at {} for {} ms", index, *beat,
        std::chrono::duration_cast<std::chrono::milliseconds>(now - d.heartbeat_moved).count());
    d.heartbeat_stalled = true;
  }
}

void HealthEvidence::NoteUnreadable(int index, DeviceEvidence& d,
                                    std::vector<UnreadableFile> unreadable) const {
  if (unreadable != d.unreadable) {
    if (unreadable.empty()) {
      log_->info("device {}: every health evidence file reads again", index);
    } else {
      log_->warn(
          "device {}: {} health evidence file(s) cannot be read (first: {}): its health "
          "is unknown",
          index, unreadable.size(), unreadable.front().path);
    }
  }
  d.unreadable = std::move(unreadable);
}

}  // namespace neuron

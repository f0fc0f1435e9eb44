#include "core/node/health_evidence.h"

#include <set>

#include "core/base/file_io.h"
#include "core/model/catalog.h"

namespace neuron {
namespace {

// The files whose rise is health evidence, named one by one in core/driver/health_counters.h
// (docs/architecture.md#health).
using EvidenceFile = HealthEvidenceFile;
constexpr size_t kEvidenceCount = kEccEvidenceCount;
const std::array<EvidenceFile, kEvidenceCount>& EvidenceFiles() { return kHealthEvidence; }

}  // namespace

HealthEvidence::HealthEvidence(RootPaths root, std::shared_ptr<spdlog::logger> log)
    : root_(std::move(root)), log_(std::move(log)) {}

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
    case EventKind::kDeviceStateChanged: {
      if (!devices_.count(e.device)) return true;
      DeviceEvidence& d = devices_[e.device];
      const bool recovered = e.state == DeviceState::kReady && d.state != DeviceState::kReady;
      d.state = e.state;
      if (recovered) NewBaseline(&d);
      log_->info("device {} state {}", e.device, e.state ? DeviceStateName(*e.state) : "?");
      return false;
    }
    case EventKind::kHardwareError:
      if (devices_.count(e.device)) {
        devices_[e.device].hw_error = true;
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
    case EventKind::kEfaPortStateChanged:
      efas_[e.efa].port_state = e.port_state;
      log_->info("EFA {} port {}", e.efa, e.port_state);
      return false;
  }
  return false;
}

void HealthEvidence::NewBaseline(DeviceEvidence* d) {
  d->rebaseline = true;
  d->ecc_rose = false;
  d->hw_error = false;
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
    if (nd.numa_node) e.numa = nd.numa_node;
    if (!nd.bdf.empty()) e.bdf = nd.bdf;
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
  const int cpd = inv.LogicalCoresPerDevice();
  if (cpd > 0) cores_per_device_ = cpd;
  if (!inv.instance_type.empty()) instance_type_ = inv.instance_type;
  if (inv.driver.version) driver_version_ = *inv.driver.version;
}

void HealthEvidence::PollEcc() {
  for (auto& [index, d] : devices_) {
    if (!d.present) continue;
    std::array<std::optional<uint64_t>, kEvidenceCount> now;
    for (size_t i = 0; i < kEvidenceCount; ++i) {
      const EvidenceFile& f = EvidenceFiles()[i];
      if (f.group && !d.groups.Has(*f.group)) continue;
      absl::StatusOr<uint64_t> v = ReadU64(root_.NeuronDevice(index) / f.dir / f.name);
      if (v.ok()) now[i] = *v;
    }
    if (d.rebaseline) {
      d.ecc_baseline = now;
      d.rebaseline = false;
      continue;
    }
    for (size_t i = 0; i < now.size(); ++i) {
      if (!now[i]) continue;
      if (d.ecc_baseline[i] && *now[i] > *d.ecc_baseline[i]) {
        if (!d.ecc_rose) {
          log_->warn("device {}: {}/{} rose {} -> {}", index, EvidenceFiles()[i].dir,
                     EvidenceFiles()[i].name, *d.ecc_baseline[i], *now[i]);
        }
        d.ecc_rose = true;
      } else if (!d.ecc_baseline[i] || *now[i] < *d.ecc_baseline[i]) {
        d.ecc_baseline[i] = now[i];  // a counter that appeared or restarted
      }
    }
  }
}

}  // namespace neuron

// Inventory methods and the attribute parsing shared by both discovery back ends.

#include "core/discovery/inventory.h"

#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "core/base/component_log.h"
#include "core/base/file_io.h"
#include "core/discovery/internal/discovery_internal.h"
#include "core/model/core_ids.h"
#include "core/model/device_id.h"

namespace neuron {

const NeuronDevice* Inventory::FindDevice(int index) const {
  for (const NeuronDevice& d : devices) {
    if (d.index == index) return &d;
  }
  return nullptr;
}

const EfaInterface* Inventory::FindEfa(std::string_view name) const {
  for (const EfaInterface& e : efas) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const InstanceSpec* Inventory::Spec() const {
  if (instance_type.empty()) return nullptr;
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(instance_type);
  return spec.ok() ? *spec : nullptr;
}

int Inventory::LogicalCoresPerDevice() const {
  const int l = lnc > 0 ? lnc : 1;
  if (const InstanceSpec* spec = Spec()) return neuron::LogicalCoresPerDevice(*spec, l);
  // Unknown instance type: trust what the devices say.
  for (const NeuronDevice& d : devices) {
    if (d.physical_cores > 0) return std::max(1, d.physical_cores / l);
  }
  return 0;
}

std::vector<int> Inventory::CoreIds(int device_index) const {
  std::vector<int> ids;
  if (FindDevice(device_index) == nullptr) return ids;
  const int n = LogicalCoresPerDevice();
  for (int k = 0; k < n; ++k) ids.push_back(GlobalCoreId(device_index, k, n));
  return ids;
}

Topology Inventory::LinkTopology() const {
  int size = 0;
  for (const NeuronDevice& d : devices) size = std::max(size, d.index + 1);
  std::vector<std::vector<int>> neighbours(size);
  for (const NeuronDevice& d : devices) {
    if (d.index >= 0) neighbours[d.index] = d.connected;
  }
  return Topology(neighbours);
}

size_t Inventory::MissingNodeCount() const {
  size_t n = 0;
  for (const NeuronDevice& d : devices) n += d.missing_nodes.size();
  return n;
}

std::string Inventory::FirstMissingNode() const {
  for (const NeuronDevice& d : devices) {
    if (!d.missing_nodes.empty()) {
      return fmt::format("{}{}/{}", sysfs::kDevicePrefix, d.index, d.missing_nodes.front());
    }
  }
  return "";
}

std::string DriverLayoutProblem(const Inventory& inv) {
  const DriverInfo& drv = inv.driver;
  const size_t missing = inv.MissingNodeCount();
  if (drv.generation != nullptr && missing == 0) return "";
  // "2.31.7.0" -> "2.31.7": the build number says nothing to a reader.
  std::string shown = drv.version.value_or("(no version)");
  if (drv.version && std::count(shown.begin(), shown.end(), '.') == 3) {
    shown.resize(shown.rfind('.'));
  }
  std::string out = drv.generation == nullptr
                        ? fmt::format("driver {}: unknown sysfs layout, {} node{} missing", shown,
                                      missing, missing == 1 ? "" : "s")
                        : fmt::format("driver {}: {} sysfs node{} of generation {} missing", shown,
                                      missing, missing == 1 ? "" : "s", drv.generation->name);
  if (missing > 0) out += fmt::format(" (first: {})", inv.FirstMissingNode());
  return out;
}

namespace discovery_internal {
namespace {

spdlog::logger& DiscoveryLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("discovery");
  return *log;
}

// Reads a text attribute; absent (NotFound) gives nullopt silently, other failures a warning.
std::optional<std::string> ReadText(AttributeSource& src, std::string_view rel,
                                    std::vector<std::string>* warnings) {
  absl::StatusOr<std::string> raw = src.Read(rel);
  if (!raw.ok()) {
    if (!absl::IsNotFound(raw.status())) warnings->push_back(std::string{raw.status().message()});
    return std::nullopt;
  }
  std::string_view v = *raw;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.remove_suffix(1);
  return std::string(v);
}

void Warn(std::vector<std::string>* warnings, const absl::Status& s) {
  warnings->push_back(std::string{s.message()});
}

// The published attributes (device_attributes.h). An empty file is absent ("\n" is how
// serial_number says the firmware read failed); a kInt row's text must parse.
void ReadAttributes(AttributeSource& src, DeviceAttributes* out, std::vector<std::string>* w) {
  for (size_t i = 0; i < kDeviceAttributes.size(); ++i) {
    const DeviceAttributeSpec& spec = kDeviceAttributes[i];
    std::optional<std::string> v = ReadText(src, spec.file, w);
    if (v && v->empty()) v.reset();
    if (v && spec.type == AttributeType::kInt) {
      if (absl::StatusOr<int64_t> n = ParseI64(*v, src.Display(spec.file)); !n.ok()) {
        Warn(w, n.status());
        v.reset();
      }
    }
    out->Set(i, std::move(v));
  }
}

// "4: ACTIVE" -> "ACTIVE"; text without the numeric prefix is kept whole.
std::string StripPortPrefix(std::string_view v) {
  const size_t colon = v.find(": ");
  if (colon != std::string_view::npos && colon > 0 &&
      std::all_of(v.begin(), v.begin() + colon, [](char c) { return c >= '0' && c <= '9'; })) {
    v.remove_prefix(colon + 2);
  }
  return std::string(v);
}

std::optional<int> IndexAfter(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  // Kernel names print the index with %d: no sign, no leading zeros.
  if (name.empty() || (name.size() > 1 && name.front() == '0')) return std::nullopt;
  int out = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), out);
  if (ec != std::errc() || end != name.data() + name.size() || out < 0) return std::nullopt;
  return out;
}

const ChipSpec* ChipFor(const NeuronDevice& d, const InstanceSpec* instance) {
  std::set<const ChipSpec*> chips;
  for (const InstanceSpec& s : AllInstances()) chips.insert(s.chip);
  for (const ChipSpec* c : chips) {
    if (!d.device_name.empty() && d.device_name == c->device_name) return c;
  }
  for (const ChipSpec* c : chips) {
    if (!d.instance_type.empty() && d.instance_type == c->instance_type) return c;
  }
  return instance != nullptr ? instance->chip : nullptr;
}

}  // namespace

std::optional<int> UverbsIndex(std::string_view name) {
  return IndexAfter(name, sysfs::kUverbsPrefix);
}
std::optional<int> NeuronIndex(std::string_view name) {
  // No driver makes a device beyond its limit (core/model/device_id.h); a name that claims one is
  // not a Neuron device's.
  std::optional<int> index = IndexAfter(name, sysfs::kDevicePrefix);
  if (index && *index >= kMaxDevices) return std::nullopt;
  return index;
}

void ReadNeuronDevice(AttributeSource& src, NeuronDevice* dev, std::vector<std::string>* w) {
  if (auto v = ReadText(src, sysfs::kArchType, w)) dev->arch_type = *v;
  if (auto v = ReadText(src, sysfs::kInstanceType, w)) dev->instance_type = *v;
  if (auto v = ReadText(src, sysfs::kDeviceName, w)) dev->device_name = *v;
  static const std::string kCore0ArchType =
      (std::filesystem::path(sysfs::CoreDir(0)) / sysfs::kArchType).string();
  if (auto v = ReadText(src, kCore0ArchType, w)) dev->nc_arch_type = *v;
  if (auto v = ReadText(src, sysfs::kCoreCount, w)) {
    absl::StatusOr<int64_t> n = ParseI64(*v, src.Display(sysfs::kCoreCount));
    if (!n.ok()) {
      Warn(w, n.status());
    } else if (*n < 1 || *n > 64) {
      w->push_back(
          fmt::format("{}: core count {} out of range 1..64", src.Display(sysfs::kCoreCount), *n));
    } else {
      dev->physical_cores = static_cast<int>(*n);
    }
  }
  if (auto v = ReadText(src, sysfs::kConnectedDevices, w)) {
    absl::StatusOr<std::vector<int>> ids = ParseIdList(*v, src.Display(sysfs::kConnectedDevices));
    if (ids.ok()) {
      dev->connected = *std::move(ids);
    } else {
      Warn(w, ids.status());
    }
  }
  if (auto v = ReadText(src, sysfs::kReset, w)) {
    absl::StatusOr<int64_t> n = ParseI64(*v, src.Display(sysfs::kReset));
    if (!n.ok()) {
      Warn(w, n.status());
    } else if (*n < 0 || *n > 2) {
      w->push_back(fmt::format("{}: device state {} is not 0 (RESET), 1 (READY) or 2 (INVALID)",
                               src.Display(sysfs::kReset), *n));
    } else {
      dev->state = static_cast<DeviceState>(*n);
    }
  }
  ReadAttributes(src, &dev->attributes, w);
}

void AddNeuronDevice(NeuronDevice dev, std::vector<std::string> warnings, BdfResolver& resolver,
                     const PciPlacementReader& read_pci, Inventory* inv) {
  absl::StatusOr<std::string> bdf = resolver.Resolve(dev.index);
  if (bdf.ok()) {
    dev.bdf = *bdf;
    read_pci(dev.bdf, &dev.numa_node, &dev.cpulist, &warnings);
  } else if (!absl::IsNotFound(bdf.status())) {
    warnings.push_back(std::string{bdf.status().message()});
  }
  inv->devices.push_back(std::move(dev));
  inv->warnings.insert(inv->warnings.end(), warnings.begin(), warnings.end());
}

void ReadPciPlacement(AttributeSource& pci, std::optional<int>* numa, std::string* cpulist,
                      std::vector<std::string>* w) {
  if (auto v = ReadText(pci, sysfs::kNumaNode, w)) {
    absl::StatusOr<int64_t> n = ParseI64(*v, pci.Display(sysfs::kNumaNode));
    if (!n.ok()) {
      Warn(w, n.status());
    } else if (*n < -1 || *n > 1023) {
      w->push_back(fmt::format("{}: NUMA node {} out of range", pci.Display(sysfs::kNumaNode), *n));
    } else if (*n >= 0) {
      *numa = static_cast<int>(*n);  // -1: the platform has no NUMA information
    }
  }
  if (cpulist == nullptr) return;
  if (auto v = ReadText(pci, sysfs::kLocalCpulist, w)) {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(*v, pci.Display(sysfs::kLocalCpulist));
    if (cpus.ok()) {
      *cpulist = *v;
    } else {
      Warn(w, cpus.status());
    }
  }
}

void ReadEfaPort(AttributeSource& ib, EfaInterface* efa, std::vector<std::string>* w) {
  if (auto v = ReadText(ib, sysfs::kPortState, w)) efa->port_state = StripPortPrefix(*v);
  if (auto v = ReadText(ib, sysfs::kPortPhysState, w)) efa->phys_state = StripPortPrefix(*v);
  if (auto v = ReadText(ib, sysfs::kPortRate, w)) {
    // "100 Gb/sec (4X EDR)"; fractional rates ("12.5 Gb/sec") keep their whole part.
    int gbps = 0;
    const std::string_view text = *v;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), gbps);
    const std::string_view after(end, text.data() + text.size() - end);
    if (ec != std::errc() || gbps < 0 ||
        !(after.starts_with(" Gb/sec") || after.starts_with("."))) {
      w->push_back(fmt::format("{}: malformed value \"{}\" (expected a rate like \"100 Gb/sec\")",
                               ib.Display(sysfs::kPortRate), v->substr(0, 40)));
    } else {
      efa->rate = *v;
      efa->rate_gbps = gbps;
    }
  }
}

std::unique_ptr<BdfResolver> MakeResolver(const DiscoveryOptions& options, const RootPaths& root) {
  return options.bdf_resolver ? options.bdf_resolver(root) : MakeIoctlBdfResolver(root);
}

void FinishInventory(const DiscoveryOptions& options, const NodeIdentity& identity,
                     Inventory* inv) {
  // docs/architecture.md#instance-identity: the instance's identity is in DMI, on a real node as on
  // the simulator.
  inv->instance_type = identity.dmi_product_name;
  // The asset tag names the plugin's sockets: only an instance id's form is used, so nothing
  // read from the firmware reaches a path unchecked.
  if (IsInstanceId(identity.dmi_asset_tag)) {
    inv->instance_id = identity.dmi_asset_tag;
  } else if (!identity.dmi_asset_tag.empty()) {
    inv->warnings.push_back(
        fmt::format("DMI {} is not an EC2 instance id (\"i-\" and 8 or 17 hex digits); not used",
                    sysfs::kDmiBoardAssetTag));
  }
  std::sort(inv->devices.begin(), inv->devices.end(),
            [](const NeuronDevice& a, const NeuronDevice& b) { return a.index < b.index; });
  std::sort(inv->efas.begin(), inv->efas.end(),
            [](const EfaInterface& a, const EfaInterface& b) { return a.name < b.name; });

  // docs/architecture.md#lnc: --lnc (or NEURON_LOGICAL_NC_CONFIG), else the instance default, as on
  // a real node: the driver does not publish the runtime's LNC.
  const InstanceSpec* spec = inv->Spec();
  int lnc = options.lnc;
  if (spec != nullptr) {
    absl::StatusOr<int> resolved = ResolveLnc(*spec, lnc);
    if (!resolved.ok()) {
      DiscoveryLog().warn("{}; using the default LNC {}", std::string{resolved.status().message()},
                          spec->default_lnc);
      resolved = spec->default_lnc;
    }
    lnc = *resolved;
  } else if (lnc != 1 && lnc != 2) {
    const bool trn2 = !inv->devices.empty() && inv->devices.front().device_name == "Trainium2";
    lnc = trn2 ? 2 : 1;
  }
  inv->lnc = lnc;
  // Back ends enumerate in different orders; a stable order makes inventories comparable.
  std::sort(inv->warnings.begin(), inv->warnings.end());

  for (NeuronDevice& d : inv->devices) {
    if (const ChipSpec* chip = ChipFor(d, spec)) d.memory_bytes = chip->hbm_bytes;
  }
}

}  // namespace discovery_internal
}  // namespace neuron

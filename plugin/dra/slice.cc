#include "plugin/dra/slice.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>

#include "core/model/catalog.h"
#include "fmt/format.h"

namespace neuron::plugin::dra {
namespace {

using nlohmann::json;

// The groups AWS's claim templates match on (aws-neuron-sdk containers/neuron-dra.rst, "Example
// 1"): 4, 8 and 16 connected devices; 1 is the EFA pairing.
constexpr std::array<int, 3> kGroupSizes{4, 8, 16};
constexpr std::string_view kGroupDomain = "resource.aws.com/";

// "0000:10:1c.0" -> 0x10; nullopt when it is not a BDF.
std::optional<int> BusOf(std::string_view bdf) {
  if (bdf.size() < 7 || bdf[4] != ':') return std::nullopt;
  int bus = 0;
  for (char c : bdf.substr(5, 2)) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    bus =
        bus * 16 + (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return bus;
}

// A taint value is a label value (63 characters of [A-Za-z0-9._-], alphanumeric at both ends):
// "state INVALID" -> "state-INVALID".
std::string TaintValue(std::string_view reason) {
  std::string out;
  for (char c : reason) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') {
      out += c;
    } else if (c == ' ' && !out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  if (out.size() > kMaxDnsLabelLength) out.resize(kMaxDnsLabelLength);
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(0, 1);
  return out.empty() ? "unhealthy" : out;
}

json Taints(bool unhealthy, bool unknown, std::string_view reason, TaintEffect effect) {
  json taints = json::array();
  // Unknown health is no evidence of a fault: no taint (the health service says UNKNOWN).
  if (unhealthy && !unknown) {
    taints.push_back(
        {{"key", kTaintKey}, {"value", TaintValue(reason)}, {"effect", TaintEffectName(effect)}});
  }
  return taints;
}

absl::Status CheckAttributes(const std::string& device, const json& attributes, size_t capacities) {
  if (attributes.size() + capacities > kMaxAttributesPerDevice) {
    return absl::InvalidArgumentError(
        fmt::format("device {}: {} attributes and capacities, the API allows {}", device,
                    attributes.size() + capacities, kMaxAttributesPerDevice));
  }
  for (const auto& [name, value] : attributes.items()) {
    const size_t slash = name.rfind('/');
    const std::string id = slash == std::string::npos ? name : name.substr(slash + 1);
    if (id.empty() || id.size() > kMaxAttributeIdLength) {
      return absl::InvalidArgumentError(
          fmt::format("device {}: attribute name '{}' breaks the API's rules", device, name));
    }
    if (value.contains("string") &&
        value["string"].get<std::string>().size() > kMaxStringValueLength) {
      return absl::InvalidArgumentError(
          fmt::format("device {}: attribute {} is longer than {} characters", device, name,
                      kMaxStringValueLength));
    }
  }
  return absl::OkStatus();
}

// The node facts both kinds of device carry.
void NodeAttributes(const NodeView& view, const SliceOptions& options, json* attributes) {
  json& a = *attributes;
  if (!view.instance_type.empty()) a["instanceType"] = {{"string", view.instance_type}};
  if (!view.driver_version.empty()) a["neuronDriverVersion"] = {{"string", view.driver_version}};
  if (!options.dra_driver_version.empty()) {
    a["draDriverVersion"] = {{"string", options.dra_driver_version}};
  }
}

void GroupAttributes(const std::map<int, int>& groups_by_size, json* attributes) {
  for (const auto& [size, group] : groups_by_size) {
    (*attributes)[fmt::format("{}devicegroup{}_id", kGroupDomain, size)] = {{"int", group}};
  }
}

// Connected-group ids per size for one device (sizes whose group is incomplete are left out).
std::map<int, int> GroupsOf(const NodeView& view, int device) {
  std::map<int, int> out;
  const Topology& topology = view.allocator->topology();
  for (int size : kGroupSizes) {
    if (const std::optional<int> g = ConnectedGroup(topology, topology.size(), device, size)) {
      out[size] = *g;
    }
  }
  return out;
}

json NeuronDevice(const NodeView& view, const SliceOptions& options, const HardwareDevice& d,
                  const std::string& efa_bdf) {
  json a = json::object();
  a["deviceId"] = {{"int", d.index}};
  a["resourceType"] = {{"string", "neuron_device"}};
  NodeAttributes(view, options, &a);
  if (view.cores_per_device > 0) a["coreCount"] = {{"int", view.cores_per_device}};
  if (d.numa) a["numaNode"] = {{"int", *d.numa}};
  if (!d.bdf.empty()) a["pciBusId"] = {{"string", d.bdf}};
  const Topology& topology = view.allocator->topology();
  // The 4x4 torus (docs/hardware.md#neuronlink-topology): device d at row d/4, column d%4.
  if (topology.size() == 16 && topology.Neighbours(d.index).size() == 4) {
    a["topology_x"] = {{"int", d.index % 4}};
    a["topology_y"] = {{"int", d.index / 4}};
  }
  const std::map<int, int> groups = GroupsOf(view, d.index);
  if (groups.count(4)) a["topology4_id"] = {{"int", groups.at(4)}};
  if (groups.count(8)) a["topology8_id"] = {{"int", groups.at(8)}};
  GroupAttributes(groups, &a);
  // devicegroup1_id: the EFA beside the device (NEURON-TODAY.md); without one, the device's own
  // BDF, so that a one-device claim matching on it still finds every device.
  const std::string& group1 = efa_bdf.empty() ? d.bdf : efa_bdf;
  if (!group1.empty()) a[fmt::format("{}devicegroup1_id", kGroupDomain)] = {{"string", group1}};
  json out = {{"name", NeuronDeviceName(d.index)}, {"attributes", a}};
  // HBM per device from the catalog (docs/hardware.md), when the instance type is known.
  const absl::StatusOr<const InstanceSpec*> spec = FindInstance(view.instance_type);
  if (spec.ok() && (*spec)->chip != nullptr) {
    out["capacity"] = {{"memory", {{"value", std::to_string((*spec)->chip->hbm_bytes)}}}};
  }
  json taints = Taints(!d.healthy, d.unknown, d.reason, options.taint_effect);
  if (!taints.empty()) out["taints"] = std::move(taints);
  return out;
}

json EfaDevice(const NodeView& view, const SliceOptions& options, const HardwareEfa& e,
               const std::vector<int>& beside) {
  json a = json::object();
  a["resourceType"] = {{"string", "efa"}};
  a["interface"] = {{"string", e.name}};
  NodeAttributes(view, options, &a);
  if (e.numa) a["numaNode"] = {{"int", *e.numa}};
  if (!e.bdf.empty()) {
    a["pciBusId"] = {{"string", e.bdf}};
    a[fmt::format("{}devicegroup1_id", kGroupDomain)] = {{"string", e.bdf}};
  }
  // A group id only when every device this EFA serves is in that one group.
  std::map<int, int> common;
  for (size_t i = 0; i < beside.size(); ++i) {
    const std::map<int, int> groups = GroupsOf(view, beside[i]);
    if (i == 0) {
      common = groups;
      continue;
    }
    std::erase_if(common, [&](const auto& kv) {
      const auto it = groups.find(kv.first);
      return it == groups.end() || it->second != kv.second;
    });
  }
  GroupAttributes(common, &a);
  json out = {{"name", EfaDeviceName(e.name)}, {"attributes", a}};
  json taints = Taints(!e.healthy, false, e.reason, options.taint_effect);
  if (!taints.empty()) out["taints"] = std::move(taints);
  return out;
}

}  // namespace

std::string_view TaintEffectName(TaintEffect e) {
  return e == TaintEffect::kNoExecute ? "NoExecute" : "NoSchedule";
}

absl::StatusOr<TaintEffect> ParseTaintEffect(std::string_view text) {
  if (text == "NoSchedule") return TaintEffect::kNoSchedule;
  if (text == "NoExecute") return TaintEffect::kNoExecute;
  return absl::InvalidArgumentError(fmt::format("'{}' is not NoSchedule or NoExecute", text));
}

std::string NeuronDeviceName(int index) { return fmt::format("neuron-{}", index); }

std::string EfaDeviceName(std::string_view ifname) {
  std::string out = "efa-";
  for (char c : ifname) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

absl::Status ValidateDnsLabel(std::string_view what, std::string_view name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  const bool ok =
      !name.empty() && name.size() <= kMaxDnsLabelLength && alnum(name.front()) &&
      alnum(name.back()) &&
      std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "{} '{}' is not a DNS label (1-63 of a-z, 0-9 and '-', alphanumeric at both ends)", what,
      name));
}

absl::Status ValidateDnsSubdomain(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return absl::InvalidArgumentError(fmt::format("{} '{}' is not 1-253 characters", what, name));
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string_view::npos) dot = name.size();
    if (absl::Status s = ValidateDnsLabel(what, name.substr(start, dot - start)); !s.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{} '{}' is not a DNS subdomain (dot-separated DNS labels)", what, name));
    }
    start = dot + 1;
  }
  return absl::OkStatus();
}

std::optional<int> ConnectedGroup(const Topology& topology, int node_devices, int device,
                                  int size) {
  if (size < 1 || device < 0 || device >= node_devices) return std::nullopt;
  const int group = device / size;
  if ((group + 1) * size > node_devices) return std::nullopt;
  std::vector<int> members(size);
  for (int i = 0; i < size; ++i) members[i] = group * size + i;
  if (size > 1 && !topology.IsConnected(members)) return std::nullopt;
  return group;
}

std::vector<std::string> EfaBeside(const NodeView& view) {
  std::vector<std::string> out(view.devices.size());
  if (view.efas.empty()) return out;
  // Locality key per device: its PCI bus when an EFA shares it, else its NUMA node.
  std::map<std::string, std::vector<std::string>> efas;  // key -> EFA BDFs, ascending
  for (const auto& [name, e] : view.efas) {
    if (e.bdf.empty()) continue;
    if (const std::optional<int> bus = BusOf(e.bdf)) {
      efas[fmt::format("bus{}", *bus)].push_back(e.bdf);
    }
    if (e.numa) efas[fmt::format("numa{}", *e.numa)].push_back(e.bdf);
  }
  std::map<std::string, std::vector<size_t>> devices;  // key -> positions in `out`
  size_t pos = 0;
  for (const auto& [index, d] : view.devices) {
    const std::optional<int> bus = BusOf(d.bdf);
    const std::string by_bus = bus ? fmt::format("bus{}", *bus) : "";
    const std::string by_numa = d.numa ? fmt::format("numa{}", *d.numa) : "";
    if (!by_bus.empty() && efas.count(by_bus)) {
      devices[by_bus].push_back(pos);
    } else if (!by_numa.empty() && efas.count(by_numa)) {
      devices[by_numa].push_back(pos);
    }
    ++pos;
  }
  for (auto& [key, positions] : devices) {
    std::vector<std::string>& bdfs = efas[key];
    std::sort(bdfs.begin(), bdfs.end());
    for (size_t i = 0; i < positions.size(); ++i) {
      out[positions[i]] = bdfs[i * bdfs.size() / positions.size()];
    }
  }
  return out;
}

absl::StatusOr<json> BuildSliceSpec(const NodeView& view, const SliceOptions& options,
                                    uint64_t generation) {
  if (absl::Status s = ValidateDnsSubdomain("the node (pool) name", options.node_name); !s.ok()) {
    return s;
  }
  json devices = json::array();
  const std::vector<std::string> beside = EfaBeside(view);
  std::map<std::string, std::vector<int>> served;  // EFA BDF -> devices beside it
  size_t pos = 0;
  for (const auto& [index, d] : view.devices) {
    if (!beside[pos].empty()) served[beside[pos]].push_back(index);
    ++pos;
    // A removed device is not offered: the slice never claims what the node lacks.
    if (d.present) devices.push_back(NeuronDevice(view, options, d, beside[pos - 1]));
  }
  for (const auto& [name, e] : view.efas) {
    if (!e.present) continue;
    const auto it = served.find(e.bdf);
    devices.push_back(
        EfaDevice(view, options, e, it == served.end() ? std::vector<int>{} : it->second));
  }
  if (devices.size() > kMaxDevicesPerSlice) {
    return absl::InvalidArgumentError(fmt::format("{} devices; a ResourceSlice holds at most {}",
                                                  devices.size(), kMaxDevicesPerSlice));
  }
  const bool tainted = std::any_of(devices.begin(), devices.end(),
                                   [](const json& d) { return d.contains("taints"); });
  if (tainted && devices.size() > kMaxDevicesPerSliceWithTaints) {
    return absl::InvalidArgumentError(
        fmt::format("{} devices with a taint among them; such a ResourceSlice holds at most {}",
                    devices.size(), kMaxDevicesPerSliceWithTaints));
  }
  for (const json& d : devices) {
    const std::string name = d["name"].get<std::string>();
    if (absl::Status s = ValidateDnsLabel("device name", name); !s.ok()) return s;
    const size_t capacities = d.contains("capacity") ? d["capacity"].size() : 0;
    if (absl::Status s = CheckAttributes(name, d["attributes"], capacities); !s.ok()) return s;
  }
  return json{
      {"driver", kDriverName},
      {"pool",
       {{"name", options.node_name}, {"generation", generation}, {"resourceSliceCount", 1}}},
      {"nodeName", options.node_name},
      {"devices", std::move(devices)}};
}

SliceState::SliceState(SliceOptions options, uint64_t first_generation)
    : options_(std::move(options)), generation_(first_generation) {}

void SliceState::Update(const NodeView& view) {
  absl::StatusOr<json> spec = BuildSliceSpec(view, options_, 0);
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = true;
  if (view.generation < view_generation_) return;  // an older picture than the one shown
  view_generation_ = view.generation;
  if (!spec.ok()) {
    // Keep serving the last good slice: a slice the API refuses helps no one.
    error_ = std::string{spec.status().message()};
    return;
  }
  error_.clear();
  if (spec_ && *spec_ == *spec) return;
  if (spec_) ++generation_;
  spec_ = *std::move(spec);
}

SliceState::Document SliceState::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_) return {503, "no hardware scan yet\n"};
  if (!spec_) return {503, "no valid slice: " + error_ + "\n"};
  json spec = *spec_;
  spec["pool"]["generation"] = generation_;
  const json doc = {{"generation", generation_}, {"nodeName", options_.node_name}, {"spec", spec}};
  return {200, doc.dump() + "\n"};
}

uint64_t SliceState::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

}  // namespace neuron::plugin::dra

#include "plugin/dra/slice.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>

#include "core/driver/device_attributes.h"
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

// The node facts both kinds of device carry.
void NodeAttributes(const NodeView& view, const SliceOptions& options, json* attributes) {
  json& a = *attributes;
  const NodeFacts& node = view.node;
  if (!node.instance_type.empty()) a["instanceType"] = {{"string", node.instance_type}};
  if (!node.driver_version.empty()) a["neuronDriverVersion"] = {{"string", node.driver_version}};
  if (!options.dra_driver_version.empty()) {
    // A version attribute, as AWS's (aws-neuron-sdk deploy/eks/dra.rst, "Common Attributes"):
    // CEL compares it with semver(), not as text.
    a["draDriverVersion"] = {{"version", options.dra_driver_version}};
  }
}

// AWS publishes devicegroup{4,8,16}_id as strings equal within a group (aws-neuron-sdk
// deploy/eks/dra.rst, "EFA-Enabled Instance Attributes"); ours name the size and the group,
// "g4-1", so a slice reads plainly. matchAttribute compares them whatever their text.
void GroupAttributes(const std::map<int, int>& groups_by_size, json* attributes) {
  for (const auto& [size, group] : groups_by_size) {
    (*attributes)[fmt::format("{}devicegroup{}_id", kGroupDomain, size)] = {
        {"string", fmt::format("g{}-{}", size, group)}};
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

// The placement facts a Neuron device and its NeuronCores share: NUMA node, torus position,
// connected groups, and the EFA beside the device.
void PlacementAttributes(const NodeView& view, const HardwareDevice& d, const std::string& efa_bdf,
                         json* attributes) {
  json& a = *attributes;
  if (d.numa) a["numaNode"] = {{"int", *d.numa}};
  const Topology& topology = view.allocator->topology();
  // The 4x4 torus (docs/hardware.md#neuronlink-topology): device d at row d/4, column d%4.
  // AWS's attributes (aws-neuron-sdk deploy/eks/dra.rst): topology_x is the row, topology_y the
  // column.
  if (topology.size() == 16 && topology.Neighbours(d.index).size() == 4) {
    a["topology_x"] = {{"int", d.index / 4}};
    a["topology_y"] = {{"int", d.index % 4}};
  }
  const std::map<int, int> groups = GroupsOf(view, d.index);
  if (groups.count(4)) a["topology4_id"] = {{"int", groups.at(4)}};
  if (groups.count(8)) a["topology8_id"] = {{"int", groups.at(8)}};
  GroupAttributes(groups, &a);
  // devicegroup1_id: the EFA beside the device (NEURON-TODAY.md); without one, the device's own
  // BDF, so that a one-device claim matching on it still finds every device.
  const std::string& group1 = efa_bdf.empty() ? d.bdf : efa_bdf;
  if (!group1.empty()) a[fmt::format("{}devicegroup1_id", kGroupDomain)] = {{"string", group1}};
}

// The device's published attributes (core/driver/device_attributes.h), each as read; an
// unreadable one is left out rather than published empty.
void PublishedAttributes(const HardwareDevice& d, json* attributes) {
  for (size_t i = 0; i < kDeviceAttributes.size(); ++i) {
    const std::optional<std::string>& v = d.attributes.values()[i];
    if (!v) continue;
    const DeviceAttributeSpec& spec = kDeviceAttributes[i];
    if (spec.type == AttributeType::kString) {
      (*attributes)[spec.dra_name] = {{"string", *v}};
    } else if (const std::optional<int64_t> n = d.attributes.AsInt(i)) {
      (*attributes)[spec.dra_name] = {{"int", *n}};
    }
  }
}

// consumesCounters: what the device holds (device_kinds.h), counted per Neuron device, from the
// pool's one counter set (a counter per device, its cores).
json Consumes(const NodeView& view, const DeviceRef& device) {
  std::map<int, int> per_device;
  const int cpd = std::max(1, view.cores_per_device);
  for (int core : HeldCores(device, cpd, PresentDevices(view))) ++per_device[core / cpd];
  json counters = json::object();
  for (const auto& [index, cores] : per_device) {
    counters[NeuronDeviceName(index)] = {{"value", std::to_string(cores)}};
  }
  return json::array({json{{"counterSet", kCounterSetName}, {"counters", std::move(counters)}}});
}

json ResourceType(DeviceKind kind) { return {{"string", KindSpec(kind).resource_type}}; }

// The health policy's action decides the effect (plugin/config.h): `evict` is NoExecute, every
// other action NoSchedule. A withheld device (a check or reset under way) is never evicted from.
// A device that is only degraded (corrected ECC rising) and whose action is `taint` gets None:
// the scheduler and a claim's tolerations can see it, nothing is kept off it.
json DeviceTaints(const HardwareDevice& d, const SliceOptions& options) {
  TaintEffect effect = d.action == Action::kEvict ? TaintEffect::kNoExecute : options.taint_effect;
  if (d.withheld) effect = TaintEffect::kNoSchedule;
  if (d.healthy && d.health.degraded() && d.action == Action::kTaint) {
    return Taints(true, false, "degraded: corrected ECC", TaintEffect::kNone);
  }
  return Taints(!d.healthy, d.unknown && !d.withheld, d.reason, effect);
}

json NeuronDevice(const NodeView& view, const SliceOptions& options, const HardwareDevice& d,
                  const std::string& efa_bdf) {
  json a = json::object();
  a["deviceId"] = {{"int", d.index}};
  a["resourceType"] = ResourceType(DeviceKind::kNeuronDevice);
  NodeAttributes(view, options, &a);
  if (view.cores_per_device > 0) a["coreCount"] = {{"int", view.cores_per_device}};
  if (!d.bdf.empty()) a["pciBusId"] = {{"string", d.bdf}};
  PublishedAttributes(d, &a);
  PlacementAttributes(view, d, efa_bdf, &a);
  json out = {{"name", NeuronDeviceName(d.index)}, {"attributes", a}};
  // HBM per device from the catalog (docs/hardware.md), when the instance type is known.
  const absl::StatusOr<const InstanceSpec*> spec = FindInstance(view.node.instance_type);
  if (spec.ok() && (*spec)->chip != nullptr) {
    out["capacity"] = {{"memory", {{"value", std::to_string((*spec)->chip->hbm_bytes)}}}};
  }
  // A whole device takes all its cores: no core of it can go to another claim, and back.
  if (options.partitionable) {
    out["consumesCounters"] = Consumes(view, {DeviceKind::kNeuronDevice, d.index});
  }
  json taints = DeviceTaints(d, options);
  if (!taints.empty()) out["taints"] = std::move(taints);
  return out;
}

// The runtime takes only one contiguous run of cores in NEURON_RT_VISIBLE_CORES (aws-neuron-sdk
// neuron-runtime/guides/nrt-developer-guide.rst, NEURON_RT_VISIBLE_CORES), and the scheduler
// picks any cores that match. So each core carries coregroup<k>_id, its aligned run of k
// consecutive cores [g*k, (g+1)*k): a claim for k cores with `matchAttribute:
// neuron.aws.com/coregroup<k>_id` gets one run. A run inside a device always counts; one that
// spans devices only where those devices form a connected group (the devicegroup rule).
void CoreGroupAttributes(const NodeView& view, int device, int core, json* attributes) {
  const int per_device = view.cores_per_device;
  if (per_device <= 0) return;
  const Topology& topology = view.allocator->topology();
  for (int k : {2, 4, 8}) {
    const bool inside = k <= per_device && per_device % k == 0;
    const bool spans = k > per_device && k % per_device == 0 &&
                       ConnectedGroup(topology, topology.size(), device, k / per_device);
    if (inside || spans) (*attributes)[fmt::format("coregroup{}_id", k)] = {{"int", core / k}};
  }
}

// NeuronCore `core` (node-wide logical id) of device `d`: its device's placement, its run of
// cores, one of its device's counter, its device's taint.
json CoreDevice(const NodeView& view, const SliceOptions& options, const HardwareDevice& d,
                const std::string& efa_bdf, int core) {
  json a = json::object();
  a["resourceType"] = ResourceType(DeviceKind::kNeuronCore);
  a["deviceId"] = {{"int", d.index}};
  a["coreId"] = {{"int", core}};
  NodeAttributes(view, options, &a);
  PlacementAttributes(view, d, efa_bdf, &a);
  CoreGroupAttributes(view, d.index, core, &a);
  json out = {{"name", CoreDeviceName(core)},
              {"attributes", std::move(a)},
              {"consumesCounters", Consumes(view, {DeviceKind::kNeuronCore, core})}};
  json taints = DeviceTaints(d, options);
  if (!taints.empty()) out["taints"] = std::move(taints);
  return out;
}

// The whole UltraServer node (AWS's resourceType neuron_node, aws-neuron-sdk deploy/eks/dra.rst
// "Example 3"): every present device's counter in full. No group attributes, so a devicegroup
// matchAttribute never picks it. Tainted while any device is unhealthy or absent: the node is
// not whole.
json NodeDevice(const NodeView& view, const SliceOptions& options) {
  const std::vector<int> present = PresentDevices(view);
  const HardwareDevice* faulty = FirstFaultyDevice(view);
  json a = json::object();
  a["resourceType"] = ResourceType(DeviceKind::kNeuronNode);
  NodeAttributes(view, options, &a);
  a["deviceCount"] = {{"int", present.size()}};
  a["coreCount"] = {{"int", static_cast<int>(present.size()) * view.cores_per_device}};
  json out = {{"name", kNodeDeviceName},
              {"attributes", std::move(a)},
              {"consumesCounters", Consumes(view, {DeviceKind::kNeuronNode, -1})}};
  if (faulty != nullptr) {
    out["taints"] =
        Taints(true, false, fmt::format("{} {}", NeuronDeviceName(faulty->index), faulty->reason),
               options.taint_effect);
  }
  return out;
}

json EfaDevice(const NodeView& view, const SliceOptions& options, const HardwareEfa& e,
               const std::vector<int>& beside) {
  json a = json::object();
  a["resourceType"] = ResourceType(DeviceKind::kEfa);
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
  switch (e) {
    case TaintEffect::kNoExecute:
      return "NoExecute";
    case TaintEffect::kNone:
      return "None";
    case TaintEffect::kNoSchedule:
      break;
  }
  return "NoSchedule";
}

absl::StatusOr<TaintEffect> ParseTaintEffect(std::string_view text) {
  if (text == "NoSchedule") return TaintEffect::kNoSchedule;
  if (text == "NoExecute") return TaintEffect::kNoExecute;
  return absl::InvalidArgumentError(fmt::format("'{}' is not NoSchedule or NoExecute", text));
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

namespace {

json SliceSpec(const SliceOptions& options, uint64_t generation, const char* key, json content,
               std::string_view driver = kDriverName) {
  return json{{"driver", driver},
              {"pool", {{"name", options.node_name}, {"generation", generation}}},
              {"nodeName", options.node_name},
              {key, std::move(content)}};
}

// The counter slice and the NeuronCore slices of a partitionable pool.
void AddPartitions(const NodeView& view, const SliceOptions& options,
                   const std::map<int, std::string>& efa_of, uint64_t generation,
                   std::vector<json>* slices) {
  json counters = json::object();
  json cores = json::array();
  for (const auto& [index, d] : view.devices) {
    if (!d.present) continue;
    counters[NeuronDeviceName(index)] = {{"value", std::to_string(view.cores_per_device)}};
    for (int k = 0; k < view.cores_per_device; ++k) {
      cores.push_back(
          CoreDevice(view, options, d, efa_of.at(index), index * view.cores_per_device + k));
    }
  }
  if (counters.empty()) return;  // no device: nothing to share
  slices->push_back(
      SliceSpec(options, generation, "sharedCounters",
                json::array({json{{"name", kCounterSetName}, {"counters", std::move(counters)}}})));
  // Every core consumes counters: at most 64 in a slice (types.go
  // ResourceSliceMaxDevicesWithTaintsOrConsumesCounters).
  for (size_t first = 0; first < cores.size(); first += kMaxDevicesPerSliceWithTaints) {
    const size_t end = std::min(cores.size(), first + kMaxDevicesPerSliceWithTaints);
    slices->push_back(SliceSpec(options, generation, "devices",
                                json(cores.begin() + static_cast<std::ptrdiff_t>(first),
                                     cores.begin() + static_cast<std::ptrdiff_t>(end))));
  }
}

}  // namespace

bool IsUltraServerNode(const NodeView& view) {
  return view.node.ultraserver && !view.node.ultraserver->supported_modes.empty();
}

std::vector<int> PresentDevices(const NodeView& view) {
  std::vector<int> out;
  for (const auto& [index, d] : view.devices) {
    if (d.present) out.push_back(index);
  }
  return out;
}

const HardwareDevice* FirstFaultyDevice(const NodeView& view) {
  for (const auto& [index, d] : view.devices) {
    if (!d.healthy && !d.unknown) return &d;
  }
  return nullptr;
}

absl::StatusOr<std::vector<json>> BuildPool(const NodeView& view, const SliceOptions& options,
                                            uint64_t generation) {
  if (absl::Status s = ValidateDnsSubdomain("the node (pool) name", options.node_name); !s.ok()) {
    return s;
  }
  if (options.partitionable && view.cores_per_device <= 0 && !view.devices.empty()) {
    return absl::FailedPreconditionError(
        "the logical NeuronCores per device are unknown: no counters or NeuronCore devices can be "
        "offered (--dra.partitionable)");
  }
  json devices = json::array();
  const std::vector<std::string> beside = EfaBeside(view);
  std::map<std::string, std::vector<int>> served;  // EFA BDF -> devices beside it
  std::map<int, std::string> efa_of;               // device index -> the EFA BDF beside it
  size_t pos = 0;
  for (const auto& [index, d] : view.devices) {
    efa_of[index] = beside[pos++];
    if (!efa_of[index].empty()) served[efa_of[index]].push_back(index);
    // A removed device is not offered: the slice never claims what the node lacks.
    if (d.present) devices.push_back(NeuronDevice(view, options, d, efa_of[index]));
  }
  // Without counters the scheduler could give the node and one of its devices to two claims.
  if (options.partitionable && IsUltraServerNode(view) && !PresentDevices(view).empty()) {
    devices.push_back(NodeDevice(view, options));
  }
  std::vector<json> slices;
  slices.push_back(SliceSpec(options, generation, "devices", std::move(devices)));
  if (options.partitionable) AddPartitions(view, options, efa_of, generation, &slices);
  for (json& s : slices) s["pool"]["resourceSliceCount"] = slices.size();
  if (absl::Status s = CheckPool(slices); !s.ok()) return s;
  if (!options.efa) return slices;
  json efas = json::array();
  for (const auto& [name, e] : view.efas) {
    if (!e.present) continue;
    const auto it = served.find(e.bdf);
    efas.push_back(
        EfaDevice(view, options, e, it == served.end() ? std::vector<int>{} : it->second));
  }
  if (efas.empty()) return slices;  // no pool: neuron-dra-api deletes what the driver held
  json efa_slice = SliceSpec(options, generation, "devices", std::move(efas), kEfaDriverName);
  efa_slice["pool"]["resourceSliceCount"] = 1;
  if (absl::Status s = CheckPool({efa_slice}); !s.ok()) return s;
  slices.push_back(std::move(efa_slice));
  return slices;
}

SliceState::SliceState(SliceOptions options, uint64_t first_generation)
    : options_(std::move(options)), generation_(first_generation) {}

void SliceState::Update(const NodeView& view) {
  absl::StatusOr<std::vector<json>> slices = BuildPool(view, options_, 0);
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = true;
  if (view.generation < view_generation_) return;  // an older picture than the one shown
  view_generation_ = view.generation;
  if (!slices.ok()) {
    // Keep serving the last good pool: a slice the API refuses helps no one.
    error_ = std::string{slices.status().message()};
    return;
  }
  error_.clear();
  if (slices_ && *slices_ == *slices) return;
  if (slices_) ++generation_;
  slices_ = *std::move(slices);
}

SliceState::Document SliceState::Get(std::optional<uint64_t> unless) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_) return {503, "no hardware scan yet\n"};
  if (!slices_) return {503, "no valid slice: " + error_ + "\n"};
  if (unless == generation_) return {304, ""};
  json slices = *slices_;
  for (json& s : slices) s["pool"]["generation"] = generation_;
  const json doc = {
      {"generation", generation_}, {"nodeName", options_.node_name}, {"slices", std::move(slices)}};
  return {200, doc.dump() + "\n"};
}

uint64_t SliceState::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

}  // namespace neuron::plugin::dra

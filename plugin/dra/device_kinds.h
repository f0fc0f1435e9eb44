#pragma once
// The DRA driver's device kinds, written once (docs/kubelet-api.md#dra-pool): each kind's name in
// the pool, its resourceType attribute (AWS's values, aws-neuron-sdk deploy/eks/dra.rst) and what
// a device of it holds. What it holds is what it consumes of the pool's counters (the slice) and
// what prepare refuses to give to two claims (the driver, the checkpoint's claims read back). The
// slice and the health stream name devices through it, prepare reads names back through it, and
// neuron-dra-api tells whole Neuron devices by it. Header only: neuron-dra-api uses it without
// linking the plugin.

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron::plugin::dra {

inline constexpr std::string_view kDriverName = "neuron.aws.com";
// The node's EFA interfaces are devices of a driver of their own, served by the same binary: a
// DeviceClass that selects `device.driver == "neuron.aws.com"` alone (AWS's) then never hands an
// EFA to a request for Neuron devices. Never AWS's EFA driver's name (efa.networking.k8s.aws),
// which may run beside us (--dra.efa=false leaves EFA to it).
inline constexpr std::string_view kEfaDriverName = "efa.neuron.aws.com";
// Our drivers, in the order their pools are served and published.
inline constexpr std::array<std::string_view, 2> kDriverNames{kDriverName, kEfaDriverName};

enum class DeviceKind { kNeuronNode, kNeuronCore, kNeuronDevice, kEfa };

struct DeviceKindSpec {
  DeviceKind kind;
  std::string_view name;           // the name's prefix; neuron-node's whole name
  std::string_view resource_type;  // the resourceType attribute
  std::string_view holds;          // what a device of the kind holds, as messages say it
};

// In the order names are read back: neuron-node and "neuroncore-" before "neuron-".
inline constexpr std::array<DeviceKindSpec, 4> kDeviceKinds{{
    {DeviceKind::kNeuronNode, "neuron-node", "neuron_node",
     "every Neuron device and NeuronCore of the node"},
    {DeviceKind::kNeuronCore, "neuroncore-", "neuron_core", "one NeuronCore"},
    {DeviceKind::kNeuronDevice, "neuron-", "neuron_device", "every NeuronCore of the device"},
    {DeviceKind::kEfa, "efa-", "efa", "one EFA interface"},
}};

constexpr const DeviceKindSpec& KindSpec(DeviceKind kind) {
  for (const DeviceKindSpec& k : kDeviceKinds) {
    if (k.kind == kind) return k;
  }
  return kDeviceKinds.front();  // unreachable: every kind is in the table
}

// The driver whose pool publishes devices of `kind`.
constexpr std::string_view DriverOf(DeviceKind kind) {
  return kind == DeviceKind::kEfa ? kEfaDriverName : kDriverName;
}

inline constexpr std::string_view kNodeDeviceName = KindSpec(DeviceKind::kNeuronNode).name;

// "neuron-3" (a device index), "neuroncore-12" (a core id across the node).
inline std::string NeuronDeviceName(int index) {
  return std::string(KindSpec(DeviceKind::kNeuronDevice).name) + std::to_string(index);
}
inline std::string CoreDeviceName(int core) {
  return std::string(KindSpec(DeviceKind::kNeuronCore).name) + std::to_string(core);
}
// "efa-rdmap16s25": the interface name in lower case (device names are DNS labels).
inline std::string EfaDeviceName(std::string_view ifname) {
  std::string out(KindSpec(DeviceKind::kEfa).name);
  for (char c : ifname) out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

// A pool device name read back: its kind and number (device index or core id; -1 for
// neuron-node and an EFA, whose interface is found by EfaDeviceName). nullopt for a name that is
// not ours, a number with a sign, leading zero or other text, or one above `max_number`.
struct DeviceRef {
  DeviceKind kind = DeviceKind::kNeuronDevice;
  int number = -1;
  bool operator==(const DeviceRef&) const = default;
};

inline std::optional<DeviceRef> ParseDeviceName(std::string_view name, int max_number) {
  for (const DeviceKindSpec& k : kDeviceKinds) {
    if (k.kind == DeviceKind::kNeuronNode) {
      if (name == k.name) return DeviceRef{k.kind, -1};
      continue;
    }
    if (!name.starts_with(k.name)) continue;
    const std::string_view rest = name.substr(k.name.size());
    if (k.kind == DeviceKind::kEfa) {
      return rest.empty() ? std::nullopt : std::optional<DeviceRef>({k.kind, -1});
    }
    int n = -1;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    const bool digits = !rest.empty() && rest.front() != '-' && rest.front() != '+';
    const bool canonical = rest.size() == 1 || rest.front() != '0';
    if (!digits || !canonical || ec != std::errc() || end != rest.data() + rest.size() ||
        n > max_number) {
      return std::nullopt;
    }
    return DeviceRef{k.kind, n};
  }
  return std::nullopt;
}

// The NeuronCores a Neuron device, core or the node holds (the node: every present device's),
// by core id; an EFA holds none. The counters it consumes are these, counted per device.
inline std::vector<int> HeldCores(const DeviceRef& d, int cores_per_device,
                                  const std::vector<int>& present_devices) {
  std::vector<int> out;
  const auto device_cores = [&](int device) {
    for (int k = 0; k < cores_per_device; ++k) out.push_back(device * cores_per_device + k);
  };
  switch (d.kind) {
    case DeviceKind::kNeuronCore:
      out.push_back(d.number);
      break;
    case DeviceKind::kNeuronDevice:
      device_cores(d.number);
      break;
    case DeviceKind::kNeuronNode:
      for (int device : present_devices) device_cores(device);
      break;
    case DeviceKind::kEfa:
      break;
  }
  return out;
}

}  // namespace neuron::plugin::dra

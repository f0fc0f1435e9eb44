#pragma once
// Shared by the DRA tests: the plugin's hardware picture of a catalog instance (every device and
// EFA present and healthy, placement and links from core/model/catalog.h), and its NodeView.

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/model/catalog.h"
#include "plugin/node_state.h"

namespace neuron::plugin::dra::testing {

// A present, healthy EFA interface without placement.
inline HardwareEfa Efa(std::string name) {
  HardwareEfa e;
  e.name = std::move(name);
  e.present = e.healthy = true;
  return e;
}

inline Hardware CatalogHardware(std::string_view instance, int lnc = 0) {
  const InstanceSpec& spec = **FindInstance(instance);
  Hardware hw;
  hw.node.instance_type = std::string(spec.name);
  hw.node.driver_version = "2.29.0.0";
  hw.cores_per_device = LogicalCoresPerDevice(spec, *ResolveLnc(spec, lnc));
  hw.links.resize(spec.devices);
  for (int d = 0; d < spec.devices; ++d) {
    const DevicePlacement* p =
        d < static_cast<int>(spec.placement.size()) ? &spec.placement[d] : nullptr;
    HardwareDevice dev;
    dev.index = d;
    dev.present = dev.healthy = true;
    if (p != nullptr) {
      dev.numa = p->numa_node;
      dev.bdf = p->bdf;
    }
    hw.devices.push_back(dev);
    hw.links[d] = ConnectedDevices(spec, d);
  }
  int uverbs = 0;
  for (const EfaPlacement& e : spec.efas) {
    hw.efas.push_back(Efa(e.name));
    hw.efas.back().numa = e.numa_node;
    hw.efas.back().uverbs = uverbs++;
    hw.efas.back().bdf = e.bdf;
  }
  std::sort(hw.efas.begin(), hw.efas.end(),
            [](const HardwareEfa& a, const HardwareEfa& b) { return a.name < b.name; });
  return hw;
}

inline std::shared_ptr<const NodeView> ViewOf(const Hardware& hw) {
  NodeState state(std::chrono::milliseconds(1000));
  state.SetHardware(hw);
  return state.view();
}

}  // namespace neuron::plugin::dra::testing

#pragma once
// Discovery on simulated trees that have no simulated driver behind their device nodes (a SimTree
// alone, without `neuron-sim up`): the agent learns each device's PCI address only from the
// driver's DEVICE_BDF_EXT ioctl (core/discovery/bdf.h), so these tests inject a table resolver
// holding what the simulated driver would answer, the catalog's placement (core/model/catalog.h).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/discovery/bdf.h"
#include "core/discovery/inventory.h"
#include "core/model/catalog.h"

namespace neuron::testing {

// A DiscoveryOptions::bdf_resolver that answers from `bdfs` (indexed by device).
inline std::function<std::unique_ptr<BdfResolver>(const RootPaths&)> TableResolver(
    std::vector<std::string> bdfs) {
  return [bdfs = std::move(bdfs)](const RootPaths&) { return MakeTableBdfResolver(bdfs); };
}

// Options for discovering a simulated `spec` node: its catalog PCI addresses, and `lnc` as
// --lnc gives it (0: the instance default).
inline DiscoveryOptions SimDiscoveryOptions(const InstanceSpec& spec, int lnc = 0) {
  std::vector<std::string> bdfs;
  for (const DevicePlacement& p : spec.placement) bdfs.push_back(p.bdf);
  DiscoveryOptions options;
  options.lnc = lnc;
  options.bdf_resolver = TableResolver(std::move(bdfs));
  return options;
}

}  // namespace neuron::testing

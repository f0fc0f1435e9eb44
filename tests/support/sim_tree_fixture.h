#pragma once
// A simulated node's tree (sim::SimTree: ROOT/sys, ROOT/dev, node.json) for tests and benchmarks
// that read a node without running `neuron-sim up` (tests/support/sim_node.h runs one): built
// from an instance name, and read back as the agent's directory discovery would with the
// simulated driver behind it. No GoogleTest dependency: errors come back as statuses.

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/discovery/inventory.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/sim_discovery.h"

namespace neuron::testing {

struct SimTreeOptions {
  int lnc = 0;                // as --lnc gives it; 0: the instance's default
  std::string instance_id{};  // empty: the simulator makes one up from ROOT
  std::string node_name{};    // empty: the simulator's default
  // As --driver-version gives it (driver-sim/README.md#driver-versions); empty: the newest.
  std::string driver_version{};
};

// Writes `instance`'s tree in its post-probe state under `root` (created if missing). Fails on
// an unknown instance, an LNC it does not support, or a tree that cannot be written.
absl::StatusOr<std::unique_ptr<sim::SimTree>> BuildSimTree(const std::filesystem::path& root,
                                                           std::string_view instance,
                                                           const SimTreeOptions& options = {});

// Discovery options for `tree` as if its simulated driver answered DEVICE_BDF_EXT (the catalog's
// PCI addresses, tests/support/sim_discovery.h), with `lnc` as --lnc gives it (0: the default).
DiscoveryOptions SimDiscoveryOptions(const sim::SimTree& tree, int lnc = 0);

// `tree`'s inventory as the agent's directory discovery finds it with those options.
absl::StatusOr<Inventory> ScanSimTree(const sim::SimTree& tree, int lnc = 0);

}  // namespace neuron::testing

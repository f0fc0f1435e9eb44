#include "tests/support/sim_tree_fixture.h"

#include <system_error>

#include "core/model/catalog.h"

namespace neuron::testing {

absl::StatusOr<std::unique_ptr<sim::SimTree>> BuildSimTree(const std::filesystem::path& root,
                                                           std::string_view instance,
                                                           const SimTreeOptions& options) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(instance);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<int> lnc = ResolveLnc(**spec, options.lnc);
  if (!lnc.ok()) return lnc.status();
  absl::StatusOr<sim::SimDriver> driver = sim::ParseSimDriver(options.driver_version);
  if (!driver.ok()) return driver.status();
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec) return absl::InternalError("cannot create " + root.string() + ": " + ec.message());
  auto tree = std::make_unique<sim::SimTree>(
      RootPaths(root),
      sim::NodeConfig{*spec, *lnc, options.instance_id, options.node_name, {}, *std::move(driver)});
  if (absl::Status s = tree->Create(); !s.ok()) return s;
  return tree;
}

DiscoveryOptions SimDiscoveryOptions(const sim::SimTree& tree, int lnc) {
  return SimDiscoveryOptions(*tree.config().spec, lnc);
}

absl::StatusOr<Inventory> ScanSimTree(const sim::SimTree& tree, int lnc) {
  return MakeDirectoryDiscovery(tree.paths(), SimDiscoveryOptions(tree, lnc))->Scan();
}

}  // namespace neuron::testing

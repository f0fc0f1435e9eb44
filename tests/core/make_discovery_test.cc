// core/discovery/make_discovery.h: which back end each mode picks, and that the chosen one reads
// a simulated node. (libudev on the host's "/" is the discovery agreement test's subject.)

#include "core/discovery/make_discovery.h"

#include <gtest/gtest.h>

#include "core/model/catalog.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

TEST(MakeDiscoveryTest, AutoIsUdevOnlyOnTheHostsOwnRoot) {
  EXPECT_EQ(ResolveDiscoveryMode(RootPaths("/"), DiscoveryMode::kAuto), DiscoveryMode::kUdev);
  EXPECT_EQ(ResolveDiscoveryMode(RootPaths("/tmp/node"), DiscoveryMode::kAuto),
            DiscoveryMode::kDirectory);
  EXPECT_EQ(ResolveDiscoveryMode(RootPaths("/"), DiscoveryMode::kDirectory),
            DiscoveryMode::kDirectory);
  EXPECT_EQ(ResolveDiscoveryMode(RootPaths("/tmp/node"), DiscoveryMode::kUdev),
            DiscoveryMode::kUdev);
}

TEST(MakeDiscoveryTest, TheChosenBackEndReadsASimulatedNode) {
  testing::TempDir dir;
  const InstanceSpec* spec = *FindInstance("trn1.2xlarge");
  sim::SimTree tree(RootPaths(dir.path()), sim::NodeConfig{spec, 1, "i-0123456789abcdef0", ""});
  ASSERT_TRUE(tree.Create().ok());
  for (const DiscoveryMode mode : {DiscoveryMode::kAuto, DiscoveryMode::kDirectory}) {
    absl::StatusOr<std::unique_ptr<Discovery>> d =
        MakeDiscovery(RootPaths(dir.path()), mode, testing::SimDiscoveryOptions(*spec));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ((*d)->name(), "directory");
    absl::StatusOr<Inventory> inv = (*d)->Scan();
    ASSERT_TRUE(inv.ok()) << inv.status();
    EXPECT_EQ(inv->instance_type, "trn1.2xlarge");
    EXPECT_EQ(inv->devices.size(), 1u);
  }
}

}  // namespace
}  // namespace neuron

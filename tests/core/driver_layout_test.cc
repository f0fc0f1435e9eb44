// The layout check by directory listings (core/discovery/driver_layout.cc) against the check it
// replaced, one faccessat per expected file: on every driver version the simulator serves
// (`--driver-version`, the invented future layout included) and every chip, the same read groups
// and the same missing nodes on every device. Then the trees no driver makes, where the two
// differ by design (docs/driver-interface.md#detection).

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/driver/driver_generations.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct PerFileCheck {
  NodeGroups groups;
  std::vector<std::string> missing;
};

// The check as it was: one faccessat per read group's first file and per file the generation
// promises on this chip.
PerFileCheck CheckEveryFile(const RootPaths& root, const Inventory& inv, const NeuronDevice& d) {
  PerFileCheck out;
  const std::string dir = root.NeuronDevice(d.index).string();
  auto exists = [&](const std::string& rel) {
    return ::faccessat(AT_FDCWD, (dir + "/" + rel).c_str(), F_OK, 0) == 0;
  };
  for (int i = 0; i < kNodeGroupCount; ++i) {
    const auto g = static_cast<NodeGroup>(i);
    const auto files = GroupDeviceFiles(g);
    if (kReadGroups.Has(g) && !files.empty() && exists(files.front())) out.groups.Add(g);
  }
  const NodeGroups expected = GroupsOnChip(inv.driver.Expected().groups, d.instance_type);
  for (const std::string& rel : ReadDeviceFiles(expected, d.physical_cores)) {
    if (!exists(rel)) out.missing.push_back(rel);
  }
  return out;
}

Inventory Scan(const sim::SimTree& tree) {
  absl::StatusOr<Inventory> inv = testing::ScanSimTree(tree);
  EXPECT_TRUE(inv.ok()) << inv.status();
  return inv.ok() ? *std::move(inv) : Inventory{};
}

// Every --driver-version on a Trn1, an Inf2 and a Trn2 (16 devices, 8 cores each): what the
// listings found is what faccessat finds, file for file. Only the future layout misses nodes:
// stats/hardware/ moved away.
TEST(DriverLayoutTest, ListingsFindWhatEveryFileCheckFindsOnEverySimulatedDriver) {
  std::vector<std::string> versions;
  for (const DriverGeneration& g : KnownGenerations()) versions.emplace_back(g.name);
  versions.emplace_back("future");
  for (const std::string& version : versions) {
    for (const char* instance : {"trn1.2xlarge", "inf2.xlarge", "trn2.48xlarge"}) {
      SCOPED_TRACE(version + " " + instance);
      testing::TempDir dir("layout");
      auto tree = testing::BuildSimTree(dir.path(), instance, {.driver_version = version});
      ASSERT_TRUE(tree.ok()) << tree.status();
      const Inventory inv = Scan(**tree);
      ASSERT_FALSE(inv.devices.empty());
      for (const NeuronDevice& d : inv.devices) {
        const PerFileCheck want = CheckEveryFile(RootPaths(dir.path()), inv, d);
        EXPECT_EQ(d.sysfs_groups, want.groups) << "neuron" << d.index;
        EXPECT_EQ(d.missing_nodes, want.missing) << "neuron" << d.index;
        if (version != "future") {
          EXPECT_THAT(d.missing_nodes, IsEmpty());
        }
      }
      if (version == "future") {
        ASSERT_FALSE(inv.devices[0].missing_nodes.empty());
        EXPECT_EQ(inv.devices[0].missing_nodes.front(), "stats/hardware/sram_ecc_uncorrected");
      }
    }
  }
}

// Hand-made damage: a counter directory gone is its fields missing, a file gone is missing, a
// dangling symlink in a file's place is missing (faccessat follows it), a directory in a file's
// place is there. A counter's field gone alone is not seen: the driver creates and removes a
// counter's fields with its directory (one attribute group), so no driver makes that tree, and
// the listings do not read the ~360 counter directories of a device to look for it. Likewise a
// node gone from one core but not core 0: the driver makes every core's nodes from one table, so
// core 0's directories answer for every core, and what core 0 lacks every core lacks. The sampler
// still leaves such a value absent, with an error naming it.
TEST(DriverLayoutTest, DamagedTrees) {
  testing::TempDir dir("layout");
  auto tree = testing::BuildSimTree(dir.path(), "trn1.2xlarge");
  ASSERT_TRUE(tree.ok()) << tree.status();
  const fs::path dev = RootPaths(dir.path()).NeuronDevice(0);
  fs::remove_all(dev / "neuron_core0/stats/status/timeout");
  fs::remove_all(dev / "neuron_core1/stats/status/exec_bad_input");
  fs::remove(dev / "stats/power/utilization");
  fs::remove(dev / "info/serial_number");
  fs::create_symlink("nowhere", dev / "info/serial_number");
  fs::remove(dev / "reset");
  fs::create_directory(dev / "reset");
  fs::remove(dev / "neuron_core0/stats/status/success/present");
  const Inventory inv = Scan(**tree);
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_THAT(inv.devices[0].missing_nodes,
              ElementsAre("info/serial_number", "stats/power/utilization",
                          "neuron_core0/stats/status/timeout/total",
                          "neuron_core0/stats/status/timeout/present",
                          "neuron_core1/stats/status/timeout/total",
                          "neuron_core1/stats/status/timeout/present"));
}

// A core whose directory is gone lacks every node of its own, and core 0's listings say nothing
// for it: each other core is asked that its directory is there.
TEST(DriverLayoutTest, ACoreWhoseDirectoryIsGoneLacksEveryNodeOfItsOwn) {
  testing::TempDir dir("layout_core");
  auto tree = testing::BuildSimTree(dir.path(), "trn1.2xlarge");
  ASSERT_TRUE(tree.ok()) << tree.status();
  fs::remove_all(RootPaths(dir.path()).NeuronDevice(0) / "neuron_core1");
  const Inventory inv = Scan(**tree);
  ASSERT_EQ(inv.devices.size(), 1u);
  const std::vector<std::string>& missing = inv.devices[0].missing_nodes;
  ASSERT_FALSE(missing.empty());
  for (const std::string& m : missing) EXPECT_TRUE(m.starts_with("neuron_core1/")) << m;
  EXPECT_THAT(missing,
              ::testing::IsSupersetOf({"neuron_core1/stats/status/timeout/total",
                                       "neuron_core1/stats/memory_usage/device_mem/total"}));
}

}  // namespace
}  // namespace neuron

// Driver generations (core/driver/driver_generations.h) and their detection at discovery
// (docs/driver-interface.md#detection), on trees built from the manifests transcribed from each
// generation's driver source (tests/fixtures/driver/sysfs-<generation>.manifest), not from our
// simulator: the module version picks the generation, the read groups are found where the tree
// has them, missing files are listed, never read as 0, and the sampler reads the new files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/discovery/bdf.h"
#include "core/discovery/inventory.h"
#include "core/driver/driver_generations.h"
#include "core/sample/sampler.h"
#include "tests/support/fixture_tree.h"
#include "tests/support/no_datastores.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

using testing::NoDatastores;  // these tests are about sysfs

std::shared_ptr<const Snapshot> FullSample(const RootPaths& root, const Inventory& inv) {
  SamplerOptions so;
  so.datastore = std::make_unique<NoDatastores>();
  Sampler sampler(root, inv, std::move(so));
  return sampler.Sample(SampleKind::kFull);
}

TEST(DriverGenerationTest, ModuleVersionPicksItsGeneration) {
  ASSERT_EQ(KnownGenerations().size(), 7u);
  // 2.30 is known from its release notes only: the newest known, but not the newest sourced,
  // which the simulator plays by default.
  EXPECT_EQ(NewestGeneration().name, "2.30");
  EXPECT_EQ(NewestSourcedGeneration().name, "2.29");
  for (const DriverGeneration& g : KnownGenerations()) {
    SCOPED_TRACE(g.name);
    EXPECT_EQ(GenerationOfVersion(g.source_version), &g);
    EXPECT_EQ(GenerationNamed(g.name), &g);
    EXPECT_EQ(g.from_source, g.name != "2.30");
  }
  EXPECT_EQ(GenerationOfVersion("2.26.10.0")->name, "2.26");  // SDK 2.29's driver
  EXPECT_EQ(GenerationOfVersion("2.30.2.0")->name, "2.30");
  for (std::string_view unknown :
       {"2.31.7.0", "2.23.9.0", "2.x.6781.0", "2", "", "two.29", "2.29x.0.0"}) {
    EXPECT_EQ(GenerationOfVersion(unknown), nullptr) << unknown;
  }
}

TEST(DriverGenerationTest, GroupsAppearInTheGenerationTheSourceAddsThem) {
  auto has = [](std::string_view gen, NodeGroup g) { return GenerationNamed(gen)->groups.Has(g); };
  EXPECT_TRUE(GenerationNamed("2.26")->groups.empty());
  EXPECT_TRUE(has("2.27", NodeGroup::kFwApiVersion));
  EXPECT_FALSE(has("2.27", NodeGroup::kHealthStatus));
  EXPECT_TRUE(has("2.28", NodeGroup::kHealthStatus));
  EXPECT_FALSE(has("2.28", NodeGroup::kUtilizationRaw));
  EXPECT_TRUE(has("2.29", NodeGroup::kUtilizationRaw));
  // Only the release notes of 2.30.2 announce corrected ECC and the two new health files: no
  // generation with source has them, 2.30 has both beside everything of 2.29.
  for (const DriverGeneration& g : KnownGenerations()) {
    SCOPED_TRACE(g.name);
    EXPECT_EQ(g.groups.Has(NodeGroup::kEccCorrected), !g.from_source);
    EXPECT_EQ(g.groups.Has(NodeGroup::kHealthComponents), !g.from_source);
  }
  EXPECT_EQ(GenerationNamed("2.30")->groups.Without(
                {NodeGroup::kEccCorrected, NodeGroup::kHealthComponents}),
            GenerationNamed("2.29")->groups);
  // health_status, and 2.30's files in it, only where the chip layer enables it (v3, v4), not
  // on v2 (Trn1, Inf2).
  for (NodeGroup g : {NodeGroup::kHealthStatus, NodeGroup::kHealthComponents}) {
    EXPECT_TRUE(GroupOnChip(g, "Trn2"));
    EXPECT_TRUE(GroupOnChip(g, "Trn3"));
    EXPECT_FALSE(GroupOnChip(g, "Trn1"));
    EXPECT_FALSE(GroupOnChip(g, "Inf2"));
  }
  EXPECT_TRUE(GroupOnChip(NodeGroup::kUtilizationRaw, "Trn1"));
  EXPECT_TRUE(GroupOnChip(NodeGroup::kEccCorrected, "Trn1"));
}

TEST(DriverGenerationTest, ReadFilesAreEveryGenerationsPlusTheReadGroups) {
  // 35 device files, core 0's architecture, 100 per core (docs/driver-interface.md#sysfs-tree,
  // less info/notify_delay and the other cores' architecture, which the agent does not read).
  EXPECT_EQ(ReadDeviceFiles({}, 2).size(), 236u);
  EXPECT_EQ(ReadDeviceFiles({}, 8).size(), 836u);
  const std::vector<std::string> with = ReadDeviceFiles(NewestSourcedGeneration().groups, 2);
  EXPECT_EQ(with.size(), 236u + 4 + 1);  // health_status, utilization_raw; no fw_* (not read)
  EXPECT_EQ(with.back(), "stats/power/utilization_raw");
  // 2.30 adds the two corrected counters and the two health files, in group order.
  const std::vector<std::string> notes = ReadDeviceFiles(GenerationNamed("2.30")->groups, 2);
  ASSERT_EQ(notes.size(), with.size() + 2 + 2);
  EXPECT_EQ(std::vector<std::string>(notes.end() - 4, notes.end()),
            (std::vector<std::string>{"stats/hardware/sram_ecc_corrected",
                                      "stats/hardware/mem_ecc_corrected",
                                      "stats/hardware/health_status/unhealthy_components",
                                      "stats/hardware/health_status/healthcheck_heartbeat"}));
}

class DriverDetectionTest : public ::testing::Test {
 protected:
  Inventory Scan(std::string_view manifest) {
    absl::Status s = testing::BuildFixtureTree(testing::DriverFixture(manifest), tmp_.path());
    EXPECT_TRUE(s.ok()) << s;
    return Rescan();
  }
  Inventory Rescan() {
    DiscoveryOptions options;
    options.bdf_resolver = [](const RootPaths&) { return MakeTableBdfResolver({"0000:00:1e.0"}); };
    absl::StatusOr<Inventory> inv = MakeDirectoryDiscovery(root(), options)->Scan();
    EXPECT_TRUE(inv.ok()) << inv.status();
    return inv.ok() ? *inv : Inventory{};
  }
  RootPaths root() const { return RootPaths(tmp_.path()); }
  fs::path Device() const { return root().NeuronDevice(0); }
  void WriteVersion(std::string_view v) {
    std::ofstream(root().ModuleVersion(), std::ios::trunc) << v << "\n";
  }

  testing::TempDir tmp_;
};

TEST_F(DriverDetectionTest, EveryKnownGenerationIsFoundWithNothingMissing) {
  for (const DriverGeneration& g : KnownGenerations()) {
    SCOPED_TRACE(g.name);
    testing::TempDir dir;
    absl::Status s = testing::BuildFixtureTree(
        testing::DriverFixture("sysfs-" + std::string(g.name) + ".manifest"), dir.path());
    ASSERT_TRUE(s.ok()) << s;
    absl::StatusOr<Inventory> inv = MakeDirectoryDiscovery(RootPaths(dir.path()), {})->Scan();
    ASSERT_TRUE(inv.ok()) << inv.status();
    EXPECT_THAT(inv->driver.version, Optional(std::string(g.source_version)));
    EXPECT_EQ(inv->driver.generation, &g);
    ASSERT_EQ(inv->devices.size(), 1u);
    EXPECT_THAT(inv->devices[0].missing_nodes, IsEmpty());
    // The manifests are Trn1's, which has no health_status/.
    EXPECT_EQ(inv->devices[0].sysfs_groups, GroupsOnChip(g.groups & kReadGroups, "Trn1"));
    EXPECT_EQ(DriverLayoutProblem(*inv), "");
  }
}

TEST_F(DriverDetectionTest, Trn2HasHealthStatusAndTheSamplerReadsItAndTheRawPower) {
  Inventory inv = Scan("sysfs-2.29-trn2.manifest");
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.devices[0].sysfs_groups,
            (NodeGroups{NodeGroup::kHealthStatus, NodeGroup::kUtilizationRaw}));
  EXPECT_THAT(inv.devices[0].missing_nodes, IsEmpty());
  const fs::path hs = Device() / "stats/hardware/health_status";
  std::ofstream(hs / "hbm_ecc_err_count", std::ios::trunc) << "2\n";
  std::ofstream(hs / "hw_error_event", std::ios::trunc) << "3\n";
  std::ofstream(Device() / "stats/power/utilization_raw", std::ios::trunc)
      << "die,util_bips,counter\n0,1234,77\n1,bogus(20000),78\n";
  const auto snap = FullSample(root(), inv);
  ASSERT_EQ(snap->devices.size(), 1u);
  const DeviceSample& d = snap->devices[0];
  EXPECT_THAT(d.health_status.hbm_ecc_err_count, Optional(2u));
  EXPECT_THAT(d.health_status.sram_ecc_err_count, Optional(0u));
  EXPECT_THAT(d.health_status.hw_error_event, Optional(3u));
  EXPECT_FALSE(d.ecc_corrected.sram_ecc_corrected.has_value());  // not in this generation's tree
  using State = PowerDieReading::State;
  EXPECT_THAT(d.power_raw, Optional(ElementsAre(PowerDieReading{0, State::kGood, 1234, 77},
                                                PowerDieReading{1, State::kBogus, 20000, 78})));
  EXPECT_THAT(snap->errors, IsEmpty());
}

// 2.30's tree as its release notes describe it, on the chip that has health_status/: every read
// group is found, nothing is missing.
TEST_F(DriverDetectionTest, Trn2At230HasEveryReadGroup) {
  const Inventory inv = Scan("sysfs-2.30-trn2.manifest");
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.driver.generation, GenerationNamed("2.30"));
  EXPECT_EQ(inv.devices[0].sysfs_groups, kReadGroups);
  EXPECT_THAT(inv.devices[0].missing_nodes, IsEmpty());
  EXPECT_EQ(DriverLayoutProblem(inv), "");
}

TEST_F(DriverDetectionTest, UnknownVersionIsCheckedAgainstTheNewestAndMissingFilesAreNamed) {
  Scan("sysfs-2.28.manifest");
  WriteVersion("2.31.7.0");
  fs::remove_all(Device() / "stats/hardware");
  std::ofstream(Device() / "stats/power/utilization_raw") << "die,util_bips,counter\n0,1,2\n";
  const Inventory inv = Rescan();
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.driver.generation, nullptr);
  EXPECT_EQ(inv.driver.GenerationLabel(), "unknown");
  // The newest known generation, 2.30, promises the corrected counters too.
  EXPECT_EQ(inv.driver.Expected().name, "2.30");
  EXPECT_THAT(
      inv.devices[0].missing_nodes,
      ElementsAre("stats/hardware/sram_ecc_uncorrected", "stats/hardware/mem_ecc_uncorrected",
                  "stats/hardware/mem_ecc_repairable_uncorrected",
                  "stats/hardware/sram_ecc_corrected", "stats/hardware/mem_ecc_corrected"));
  EXPECT_EQ(inv.devices[0].sysfs_groups, NodeGroups{NodeGroup::kUtilizationRaw});
  EXPECT_EQ(DriverLayoutProblem(inv),
            "driver 2.31.7: unknown sysfs layout, 5 nodes missing (first: "
            "neuron0/stats/hardware/sram_ecc_uncorrected)");

  // Never read as 0: the sample leaves them absent and says nothing else is wrong.
  const auto snap = FullSample(root(), inv);
  ForEachCounter(snap->devices[0].hardware, kHardwareCounters,
                 [](std::string_view name, const std::optional<uint64_t>& v) {
                   EXPECT_FALSE(v.has_value()) << name;
                 });
  EXPECT_TRUE(snap->devices[0].power_raw.has_value());
  EXPECT_TRUE(snap->devices[0].cores[0].device_mem.total.has_value());
}

TEST_F(DriverDetectionTest, KnownGenerationWithAMissingFileAndNoVersionAtAll) {
  Scan("sysfs-2.29.manifest");
  fs::remove(Device() / "stats/power/utilization_raw");
  Inventory inv = Rescan();
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.driver.generation, GenerationNamed("2.29"));
  EXPECT_THAT(inv.devices[0].missing_nodes, ElementsAre("stats/power/utilization_raw"));
  EXPECT_TRUE(inv.devices[0].sysfs_groups.empty());
  EXPECT_EQ(DriverLayoutProblem(inv),
            "driver 2.29.0: 1 sysfs node of generation 2.29 missing (first: "
            "neuron0/stats/power/utilization_raw)");

  // Without a version the tree is held to the newest known generation, 2.30, whose corrected
  // ECC counters a 2.29 tree lacks as well.
  fs::remove(root().ModuleVersion());
  inv = Rescan();
  EXPECT_FALSE(inv.driver.version.has_value());
  EXPECT_EQ(inv.driver.generation, nullptr);
  EXPECT_THAT(inv.devices[0].missing_nodes,
              ElementsAre("stats/power/utilization_raw", "stats/hardware/sram_ecc_corrected",
                          "stats/hardware/mem_ecc_corrected"));
  EXPECT_EQ(DriverLayoutProblem(inv),
            "driver (no version): unknown sysfs layout, 3 nodes missing (first: "
            "neuron0/stats/power/utilization_raw)");
}

}  // namespace
}  // namespace neuron

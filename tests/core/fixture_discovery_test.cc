// Discovery and presence on trees built from the checked-in manifests of the driver's interface
// (tests/fixtures/driver/), not from our simulator: a file name misspelt in
// core/driver/sysfs_files.h, which the simulator shares, fails here. Expected values are the
// manifests' own.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/discovery/bdf.h"
#include "core/discovery/inventory.h"
#include "core/discovery/presence.h"
#include "tests/support/fixture_tree.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr uint64_t kGiB = 1ull << 30;

class FixtureDiscoveryTest : public ::testing::Test {
 protected:
  // Builds tests/fixtures/driver/<manifest> under a fresh root.
  void Build(std::string_view manifest) {
    absl::Status s = testing::BuildFixtureTree(testing::DriverFixture(manifest), tmp_.path());
    ASSERT_TRUE(s.ok()) << s;
  }

  // The directory back end; PCI addresses come from the driver's ioctl on a node, so the test
  // answers for it with the manifest's.
  Inventory Scan(const std::vector<std::string>& bdfs, int lnc = 0) {
    DiscoveryOptions options;
    options.lnc = lnc;
    options.bdf_resolver = [bdfs](const RootPaths&) { return MakeTableBdfResolver(bdfs); };
    absl::StatusOr<Inventory> inv = MakeDirectoryDiscovery(root(), options)->Scan();
    EXPECT_TRUE(inv.ok()) << inv.status();
    return inv.ok() ? *inv : Inventory{};
  }

  RootPaths root() const { return RootPaths(tmp_.path()); }

  testing::TempDir tmp_;
};

TEST_F(FixtureDiscoveryTest, Trn1TwoXlargeHasOneDeviceWithItsIdentity) {
  Build("trn1.2xlarge.manifest");
  const Inventory inv = Scan({"0000:00:1e.0"});
  EXPECT_THAT(inv.warnings, IsEmpty());
  EXPECT_EQ(inv.instance_type, "trn1.2xlarge");
  EXPECT_EQ(inv.instance_id, "i-0f1e2d3c4b5a69788");
  EXPECT_EQ(inv.lnc, 1);  // the instance default: Trn1 has no LNC
  EXPECT_THAT(inv.efas, IsEmpty());
  ASSERT_EQ(inv.devices.size(), 1u);
  const NeuronDevice& d = inv.devices[0];
  EXPECT_EQ(d.index, 0);
  EXPECT_EQ(d.arch_type, "NDv2");
  EXPECT_EQ(d.instance_type, "Trn1");
  EXPECT_EQ(d.device_name, "Trainium1");
  EXPECT_EQ(d.nc_arch_type, "NCv2");
  EXPECT_EQ(d.physical_cores, 2);
  EXPECT_EQ(d.attributes.Get("serial_number"), "3c5a1e9b7d2f4a60");
  EXPECT_THAT(d.connected, IsEmpty());
  EXPECT_EQ(d.state, DeviceState::kReady);
  EXPECT_EQ(d.bdf, "0000:00:1e.0");
  EXPECT_EQ(d.numa_node, 0);
  EXPECT_EQ(d.cpulist, "0-7");
  EXPECT_EQ(d.dev_node, "/dev/neuron0");
  EXPECT_EQ(d.memory_bytes, 32 * kGiB);
  EXPECT_THAT(inv.CoreIds(0), ElementsAre(0, 1));
}

TEST_F(FixtureDiscoveryTest, Trn2DeviceHasEightCoresFourLogicalAndItsEfa) {
  Build("trn2.48xlarge-device0.manifest");
  const Inventory inv = Scan({"0000:cc:00.0"});
  EXPECT_THAT(inv.warnings, IsEmpty());
  EXPECT_EQ(inv.instance_type, "trn2.48xlarge");
  EXPECT_EQ(inv.instance_id, "i-07a8b9c0d1e2f3a4b");
  EXPECT_EQ(inv.lnc, 2);  // the trn2 default
  ASSERT_EQ(inv.devices.size(), 1u);
  const NeuronDevice& d = inv.devices[0];
  EXPECT_EQ(d.arch_type, "NDv3");
  EXPECT_EQ(d.instance_type, "Trn2");
  EXPECT_EQ(d.device_name, "Trainium2");
  EXPECT_EQ(d.nc_arch_type, "NCv3");
  EXPECT_EQ(d.physical_cores, 8);
  EXPECT_EQ(d.attributes.Get("serial_number"), "19fcda00f5ff6eb9");
  EXPECT_THAT(d.connected, ElementsAre(12, 1, 3, 4));  // the trn2 driver's order, kept
  EXPECT_EQ(d.state, DeviceState::kReady);
  EXPECT_EQ(d.numa_node, 1);
  EXPECT_EQ(d.cpulist, "48-95,144-191");
  EXPECT_EQ(d.memory_bytes, 96 * kGiB);
  EXPECT_THAT(inv.CoreIds(0), ElementsAre(0, 1, 2, 3));

  ASSERT_EQ(inv.efas.size(), 1u);
  const EfaInterface& e = inv.efas[0];
  EXPECT_EQ(e.name, "rdmap188s0");
  EXPECT_EQ(e.uverbs, 0);
  EXPECT_EQ(e.port_state, "ACTIVE");
  EXPECT_EQ(e.phys_state, "LinkUp");
  EXPECT_EQ(e.rate, "200 Gb/sec (4X HDR)");
  EXPECT_EQ(e.rate_gbps, 200);
  EXPECT_EQ(e.bdf, "0000:bc:00.0");
  EXPECT_EQ(e.numa_node, 1);
}

TEST_F(FixtureDiscoveryTest, LncFromTheCommandLineOverridesTheDefault) {
  Build("trn2.48xlarge-device0.manifest");
  const Inventory inv = Scan({"0000:cc:00.0"}, /*lnc=*/1);
  EXPECT_EQ(inv.lnc, 1);
  EXPECT_EQ(inv.LogicalCoresPerDevice(), 8);
}

// The manifests against the counts the driver's code gives (docs/driver-interface.md#sysfs-tree):
// 36 files
// per device and 101 per core, without the generic dev, uevent, subsystem and power/.
TEST_F(FixtureDiscoveryTest, ManifestsHaveTheDriversFileCounts) {
  for (const auto& [manifest, files] : std::vector<std::pair<std::string, int>>{
           {"trn1.2xlarge.manifest", 238}, {"trn2.48xlarge-device0.manifest", 844}}) {
    testing::TempDir dir;
    ASSERT_TRUE(testing::BuildFixtureTree(testing::DriverFixture(manifest), dir.path()).ok());
    const fs::path device = RootPaths(dir.path()).NeuronDevice(0);
    int count = 0;
    for (auto it = fs::recursive_directory_iterator(device); it != fs::end(it); ++it) {
      const std::string top = it->path().lexically_relative(device).begin()->string();
      if (top == "dev" || top == "uevent" || top == "subsystem" || top == "power") continue;
      if (it->is_regular_file()) ++count;
    }
    EXPECT_EQ(count, files) << manifest;
  }
}

TEST_F(FixtureDiscoveryTest, PresenceSeesTheDeviceAndItsNode) {
  Build("trn1.2xlarge.manifest");
  Inventory inv = Scan({"0000:00:1e.0"});
  EXPECT_THAT(FillUnreadableFromCatalog(root(), &inv), IsEmpty());
  PresenceCheck c = CheckPresence(root(), inv);
  EXPECT_EQ(c.presence, DevicePresence::kPresent) << c.message;
  EXPECT_THAT(c.missing_device_nodes, IsEmpty());

  fs::remove(root().DevNeuron(0));
  c = CheckPresence(root(), inv);
  EXPECT_EQ(c.presence, DevicePresence::kPresent);
  EXPECT_THAT(c.missing_device_nodes, ElementsAre(0));
}

// As a normal user on a node: the 0400 and 0600 files cannot be read; the catalog stands in.
TEST_F(FixtureDiscoveryTest, RootOnlyFilesAreNamedAndTheCatalogStandsIn) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads 0400 files";
  Build("trn1.2xlarge.manifest");
  const std::vector<std::string_view> root_only = {sysfs::kCoreCount, sysfs::kConnectedDevices,
                                                   sysfs::kReset};
  for (std::string_view name : root_only) {
    const fs::path f = root().NeuronDevice(0) / name;
    ASSERT_EQ(::chmod(f.c_str(), 0), 0) << f;
  }
  Inventory inv = Scan({"0000:00:1e.0"});
  EXPECT_EQ(inv.devices.at(0).physical_cores, 0);
  const std::vector<std::string> notes = FillUnreadableFromCatalog(root(), &inv);
  ASSERT_EQ(notes.size(), root_only.size());
  const fs::path device = root().NeuronClassDir() / root().NeuronDevice(0).filename();
  for (size_t i = 0; i < root_only.size(); ++i) {
    EXPECT_THAT(notes[i], HasSubstr((device / root_only[i]).string() + ": Permission denied"));
  }
  EXPECT_THAT(notes[0], HasSubstr("trn1.2xlarge: 2 physical cores per device"));
  EXPECT_THAT(inv.warnings, IsEmpty());
  EXPECT_EQ(inv.devices.at(0).physical_cores, 2);
  EXPECT_EQ(CheckPresence(root(), inv).presence, DevicePresence::kPresent);
}

}  // namespace
}  // namespace neuron

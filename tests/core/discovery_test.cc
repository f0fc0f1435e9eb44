// The directory back end on simulated trees (expected values written literally from
// docs/hardware.md#instance-catalog, #neuronlink-topology, #pcie-layout and
// docs/driver-interface.md#sysfs-tree, #efa) and on hand-made broken trees. These trees have no
// simulated driver behind their device nodes: where a test needs PCI addresses it injects the
// catalog's (tests/support/sim_discovery.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/discovery/bdf.h"
#include "core/discovery/inventory.h"
#include "core/driver/driver_abi.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/node_info.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/sim_testing.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kGiB = 1ull << 30;

using TempRoot = ::neuron::testing::TempDir;
using ::neuron::testing::SimDiscoveryOptions;
using ::neuron::testing::TableResolver;

void Write(const fs::path& p, std::string_view content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

Inventory ScanDir(const fs::path& root, DiscoveryOptions options = {}) {
  absl::StatusOr<Inventory> inv =
      MakeDirectoryDiscovery(RootPaths(root), std::move(options))->Scan();
  EXPECT_TRUE(inv.ok()) << inv.status();
  return inv.ok() ? *inv : Inventory{};
}

// A simulated node's tree in its own temporary directory, with no simulated driver behind it.
class TempTree {
 public:
  TempTree(std::string_view instance, int lnc)
      : tree_(::neuron::testing::MakeSimTree(root_.path(), instance, {.lnc = lnc})) {}
  const fs::path& root() const { return root_.path(); }
  sim::SimTree& tree() { return *tree_; }
  // Discovery as with the simulated driver running: its PCI addresses, and --lnc `lnc`.
  DiscoveryOptions options(int lnc = 0) const { return SimDiscoveryOptions(*tree_, lnc); }

 private:
  TempRoot root_;
  std::unique_ptr<sim::SimTree> tree_;
};

std::vector<std::string> EfaNames(const Inventory& inv) {
  std::vector<std::string> names;
  for (const EfaInterface& e : inv.efas) names.push_back(e.name);
  return names;
}

TEST(DirectoryDiscovery, Trn1TreeMatchesTheCatalogTables) {
  TempTree node("trn1.32xlarge", 1);
  const Inventory inv = ScanDir(node.root(), node.options());
  EXPECT_THAT(inv.warnings, IsEmpty());
  EXPECT_EQ(inv.instance_type, "trn1.32xlarge");
  EXPECT_FALSE(inv.instance_id.empty());
  EXPECT_EQ(inv.lnc, 1);
  ASSERT_EQ(inv.devices.size(), 16u);

  const NeuronDevice* d0 = inv.FindDevice(0);
  ASSERT_NE(d0, nullptr);
  EXPECT_EQ(d0->bdf, "0000:10:1c.0");
  EXPECT_EQ(d0->numa_node, 0);
  EXPECT_EQ(d0->cpulist, "0-31,64-95");
  EXPECT_THAT(d0->connected, ElementsAre(12, 3, 4, 1));
  EXPECT_EQ(d0->arch_type, "NDv2");
  EXPECT_EQ(d0->instance_type, "Trn1");
  EXPECT_EQ(d0->device_name, "Trainium1");
  EXPECT_EQ(d0->nc_arch_type, "NCv2");
  EXPECT_EQ(d0->physical_cores, 2);
  EXPECT_EQ(d0->memory_bytes, 32 * kGiB);
  EXPECT_EQ(d0->state, DeviceState::kReady);
  EXPECT_EQ(d0->dev_node, "/dev/neuron0");  // the host path, never under the root
  EXPECT_TRUE(d0->attributes.Get("serial_number").has_value());

  const NeuronDevice* d2 = inv.FindDevice(2);
  ASSERT_NE(d2, nullptr);
  EXPECT_EQ(d2->bdf, "0000:a0:1c.0");
  EXPECT_EQ(d2->numa_node, 1);
  EXPECT_EQ(d2->cpulist, "32-63,96-127");
  const NeuronDevice* d15 = inv.FindDevice(15);
  ASSERT_NE(d15, nullptr);
  EXPECT_THAT(d15->connected, ElementsAre(11, 14, 3, 12));
  EXPECT_EQ(d15->bdf, "0000:a0:1b.0");

  EXPECT_EQ(inv.LogicalCoresPerDevice(), 2);
  EXPECT_THAT(inv.CoreIds(5), ElementsAre(10, 11));
  EXPECT_TRUE(inv.LinkTopology().Adjacent(0, 12));
  EXPECT_FALSE(inv.LinkTopology().Adjacent(0, 5));

  EXPECT_THAT(EfaNames(inv),
              UnorderedElementsAre("rdmap16s25", "rdmap16s26", "rdmap32s25", "rdmap32s26",
                                   "rdmap144s25", "rdmap144s26", "rdmap160s25", "rdmap160s26"));
  const EfaInterface* e = inv.FindEfa("rdmap16s25");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->bdf, "0000:10:19.0");
  EXPECT_EQ(e->numa_node, 0);
  EXPECT_EQ(e->port_state, "ACTIVE");
  EXPECT_EQ(e->phys_state, "LinkUp");
  EXPECT_EQ(e->rate, "100 Gb/sec (4X EDR)");
  EXPECT_EQ(e->rate_gbps, 100);
  EXPECT_TRUE(e->uverbs.has_value());
  const EfaInterface* e160 = inv.FindEfa("rdmap160s26");
  ASSERT_NE(e160, nullptr);
  EXPECT_EQ(e160->bdf, "0000:a0:1a.0");
  EXPECT_EQ(e160->numa_node, 1);
  // Each EFA has its own uverbs node.
  std::set<int> uverbs;
  for (const EfaInterface& x : inv.efas) uverbs.insert(x.uverbs.value_or(-1));
  EXPECT_EQ(uverbs.size(), 8u);
  EXPECT_FALSE(uverbs.contains(-1));
}

TEST(DirectoryDiscovery, Trn2LogicalCoresFollowLnc) {
  TempTree lnc2("trn2.48xlarge", 2);
  // No --lnc: the instance default, 2 on trn2 (docs/architecture.md#lnc).
  const Inventory inv2 = ScanDir(lnc2.root(), lnc2.options());
  EXPECT_THAT(inv2.warnings, IsEmpty());
  EXPECT_EQ(inv2.lnc, 2);
  EXPECT_EQ(inv2.LogicalCoresPerDevice(), 4);
  ASSERT_EQ(inv2.devices.size(), 16u);
  EXPECT_THAT(inv2.CoreIds(1), ElementsAre(4, 5, 6, 7));
  const NeuronDevice* d0 = inv2.FindDevice(0);
  ASSERT_NE(d0, nullptr);
  EXPECT_EQ(d0->bdf, "0000:cc:00.0");
  EXPECT_EQ(d0->numa_node, 1);
  EXPECT_EQ(d0->cpulist, "48-95,144-191");
  EXPECT_THAT(d0->connected, ElementsAre(12, 1, 3, 4));  // the trn2 driver's order
  EXPECT_EQ(d0->arch_type, "NDv3");
  EXPECT_EQ(d0->nc_arch_type, "NCv3");
  EXPECT_EQ(d0->physical_cores, 8);
  EXPECT_EQ(d0->memory_bytes, 96 * kGiB);
  EXPECT_EQ(inv2.efas.size(), 16u);

  // --lnc 1: sysfs shows physical cores either way, so the same tree serves both settings.
  const Inventory inv1 = ScanDir(lnc2.root(), lnc2.options(/*lnc=*/1));
  EXPECT_THAT(inv1.warnings, IsEmpty());
  EXPECT_EQ(inv1.lnc, 1);
  EXPECT_EQ(inv1.LogicalCoresPerDevice(), 8);
  EXPECT_THAT(inv1.CoreIds(1), ElementsAre(8, 9, 10, 11, 12, 13, 14, 15));
  // An LNC the instance does not support falls back to its default rather than failing.
  EXPECT_EQ(ScanDir(lnc2.root(), lnc2.options(/*lnc=*/3)).lnc, 2);

  // The driver does not publish the runtime's LNC, so the simulator's private node.json may not
  // decide it either (docs/architecture.md#device-abi): one saying LNC=1 leaves the default.
  absl::StatusOr<NodeInfo> info = ReadNodeInfo(RootPaths(lnc2.root()));
  ASSERT_TRUE(info.ok()) << info.status();
  info->lnc = 1;
  ASSERT_TRUE(
      sim::WriteFileAtomic(neuron::sim::NodeJsonPath(RootPaths(lnc2.root())), NodeInfoToJson(*info))
          .ok());
  EXPECT_EQ(ScanDir(lnc2.root(), lnc2.options()).lnc, 2);
}

TEST(DirectoryDiscovery, Inf2LargestIsARing) {
  TempTree node("inf2.48xlarge", 1);
  const Inventory inv = ScanDir(node.root(), node.options());
  EXPECT_THAT(inv.warnings, IsEmpty());
  ASSERT_EQ(inv.devices.size(), 12u);
  const NeuronDevice* d0 = inv.FindDevice(0);
  ASSERT_NE(d0, nullptr);
  EXPECT_EQ(d0->bdf, "0000:80:1e.0");
  EXPECT_EQ(d0->numa_node, 2);
  EXPECT_EQ(d0->cpulist, "48-71,144-167");
  EXPECT_THAT(d0->connected, ElementsAre(11, 1));
  EXPECT_EQ(d0->device_name, "Inferentia2");
  EXPECT_EQ(d0->arch_type, "NDv3");
  EXPECT_THAT(inv.efas, IsEmpty());
}

TEST(DirectoryDiscovery, UnpluggedDeviceAndRemovedEfaAreAbsent) {
  TempTree node("trn1.32xlarge", 1);
  ASSERT_TRUE(node.tree().RemoveDevice(3).ok());
  ASSERT_TRUE(node.tree().RemoveEfa("rdmap16s25").ok());
  Inventory inv = ScanDir(node.root(), node.options());
  EXPECT_THAT(inv.warnings, IsEmpty());
  EXPECT_EQ(inv.devices.size(), 15u);
  EXPECT_EQ(inv.FindDevice(3), nullptr);
  EXPECT_THAT(inv.CoreIds(3), IsEmpty());
  EXPECT_THAT(inv.CoreIds(4), ElementsAre(8, 9));  // neighbours keep their ids
  EXPECT_EQ(inv.FindEfa("rdmap16s25"), nullptr);
  EXPECT_EQ(inv.efas.size(), 7u);

  ASSERT_TRUE(node.tree().AddDevice(3).ok());
  ASSERT_TRUE(node.tree().SetDeviceState(4, DeviceState::kInvalid).ok());
  inv = ScanDir(node.root(), node.options());
  ASSERT_NE(inv.FindDevice(3), nullptr);
  EXPECT_EQ(inv.FindDevice(3)->bdf, "0000:a0:1d.0");
  EXPECT_EQ(inv.FindDevice(4)->state, DeviceState::kInvalid);
}

TEST(DirectoryDiscovery, CorruptedSimFilesGiveWarningsNamingTheFile) {
  TempTree node("inf2.24xlarge", 1);
  const Inventory clean = ScanDir(node.root(), node.options());
  ASSERT_NE(clean.FindDevice(1), nullptr);
  const std::string bdf = clean.FindDevice(1)->bdf;
  ASSERT_FALSE(bdf.empty());
  const fs::path dev = node.root() / "sys/class/neuron_device/neuron1";
  const fs::path pci = node.root() / "sys/bus/pci/devices" / bdf;
  Write(dev / "core_count", "two");
  Write(dev / "connected_devices", "13, , 5\n");
  Write(dev / "reset", "7\n");
  Write(pci / "numa_node", "-5\n");
  Write(pci / "local_cpulist", "31-0\n");
  const Inventory inv = ScanDir(node.root(), node.options());
  const NeuronDevice* d1 = inv.FindDevice(1);
  ASSERT_NE(d1, nullptr);
  EXPECT_EQ(d1->physical_cores, 0);
  EXPECT_THAT(d1->connected, IsEmpty());
  EXPECT_FALSE(d1->state.has_value());
  EXPECT_FALSE(d1->numa_node.has_value());
  EXPECT_EQ(d1->cpulist, "");
  EXPECT_EQ(d1->bdf, bdf);
  EXPECT_EQ(d1->device_name, "Inferentia2");  // the rest of the device is still read
  ASSERT_EQ(inv.warnings.size(), 5u);
  const std::string all = ::testing::PrintToString(inv.warnings);
  for (const fs::path& file : {dev / "core_count", dev / "connected_devices", dev / "reset",
                               pci / "numa_node", pci / "local_cpulist"}) {
    EXPECT_THAT(all, HasSubstr(file.string()));
  }
  // Other devices are unaffected.
  EXPECT_EQ(inv.FindDevice(0)->physical_cores, 2);
}

TEST(DirectoryDiscovery, EmptyRootHasNothingAndNoWarnings) {
  TempRoot root;
  const Inventory inv = ScanDir(root.path());
  EXPECT_THAT(inv.devices, IsEmpty());
  EXPECT_THAT(inv.efas, IsEmpty());
  EXPECT_THAT(inv.warnings, IsEmpty());
  EXPECT_EQ(inv.instance_type, "");
  EXPECT_EQ(inv.Spec(), nullptr);
  EXPECT_EQ(inv.LogicalCoresPerDevice(), 0);
}

// A hand-made tree: class entries as real directories, values chosen to break parsers.
struct BadValue {
  std::string_view file;  // relative to the device directory
  std::string_view value;
};

TEST(DirectoryDiscovery, MalformedValuesAreAbsentWithWarnings) {
  const std::vector<BadValue> cases = {
      {"core_count", "abc"},
      {"core_count", "-2"},
      {"core_count", "99999999999999999999999"},
      {"core_count", ""},
      {"connected_devices", "1,2"},
      {"connected_devices", "-1\n"},
      {"connected_devices", "4, 99999999999\n"},
      {"reset", "READY\n"},
      {"reset", "-1\n"},
      {"reset", ""},
      {"reset", "18446744073709551616\n"},
  };
  for (const BadValue& c : cases) {
    SCOPED_TRACE(std::string(c.file) + "=\"" + std::string(c.value) + "\"");
    TempRoot root;
    const fs::path dev = root.path() / "sys/class/neuron_device/neuron0";
    Write(dev / "info/architecture/arch_type", "NDv2\n");
    Write(dev / c.file, c.value);
    const Inventory inv = ScanDir(root.path());
    ASSERT_EQ(inv.devices.size(), 1u);
    const NeuronDevice& d = inv.devices[0];
    EXPECT_EQ(d.arch_type, "NDv2");
    EXPECT_EQ(d.physical_cores, 0);
    EXPECT_THAT(d.connected, IsEmpty());
    EXPECT_FALSE(d.state.has_value());
    ASSERT_EQ(inv.warnings.size(), 1u);
    EXPECT_THAT(inv.warnings[0], HasSubstr((dev / c.file).string()));
  }
}

TEST(DirectoryDiscovery, MalformedPciValuesAreAbsentWithWarnings) {
  for (std::string_view numa : {"x\n", "", "-2\n", "99999999999999999999\n", "1 \n"}) {
    SCOPED_TRACE("numa_node=\"" + std::string(numa) + "\"");
    TempRoot root;
    Write(root.path() / "sys/class/neuron_device/neuron0/reset", "1\n");
    const fs::path pci = root.path() / "sys/bus/pci/devices/0000:10:1c.0";
    Write(pci / "numa_node", numa);
    Write(pci / "local_cpulist", "0-31,64-95\n");
    const Inventory inv = ScanDir(root.path(), {.bdf_resolver = TableResolver({"0000:10:1c.0"})});
    ASSERT_EQ(inv.devices.size(), 1u);
    EXPECT_EQ(inv.devices[0].bdf, "0000:10:1c.0");
    EXPECT_FALSE(inv.devices[0].numa_node.has_value());
    EXPECT_EQ(inv.devices[0].cpulist, "0-31,64-95");
    EXPECT_EQ(inv.devices[0].state, DeviceState::kReady);
    ASSERT_EQ(inv.warnings.size(), 1u);
    EXPECT_THAT(inv.warnings[0], HasSubstr((pci / "numa_node").string()));
  }
}

TEST(DirectoryDiscovery, NumaMinusOneIsAbsentWithoutWarning) {
  TempRoot root;
  Write(root.path() / "sys/class/neuron_device/neuron0/reset", "1\n");
  Write(root.path() / "sys/bus/pci/devices/0000:00:1e.0/numa_node", "-1\n");
  const Inventory inv = ScanDir(root.path(), {.bdf_resolver = TableResolver({"0000:00:1e.0"})});
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.devices[0].bdf, "0000:00:1e.0");
  EXPECT_FALSE(inv.devices[0].numa_node.has_value());
  EXPECT_THAT(inv.warnings, IsEmpty());
}

TEST(DirectoryDiscovery, MissingFilesAreAbsentFields) {
  TempRoot root;
  // A device directory without any files, one without info/, and a dangling class link
  // (a device unplugged between listing and reading).
  fs::create_directories(root.path() / "sys/class/neuron_device/neuron0");
  Write(root.path() / "sys/class/neuron_device/neuron1/core_count", "2");
  Write(root.path() / "sys/class/neuron_device/neuron1/info/serial_number", "\n");
  fs::create_symlink("../../devices/virtual/neuron_device/neuron2",
                     root.path() / "sys/class/neuron_device/neuron2");
  // Entries that are not neuron devices.
  fs::create_directories(root.path() / "sys/class/neuron_device/neuron_extra");
  Write(root.path() / "sys/class/neuron_device/node_id_2", "-1\n");
  const Inventory inv = ScanDir(root.path());
  EXPECT_THAT(inv.warnings, IsEmpty());
  ASSERT_EQ(inv.devices.size(), 2u);
  const NeuronDevice& d0 = inv.devices[0];
  EXPECT_EQ(d0.index, 0);
  EXPECT_EQ(d0.arch_type, "");
  EXPECT_EQ(d0.physical_cores, 0);
  EXPECT_FALSE(d0.state.has_value());
  EXPECT_FALSE(d0.attributes.Get("serial_number").has_value());
  EXPECT_FALSE(d0.memory_bytes.has_value());
  EXPECT_EQ(d0.bdf, "");
  EXPECT_EQ(d0.dev_node, "/dev/neuron0");
  const NeuronDevice& d1 = inv.devices[1];
  EXPECT_EQ(d1.physical_cores, 2);
  EXPECT_FALSE(d1.attributes.Get("serial_number").has_value());  // "\n": the firmware read failed
}

TEST(DirectoryDiscovery, EfaIsToldApartByDriverNotName) {
  TempRoot root;
  const fs::path pci = root.path() / "sys/devices/pci0000:10";
  // An EFA without ports/, and an mlx5 device whose name looks like an EFA's.
  fs::create_directories(pci / "0000:10:19.0/infiniband/rdmap16s25");
  fs::create_directories(pci / "0000:10:1a.0/infiniband/rdmap16s26");
  fs::create_directories(root.path() / "sys/bus/pci/drivers/efa");
  fs::create_directories(root.path() / "sys/bus/pci/drivers/mlx5_core");
  fs::create_symlink("../../../bus/pci/drivers/efa", pci / "0000:10:19.0/driver");
  fs::create_symlink("../../../bus/pci/drivers/mlx5_core", pci / "0000:10:1a.0/driver");
  fs::create_symlink("../../../0000:10:19.0", pci / "0000:10:19.0/infiniband/rdmap16s25/device");
  fs::create_symlink("../../../0000:10:1a.0", pci / "0000:10:1a.0/infiniband/rdmap16s26/device");
  fs::create_directories(root.path() / "sys/class/infiniband");
  fs::create_symlink("../../devices/pci0000:10/0000:10:19.0/infiniband/rdmap16s25",
                     root.path() / "sys/class/infiniband/rdmap16s25");
  fs::create_symlink("../../devices/pci0000:10/0000:10:1a.0/infiniband/rdmap16s26",
                     root.path() / "sys/class/infiniband/rdmap16s26");
  // An EFA as a real directory (D12, driver-sim/README.md#deviations) with a malformed rate.
  const fs::path real = root.path() / "sys/class/infiniband/efa_7";
  fs::create_directories(real / "ports/1");
  fs::create_symlink("../../../devices/pci0000:10/0000:10:19.0", real / "device");
  Write(real / "ports/1/state", "1: DOWN\n");
  Write(real / "ports/1/rate", "fast\n");
  const Inventory inv = ScanDir(root.path());
  ASSERT_EQ(inv.efas.size(), 2u);
  const EfaInterface* e = inv.FindEfa("rdmap16s25");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->bdf, "0000:10:19.0");
  EXPECT_EQ(e->port_state, "");
  EXPECT_FALSE(e->rate_gbps.has_value());
  EXPECT_FALSE(e->uverbs.has_value());
  EXPECT_EQ(inv.FindEfa("rdmap16s26"), nullptr);
  const EfaInterface* d12 = inv.FindEfa("efa_7");
  ASSERT_NE(d12, nullptr);
  EXPECT_EQ(d12->port_state, "DOWN");
  EXPECT_EQ(d12->rate, "");
  ASSERT_EQ(inv.warnings.size(), 1u);
  EXPECT_THAT(inv.warnings[0], HasSubstr("efa_7/ports/1/rate"));
}

// docs/architecture.md#instance-identity: instance type and id are DMI's, as on a real node. The
// simulator's private node.json (docs/architecture.md#device-abi) is never read: not its identity,
// not its PCI addresses, and a malformed one is no warning of ours.
TEST(DirectoryDiscovery, InstanceIdentityComesFromDmiOnly) {
  TempRoot root;
  Write(root.path() / "sys/class/neuron_device/neuron0/reset", "1\n");
  Write(root.path() / "run/neuron/node.json",
        R"({"instance_type":"inf2.xlarge","instance_id":"i-other","lnc":1,)"
        R"("devices":[{"index":0,"bdf":"0000:10:1c.0"}]})");
  Inventory inv = ScanDir(root.path());
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.instance_type, "") << "no DMI: unknown, not node.json's";
  EXPECT_EQ(inv.instance_id, "");
  EXPECT_EQ(inv.devices[0].bdf, "") << "no driver: no PCI address, not node.json's";
  EXPECT_THAT(inv.warnings, IsEmpty());

  Write(root.path() / "sys/class/dmi/id/product_name", "trn1.32xlarge\n");
  Write(root.path() / "sys/class/dmi/id/board_asset_tag", "i-0abcdef0123456789\n");
  Write(root.path() / "run/neuron/node.json", "{not json");
  inv = ScanDir(root.path());
  EXPECT_EQ(inv.instance_type, "trn1.32xlarge");
  EXPECT_EQ(inv.instance_id, "i-0abcdef0123456789");
  EXPECT_EQ(inv.lnc, 1);  // trn1's default
  EXPECT_THAT(inv.warnings, IsEmpty());
}

// The asset tag names the plugin's sockets (plugin/README.md#flags): anything but an instance id's
// form ("i-" and 8 or 17 hex digits) is a warning and is not used, in both back ends.
TEST(DirectoryDiscovery, AnAssetTagThatIsNoInstanceIdIsAWarningAndUnused) {
  TempRoot root;
  Write(root.path() / "sys/class/neuron_device/neuron0/reset", "1\n");
  const fs::path tag = root.path() / "sys/class/dmi/id/board_asset_tag";
  Write(tag, "i-1a2b3c4d\n");
  EXPECT_EQ(ScanDir(root.path()).instance_id, "i-1a2b3c4d");
  for (const std::string& bad : std::vector<std::string>{
           "../../x", "i-0abc/../../x", "i-0abc", "i-0ABCDEF0123456789", "i-0abcdef012345678\x1b",
           "To Be Filled By O.E.M.", std::string("i-01234567\0/x", 13)}) {
    SCOPED_TRACE(bad);
    Write(tag, bad + "\n");
    const Inventory inv = ScanDir(root.path());
    EXPECT_EQ(inv.instance_id, "");
    ASSERT_EQ(inv.warnings.size(), 1u) << ::testing::PrintToString(inv.warnings);
    EXPECT_THAT(inv.warnings[0], HasSubstr("board_asset_tag is not an EC2 instance id"));
  }
}

// Without a driver behind the device nodes (a SimTree without `neuron-sim up`, or a node whose
// driver is not loaded) no device has a PCI address, and the reason is said once, not per device.
TEST(DirectoryDiscovery, WithoutADriverBdfsAreAbsentWithOneWarning) {
  TempTree node("inf2.24xlarge", 1);
  const Inventory inv = ScanDir(node.root());
  ASSERT_EQ(inv.devices.size(), 6u);
  for (const NeuronDevice& d : inv.devices) {
    SCOPED_TRACE(d.index);
    EXPECT_EQ(d.bdf, "");
    EXPECT_FALSE(d.numa_node.has_value());
    EXPECT_EQ(d.cpulist, "");
    EXPECT_EQ(d.state, DeviceState::kReady);  // the rest of each device is still read
  }
  ASSERT_EQ(inv.warnings.size(), 1u) << ::testing::PrintToString(inv.warnings);
  EXPECT_THAT(inv.warnings[0], HasSubstr("no Neuron driver behind the device node"));
  EXPECT_THAT(inv.warnings[0], HasSubstr((node.root() / "dev/neuron").string()));
}

TEST(BdfResolver, TableBackEnd) {
  std::unique_ptr<BdfResolver> r = MakeTableBdfResolver({"0000:10:1c.0", "", "0000:a0:1d.0"});
  EXPECT_EQ(r->name(), "table");
  EXPECT_EQ(*r->Resolve(0), "0000:10:1c.0");
  EXPECT_EQ(*r->Resolve(2), "0000:a0:1d.0");
  EXPECT_TRUE(absl::IsNotFound(r->Resolve(1).status()));
  EXPECT_TRUE(absl::IsNotFound(r->Resolve(3).status()));
  EXPECT_TRUE(absl::IsNotFound(r->Resolve(-1).status()));
}

// The command word the driver compares against, worked out by hand from neuron_ioctl.h:
// _IOR('N', 106, struct neuron_ioctl_device_bdf_ext *) = dir 2 << 30 | size 8 << 16 |
// 0x4e << 8 | 0x6a; and the kernel's own macro agrees.
TEST(BdfResolver, IoctlNumberMatchesTheDriverHeader) {
  EXPECT_EQ(NEURON_ABI_DEVICE_BDF_EXT, 0x80084e6au);
  EXPECT_EQ(NEURON_ABI_DEVICE_BDF_EXT, _IOR('N', 106, neuron_abi_bdf_ext*));
}

// A device node no driver answers (the simulator's placeholder without `neuron-sim up`: a
// regular file, ENOTTY) is reported once with the reason; the other devices are then NotFound,
// so discovery shows one warning, not one per device.
TEST(BdfResolver, IoctlBackEndWithoutADriverSaysSoOnce) {
  TempRoot root;
  Write(root.path() / "dev/neuron0", "");
  Write(root.path() / "dev/neuron1", "");
  std::unique_ptr<BdfResolver> r = MakeIoctlBdfResolver(RootPaths(root.path()));
  EXPECT_EQ(r->name(), "ioctl");
  const absl::Status first = r->Resolve(0).status();
  EXPECT_FALSE(first.ok());
  EXPECT_FALSE(absl::IsNotFound(first)) << "the first failure is reported: " << first;
  // One message for every device, naming none (back ends ask in different orders).
  EXPECT_THAT(std::string{first.message()}, HasSubstr((root.path() / "dev/neuron*").string()));
  EXPECT_THAT(std::string{first.message()}, HasSubstr("no Neuron driver behind the device node"));
  EXPECT_TRUE(absl::IsNotFound(r->Resolve(1).status())) << "the same failure again";
  EXPECT_TRUE(absl::IsNotFound(r->Resolve(2).status()));  // no node at all
}

TEST(BdfResolver, FormatAndValidate) {
  EXPECT_EQ(FormatBdf(0, 0x10, 0x1c, 0), "0000:10:1c.0");
  EXPECT_EQ(FormatBdf(0x10000, 0xa0, 0x1f, 7), "10000:a0:1f.7");
  EXPECT_TRUE(IsBdf("0000:cc:00.0"));
  EXPECT_TRUE(IsBdf("10000:a0:1f.7"));
  for (std::string_view bad : {"", "0000:CC:00.0", "0000:cc:00.8", "000:cc:00.0", "0000-cc:00.0",
                               "0000:cc:00.0\n", "../../etc"}) {
    EXPECT_FALSE(IsBdf(bad)) << bad;
  }
}

}  // namespace
}  // namespace neuron

// The simulated driver's per-device files (counts, modes, formats, counters, state, PCI identity)
// against docs/driver-interface.md and docs/hardware.md: expected values are written literally
// from those documents. The node-wide parts of the tree: sim_tree_test.cc.
#include <regex>
#include <string>

#include "core/driver/device_attributes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver-sim/sim_tree_test_util.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using sim_tree_test::CountDeviceFiles;
using sim_tree_test::Mode;
using sim_tree_test::Node;
using sim_tree_test::Slurp;
using ::testing::HasSubstr;

TEST(SimTreeTest, FileCountsPerDeviceMatchTheDriver) {
  Node trn1("trn1.32xlarge");
  EXPECT_EQ(CountDeviceFiles(trn1.dev(0)), 238);
  EXPECT_EQ(CountDeviceFiles(trn1.dev(15)), 238);
  EXPECT_FALSE(fs::exists(trn1.dev(16)));
  Node inf2("inf2.xlarge");
  EXPECT_EQ(CountDeviceFiles(inf2.dev(0)), 238);
}

TEST(SimTreeTest, ModesFollowTheDriver) {
  Node n("trn1.32xlarge");
  const fs::path d = n.dev(2);
  EXPECT_EQ(Mode(d / "reset"), 0600);
  EXPECT_EQ(Mode(d / "core_count"), 0400);
  EXPECT_EQ(Mode(d / "connected_devices"), 0400);
  EXPECT_EQ(Mode(d / "dev"), 0444);
  for (const auto& e : fs::recursive_directory_iterator(d)) {
    const fs::path& p = e.path();
    if (e.is_symlink()) continue;
    if (e.is_directory()) {
      EXPECT_EQ(Mode(p), 0755) << p;
      continue;
    }
    const std::string name = p.filename().string();
    if (p.parent_path() == d &&
        (name == "reset" || name == "core_count" || name == "connected_devices" || name == "dev")) {
      continue;
    }
    EXPECT_EQ(Mode(p), 0644) << p;
  }
  EXPECT_EQ(Mode(n.root() / "sys/class/neuron_device/node_id_2"), 0444);
}

TEST(SimTreeTest, ExactFormatsOfDeviceFiles) {
  Node trn1("trn1.32xlarge");
  EXPECT_EQ(Slurp(trn1.dev(0) / "core_count"), "2");
  EXPECT_EQ(Slurp(trn1.dev(0) / "connected_devices"), "12, 3, 4, 1\n");
  EXPECT_EQ(Slurp(trn1.dev(15) / "connected_devices"), "11, 14, 3, 12\n");
  EXPECT_EQ(Slurp(trn1.dev(0) / "reset"), "1\n");
  EXPECT_EQ(Slurp(trn1.dev(0) / "info/notify_delay"), "-1\n");
  EXPECT_EQ(Slurp(trn1.dev(0) / "dev"), "239:0\n");
  EXPECT_EQ(Slurp(trn1.dev(7) / "uevent"), "MAJOR=239\nMINOR=7\nDEVNAME=neuron7\n");
  EXPECT_EQ(fs::read_symlink(trn1.dev(0) / "subsystem"), "../../../../class/neuron_device");
  EXPECT_TRUE(fs::is_directory(trn1.dev(0) / "power"));
  EXPECT_TRUE(
      std::regex_match(Slurp(trn1.dev(0) / "info/serial_number"), std::regex("[0-9a-f]{16}\n")));
  EXPECT_NE(Slurp(trn1.dev(0) / "info/serial_number"), Slurp(trn1.dev(1) / "info/serial_number"));
  EXPECT_EQ(Slurp(trn1.dev(0) / "neuron_core1/stats/tensor_engine/pe_cntrs"),
            "xrow_grp,mm_active,wl_active,idle\n0,0,0,0\n1,0,0,0\n2,0,0,0\n3,0,0,0\n");

  Node inf2("inf2.48xlarge");
  EXPECT_EQ(Slurp(inf2.dev(0) / "connected_devices"), "11, 1\n");
  EXPECT_EQ(Slurp(inf2.dev(11) / "connected_devices"), "10, 0\n");
  Node inf2_24("inf2.24xlarge");
  EXPECT_EQ(Slurp(inf2_24.dev(0) / "connected_devices"), "1\n");
  EXPECT_EQ(Slurp(inf2_24.dev(1) / "connected_devices"), "0, 2\n");
  EXPECT_EQ(Slurp(inf2_24.dev(5) / "connected_devices"), "4\n");
  Node small("trn1.2xlarge");
  EXPECT_EQ(Slurp(small.dev(0) / "connected_devices"), "\n");
}

// Every attribute the agent publishes (core/driver/device_attributes.h) is in the simulated tree,
// so a new row cannot go without a value in sim_tree.cc unnoticed.
TEST(SimTreeTest, EveryPublishedAttributeIsWritten) {
  Node n("trn1.2xlarge");
  for (const DeviceAttributeSpec& a : kDeviceAttributes) {
    const std::string value = Slurp(n.dev(0) / a.file);
    EXPECT_GT(value.size(), 1u) << a.file;
    EXPECT_EQ(value.back(), '\n') << a.file;
  }
}

TEST(SimTreeTest, ArchitectureStringsPerGeneration) {
  struct Case {
    const char* type;
    const char *arch, *instance, *name, *nc;
  };
  for (const Case& c : {Case{"trn1.32xlarge", "NDv2\n", "Trn1\n", "Trainium1\n", "NCv2\n"},
                        Case{"inf2.xlarge", "NDv3\n", "Inf2\n", "Inferentia2\n", "NCv2\n"}}) {
    Node n(c.type);
    EXPECT_EQ(Slurp(n.dev(0) / "info/architecture/arch_type"), c.arch) << c.type;
    EXPECT_EQ(Slurp(n.dev(0) / "info/architecture/instance_type"), c.instance) << c.type;
    EXPECT_EQ(Slurp(n.dev(0) / "info/architecture/device_name"), c.name) << c.type;
    EXPECT_EQ(Slurp(n.dev(0) / "neuron_core1/info/architecture/arch_type"), c.nc) << c.type;
  }
}

// One trn2.48xlarge tree for every trn2 check: its 13,500 files are slow to create on a loaded
// disk, and each test runs in its own process.
TEST(SimTreeTest, Trn2TreeMatchesTheDriver) {
  Node n("trn2.48xlarge", 2);
  EXPECT_EQ(CountDeviceFiles(n.dev(0)), 844);
  EXPECT_EQ(CountDeviceFiles(n.dev(15)), 844);
  EXPECT_FALSE(fs::exists(n.dev(16)));
  EXPECT_EQ(Slurp(n.dev(0) / "core_count"), "8");
  EXPECT_EQ(Slurp(n.dev(0) / "connected_devices"), "12, 1, 3, 4\n");
  EXPECT_EQ(Slurp(n.dev(15) / "connected_devices"), "14, 3, 11, 12\n");
  EXPECT_TRUE(fs::is_directory(n.dev(0) / "neuron_core7"));
  EXPECT_FALSE(fs::exists(n.dev(0) / "neuron_core8"));
  EXPECT_EQ(Slurp(n.dev(3) / "info/architecture/arch_type"), "NDv3\n");
  EXPECT_EQ(Slurp(n.dev(3) / "info/architecture/instance_type"), "Trn2\n");
  EXPECT_EQ(Slurp(n.dev(3) / "info/architecture/device_name"), "Trainium2\n");
  EXPECT_EQ(Slurp(n.dev(3) / "neuron_core5/info/architecture/arch_type"), "NCv3\n");
  // docs/hardware.md#neuronlink-topology: device 0 is 0000:cc:00.0, CPUs 48-95,144-191, NUMA 1.
  const fs::path pci = n.root() / "sys/bus/pci/devices/0000:cc:00.0";
  EXPECT_EQ(Slurp(pci / "device"), "0x7364\n");
  EXPECT_EQ(Slurp(pci / "numa_node"), "1\n");
  EXPECT_EQ(Slurp(pci / "local_cpulist"), "48-95,144-191\n");
  EXPECT_EQ(Slurp(pci / "local_cpus"), "ffffffff,ffff0000,00000000,ffffffff,ffff0000,00000000\n");
  int efas = 0;
  for (const auto& e : fs::directory_iterator(n.root() / "sys/class/infiniband")) {
    efas += e.is_symlink() ? 1 : 0;
  }
  EXPECT_EQ(efas, 16);  // docs/hardware.md#efa-per-instance
  absl::StatusOr<NodeInfo> info = ReadNodeInfo(RootPaths(n.root()));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->lnc, 2);
  EXPECT_EQ(info->device_bdf[15], "0000:f7:00.0");

  for (int d : {0, 15}) {
    for (int c = 0; c < 8; ++c) {
      const fs::path other = n.dev(d) / ("neuron_core" + std::to_string(c)) / "stats/other_info";
      EXPECT_EQ(Slurp(other / "reset_req_count/total"), "1\n") << d << "/" << c;
      EXPECT_EQ(Slurp(other / "reset_req_count/present"), "1\n") << d << "/" << c;
      EXPECT_EQ(Slurp(other / "reset_fail_count/total"), "0\n");
      EXPECT_EQ(Slurp(other / "nc_time_in_use/total"), "0\n");
      EXPECT_FALSE(fs::exists(other / "reset_req_count/peak"));
    }
    const fs::path host = n.dev(d) / "stats/memory_usage/host_mem";
    EXPECT_EQ(Slurp(host / "driver_memory/total"), "4194304\n");
    EXPECT_EQ(Slurp(host / "driver_memory/peak"), "4194304\n");
    EXPECT_EQ(Slurp(host / "tensors/total"), "0\n");
    EXPECT_EQ(Slurp(n.dev(d) / "neuron_core0/stats/memory_usage/host_mem/total"), "4194304\n");
    EXPECT_EQ(Slurp(n.dev(d) / "neuron_core1/stats/memory_usage/host_mem/total"), "0\n");
    EXPECT_EQ(Slurp(n.dev(d) / "neuron_core3/stats/memory_usage/device_mem/model_code/peak"),
              "0\n");
    EXPECT_EQ(Slurp(n.dev(d) / "neuron_core3/stats/status/hw_repairable_hbm_ue_error/total"),
              "0\n");
    EXPECT_EQ(Slurp(n.dev(d) / "stats/power/utilization"),
              "POWER_STATUS_NO_DATA,0,0.00,0.00,0.00\n");
    EXPECT_EQ(Slurp(n.dev(d) / "stats/hardware/mem_ecc_repairable_uncorrected"), "0\n");
  }
}

TEST(SimTreeTest, CounterArithmeticFollowsTheDriver) {
  Node n("trn1.2xlarge");
  SimTree& t = n.tree();
  const fs::path mem = t.DeviceMemDir(0, 0, "tensors");
  EXPECT_EQ(mem, n.dev(0) / "neuron_core0/stats/memory_usage/device_mem/tensors");
  auto triple = [&](const fs::path& dir) {
    return Slurp(dir / "total") + Slurp(dir / "present") + Slurp(dir / "peak");
  };
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kInc, 100).ok());
  EXPECT_EQ(triple(mem), "100\n100\n100\n");
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kInc, 50).ok());
  EXPECT_EQ(triple(mem), "150\n50\n150\n");
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kDec, 120).ok());
  EXPECT_EQ(triple(mem), "30\n120\n150\n");
  // Below zero the u64 wraps; peak stays.
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kDec, 40).ok());
  EXPECT_EQ(triple(mem), "18446744073709551606\n40\n150\n");
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kSet, 7).ok());
  EXPECT_EQ(triple(mem), "7\n7\n150\n");
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kSet, 900).ok());
  EXPECT_EQ(triple(mem), "900\n900\n900\n");

  // A user's write clears the field it wrote to (docs/driver-interface.md#total-present-peak): the
  // next update starts from 0.
  std::ofstream(mem / "total") << "whatever";
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kInc, 5).ok());
  EXPECT_EQ(triple(mem), "5\n5\n900\n");
  std::ofstream(mem / "peak") << "";
  ASSERT_TRUE(t.ApplyCounter(mem, CounterOp::kInc, 1).ok());
  EXPECT_EQ(triple(mem), "6\n1\n6\n");

  // Status and other_info counters have no peak and get none.
  const fs::path status = t.StatusDir(0, 1, "success");
  ASSERT_TRUE(t.ApplyCounter(status, CounterOp::kInc, 3).ok());
  ASSERT_TRUE(t.ApplyCounter(status, CounterOp::kInc, 4).ok());
  EXPECT_EQ(Slurp(status / "total"), "7\n");
  EXPECT_EQ(Slurp(status / "present"), "4\n");
  EXPECT_FALSE(fs::exists(status / "peak"));
  const fs::path resets = t.OtherInfoDir(0, 1, "reset_req_count");
  ASSERT_TRUE(t.ApplyCounter(resets, CounterOp::kInc, 1).ok());
  EXPECT_EQ(Slurp(resets / "total"), "2\n");
  const fs::path host = t.HostMemDir(0, "driver_memory");
  ASSERT_TRUE(t.ApplyCounter(host, CounterOp::kInc, 4096).ok());
  EXPECT_EQ(triple(host), "4198400\n4096\n4198400\n");
  EXPECT_EQ(Mode(host / "total"), 0644);

  EXPECT_EQ(t.ApplyCounter(n.root() / "nowhere", CounterOp::kInc, 1).code(),
            absl::StatusCode::kNotFound);
}

TEST(SimTreeTest, DeviceStateHardwareErrorsAndPower) {
  Node n("trn1.32xlarge");
  SimTree& t = n.tree();
  ASSERT_TRUE(t.SetDeviceState(4, DeviceState::kInvalid).ok());
  EXPECT_EQ(Slurp(n.dev(4) / "reset"), "2\n");
  EXPECT_EQ(Mode(n.dev(4) / "reset"), 0600);
  EXPECT_EQ(*t.GetDeviceState(4), DeviceState::kInvalid);
  EXPECT_EQ(*t.GetDeviceState(5), DeviceState::kReady);
  std::ofstream(n.dev(5) / "reset") << "7\n";
  EXPECT_THAT(std::string(t.GetDeviceState(5).status().message()), HasSubstr("neuron5/reset"));
  EXPECT_EQ(t.SetDeviceState(16, DeviceState::kReady).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(t.AddHardwareErrors(2, "mem_ecc_uncorrected", 3).ok());
  EXPECT_EQ(Slurp(n.dev(2) / "stats/hardware/mem_ecc_uncorrected"), "3\n");
  // SRAM shows the low 16 bits of the firmware count (docs/driver-interface.md#device-files).
  ASSERT_TRUE(t.AddHardwareErrors(2, "sram_ecc_uncorrected", 65535).ok());
  ASSERT_TRUE(t.AddHardwareErrors(2, "sram_ecc_uncorrected", 2).ok());
  EXPECT_EQ(Slurp(n.dev(2) / "stats/hardware/sram_ecc_uncorrected"), "1\n");
  EXPECT_EQ(t.AddHardwareErrors(2, "bogus", 1).code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(t.WritePower(0, "POWER_STATUS_VALID", 1735689600, 1234, 5678, 3456).ok());
  EXPECT_EQ(Slurp(n.dev(0) / "stats/power/utilization"),
            "POWER_STATUS_VALID,1735689600,12.34,56.78,34.56\n");
  ASSERT_TRUE(t.WritePower(0, "POWER_STATUS_VALID", 1735689660, 5, 10000, 100).ok());
  EXPECT_EQ(Slurp(n.dev(0) / "stats/power/utilization"),
            "POWER_STATUS_VALID,1735689660,0.05,100.00,1.00\n");
}

TEST(SimTreeTest, PciIdentityAndLinks) {
  Node n("trn1.32xlarge");
  // docs/hardware.md#neuronlink-topology: trn1.32xlarge device 0 is 0000:10:1c.0 on NUMA 0, CPUs
  // 0-31,64-95.
  const fs::path pci = n.root() / "sys/bus/pci/devices/0000:10:1c.0";
  EXPECT_EQ(fs::read_symlink(pci), "../../../devices/pci0000:10/0000:10:1c.0");
  EXPECT_EQ(Slurp(pci / "vendor"), "0x1d0f\n");
  EXPECT_EQ(Slurp(pci / "device"), "0x7164\n");
  EXPECT_EQ(Slurp(pci / "numa_node"), "0\n");
  EXPECT_EQ(Slurp(pci / "local_cpulist"), "0-31,64-95\n");
  EXPECT_EQ(Slurp(pci / "local_cpus"), "00000000,ffffffff,00000000,ffffffff\n");
  EXPECT_EQ(fs::read_symlink(pci / "driver"), "../../../bus/pci/drivers/neuron-driver");
  EXPECT_EQ(fs::read_symlink(pci / "subsystem"), "../../../bus/pci");
  EXPECT_THAT(Slurp(pci / "uevent"), HasSubstr("DRIVER=neuron-driver\n"));
  EXPECT_THAT(Slurp(pci / "uevent"), HasSubstr("PCI_ID=1D0F:7164\n"));
  EXPECT_THAT(Slurp(pci / "uevent"), HasSubstr("PCI_SLOT_NAME=0000:10:1c.0\n"));
  // Device 2 is 0000:a0:1c.0 on NUMA 1 (probe order, not BDF order).
  const fs::path pci2 = n.root() / "sys/bus/pci/drivers/neuron-driver/0000:a0:1c.0";
  EXPECT_EQ(Slurp(pci2 / "numa_node"), "1\n");
  EXPECT_EQ(Slurp(pci2 / "local_cpus"), "ffffffff,00000000,ffffffff,00000000\n");

  Node inf2("inf2.xlarge");
  const fs::path inf2_pci = PciDeviceSysPath(RootPaths(inf2.root()), "0000:00:1e.0");
  EXPECT_EQ(Slurp(inf2_pci / "device"), "0x7264\n");
  EXPECT_EQ(Slurp(inf2_pci / "local_cpus"), "f\n");

  // Class and dev/char links (docs/driver-interface.md#device-nodes).
  EXPECT_EQ(fs::read_symlink(n.root() / "sys/class/neuron_device/neuron3"),
            "../../devices/virtual/neuron_device/neuron3");
  EXPECT_EQ(fs::read_symlink(n.root() / "sys/dev/char/239:3"),
            "../../devices/virtual/neuron_device/neuron3");
  EXPECT_EQ(Slurp(n.root() / "sys/class/neuron_device/node_id_2"), "-1\n");
  EXPECT_EQ(Slurp(n.root() / "sys/class/neuron_device/node_id_4"), "-1\n");
  EXPECT_EQ(Slurp(n.root() / "sys/class/neuron_device/server_id_2"), "0000000000000000\n");
  EXPECT_EQ(Slurp(n.root() / "sys/class/neuron_device/server_id_4"), "0000000000000000\n");
  EXPECT_EQ(Slurp(n.root() / "sys/class/neuron_device/ultraserver_mode"), "\n");
  EXPECT_TRUE(fs::is_regular_file(n.root() / "dev/neuron15"));
}

}  // namespace
}  // namespace neuron::sim

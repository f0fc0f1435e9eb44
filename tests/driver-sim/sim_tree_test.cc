// The simulated driver's tree as a whole against docs/driver-interface.md and docs/hardware.md:
// a valid testbed, DMI and node.json, hot-plug, EFA, kmsg, its lifecycle and libudev's view of
// it. Expected values are written literally from those documents; the per-device files:
// sim_tree_device_test.cc.
#include "driver-sim/driver/sim_tree.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "core/base/unique_fd.h"
#include "core/model/catalog.h"
#include "driver-sim/driver/node_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/driver-sim/sim_tree_test_util.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using sim_tree_test::CountDeviceFiles;
using sim_tree_test::Mode;
using sim_tree_test::Node;
using sim_tree_test::Slurp;
using sim_tree_test::Spec;
using sim_tree_test::TempRoot;
using ::testing::HasSubstr;

// Every symlink is relative and lands inside ROOT/sys; every device directory has a uevent and
// a subsystem link (umockdev's testbed rules). The PCI root buses are uevent-only, as in Linux.
TEST(SimTreeTest, TreeIsAValidTestbed) {
  for (const char* type : {"trn1.32xlarge", "inf2.48xlarge"}) {
    Node n(type);
    const fs::path sys = fs::canonical(n.root() / "sys");
    int links = 0;
    for (const auto& e : fs::recursive_directory_iterator(sys)) {
      if (e.is_symlink()) {
        ++links;
        const fs::path target = fs::read_symlink(e.path());
        EXPECT_TRUE(target.is_relative()) << e.path();
        std::error_code ec;
        const fs::path resolved = fs::canonical(e.path(), ec);
        EXPECT_FALSE(ec) << e.path() << " -> " << target;
        EXPECT_EQ(resolved.string().rfind(sys.string(), 0), 0u) << e.path();
        continue;
      }
      if (e.is_directory() && fs::exists(e.path() / "uevent") &&
          !e.path().filename().string().starts_with("pci0000:")) {
        EXPECT_TRUE(fs::is_symlink(e.path() / "subsystem")) << e.path();
      }
      EXPECT_FALSE(e.path().filename().string().starts_with(".")) << "leftover " << e.path();
    }
    EXPECT_GT(links, 50) << type;
  }
}

TEST(SimTreeTest, DmiAndNodeJson) {
  Node n("trn1.32xlarge", 1, "i-0fedcba9876543210");
  const fs::path dmi = n.root() / "sys/class/dmi/id";
  EXPECT_EQ(fs::read_symlink(dmi), "../../devices/virtual/dmi/id");
  EXPECT_EQ(Slurp(dmi / "sys_vendor"), "Amazon EC2\n");
  EXPECT_EQ(Slurp(dmi / "product_name"), "trn1.32xlarge\n");
  EXPECT_EQ(Slurp(dmi / "board_asset_tag"), "i-0fedcba9876543210\n");

  absl::StatusOr<NodeInfo> info = ReadNodeInfo(RootPaths(n.root()));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->instance_type, "trn1.32xlarge");
  EXPECT_EQ(info->instance_id, "i-0fedcba9876543210");
  EXPECT_EQ(info->node_name, "sim-trn1.32xlarge");
  EXPECT_EQ(info->lnc, 1);
  ASSERT_EQ(info->device_bdf.size(), 16u);
  EXPECT_EQ(info->device_bdf[0], "0000:10:1c.0");
  EXPECT_EQ(info->device_bdf[15], "0000:a0:1b.0");

  Node small("trn1.2xlarge", 1, "");
  absl::StatusOr<NodeInfo> info2 = ReadNodeInfo(RootPaths(small.root()));
  ASSERT_TRUE(info2.ok()) << info2.status();
  EXPECT_EQ(info2->device_bdf.size(), 1u);
  EXPECT_TRUE(std::regex_match(info2->instance_id, std::regex("i-[0-9a-f]{17}")));
  EXPECT_EQ(Slurp(small.root() / "sys/class/dmi/id/board_asset_tag"), info2->instance_id + "\n");
}

TEST(SimTreeTest, UnplugAndPlug) {
  Node n("trn1.32xlarge");
  SimTree& t = n.tree();
  ASSERT_TRUE(t.ApplyCounter(t.StatusDir(3, 0, "success"), CounterOp::kInc, 9).ok());
  ASSERT_TRUE(t.RemoveDevice(3).ok());
  EXPECT_FALSE(t.DevicePresent(3));
  EXPECT_TRUE(t.DevicePresent(2));
  EXPECT_FALSE(fs::exists(n.dev(3)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(n.root() / "sys/class/neuron_device/neuron3")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(n.root() / "sys/dev/char/239:3")));
  EXPECT_FALSE(fs::exists(n.root() / "dev/neuron3"));
  // Device 3 is 0000:a0:1d.0 (docs/hardware.md#neuronlink-topology).
  EXPECT_FALSE(fs::exists(fs::symlink_status(n.root() / "sys/bus/pci/devices/0000:a0:1d.0")));
  EXPECT_FALSE(fs::exists(n.root() / "sys/devices/pci0000:a0/0000:a0:1d.0"));
  EXPECT_TRUE(fs::exists(n.root() / "sys/bus/pci/devices/0000:a0:1c.0/vendor"));
  EXPECT_EQ(t.RemoveDevice(3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(t.SetDeviceState(3, DeviceState::kReady).ok());
  EXPECT_FALSE(t.GetDeviceState(3).ok());

  ASSERT_TRUE(t.AddDevice(3).ok());
  EXPECT_TRUE(t.DevicePresent(3));
  EXPECT_EQ(Slurp(n.dev(3) / "reset"), "1\n");
  EXPECT_EQ(Slurp(n.dev(3) / "connected_devices"), "15, 2, 7, 0\n");
  EXPECT_EQ(Slurp(n.dev(3) / "neuron_core0/stats/status/success/total"), "0\n");
  EXPECT_EQ(Slurp(n.dev(3) / "neuron_core0/stats/other_info/reset_req_count/total"), "1\n");
  EXPECT_EQ(CountDeviceFiles(n.dev(3)), 238);
  EXPECT_EQ(Slurp(n.root() / "sys/class/neuron_device/neuron3/dev"), "239:3\n");
  EXPECT_EQ(Slurp(n.root() / "sys/bus/pci/devices/0000:a0:1d.0/device"), "0x7164\n");
  EXPECT_TRUE(fs::exists(n.root() / "dev/neuron3"));
  EXPECT_EQ(t.AddDevice(3).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.RemoveDevice(16).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SimTreeTest, EfaLayoutDownAndUp) {
  Node n("trn1.32xlarge");
  SimTree& t = n.tree();
  const fs::path ib_class = n.root() / "sys/class/infiniband";
  int count = 0;
  for (const auto& e : fs::directory_iterator(ib_class)) count += e.is_symlink() ? 1 : 0;
  EXPECT_EQ(count, 8);  // docs/hardware.md#efa-per-instance
  // docs/hardware.md#pcie-layout: EFA at 10:19.0 is rdmap16s25.
  const fs::path ib = ib_class / "rdmap16s25";
  EXPECT_EQ(fs::read_symlink(ib), "../../devices/pci0000:10/0000:10:19.0/infiniband/rdmap16s25");
  EXPECT_EQ(Slurp(ib / "ports/1/state"), "4: ACTIVE\n");
  EXPECT_EQ(Slurp(ib / "ports/1/phys_state"), "5: LinkUp\n");
  EXPECT_EQ(Slurp(ib / "ports/1/rate"), "100 Gb/sec (4X EDR)\n");
  EXPECT_EQ(Slurp(ib / "ports/1/hw_counters/rdma_read_bytes"), "0\n");
  EXPECT_EQ(Slurp(ib / "hw_counters/keep_alive_rcvd"), "0\n");
  EXPECT_TRUE(fs::exists(ib / "ports/1/hw_counters/lifespan"));
  EXPECT_TRUE(fs::exists(ib / "hw_counters/lifespan"));
  EXPECT_EQ(fs::read_symlink(ib / "device"), "../../");
  EXPECT_EQ(fs::read_symlink(ib / "device/driver").filename(), "efa");
  EXPECT_EQ(Slurp(ib / "device/vendor"), "0x1d0f\n");
  EXPECT_TRUE(std::regex_match(Slurp(ib / "device/device"), std::regex("0xefa[0-4]\n")));
  const fs::path uv = n.root() / "sys/class/infiniband_verbs/uverbs0";
  EXPECT_EQ(Slurp(uv / "ibdev"), "rdmap16s25\n");
  EXPECT_EQ(Slurp(uv / "dev"), "231:192\n");
  EXPECT_EQ(Slurp(uv / "abi_version"), "1\n");
  EXPECT_EQ(fs::read_symlink(uv / "device"), "../../");
  EXPECT_EQ(Slurp(n.root() / "sys/class/infiniband_verbs/uverbs7/ibdev"), "rdmap160s26\n");
  EXPECT_TRUE(fs::exists(n.root() / "dev/infiniband/uverbs7"));

  ASSERT_TRUE(t.AddEfaCounter("rdmap16s25", "tx_bytes", 100).ok());
  ASSERT_TRUE(t.AddEfaCounter("rdmap16s25", "tx_bytes", 23).ok());
  EXPECT_EQ(Slurp(ib / "ports/1/hw_counters/tx_bytes"), "123\n");
  EXPECT_EQ(t.AddEfaCounter("rdmap16s25", "bogus", 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.RemoveEfa("efa_0").code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(t.RemoveEfa("rdmap16s25").ok());
  EXPECT_FALSE(t.EfaPresent("rdmap16s25"));
  EXPECT_TRUE(t.EfaPresent("rdmap16s26"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(ib)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(uv)));
  EXPECT_FALSE(fs::exists(n.root() / "dev/infiniband/uverbs0"));
  EXPECT_FALSE(fs::exists(n.root() / "sys/devices/pci0000:10/0000:10:19.0/infiniband"
                                     "/rdmap16s25"));
  EXPECT_TRUE(fs::exists(n.root() / "sys/bus/pci/devices/0000:10:19.0/vendor"));
  EXPECT_FALSE(t.AddEfaCounter("rdmap16s25", "tx_bytes", 1).ok());

  ASSERT_TRUE(t.AddEfa("rdmap16s25").ok());
  EXPECT_EQ(Slurp(ib / "ports/1/hw_counters/tx_bytes"), "0\n");
  EXPECT_EQ(Slurp(uv / "ibdev"), "rdmap16s25\n");
  EXPECT_EQ(t.AddEfa("rdmap16s25").code(), absl::StatusCode::kFailedPrecondition);

  Node small("trn1.2xlarge");
  EXPECT_FALSE(fs::exists(small.root() / "sys/class/infiniband"));
}

TEST(SimTreeTest, KmsgRecordsAndSeqContinuity) {
  TempRoot root;
  fs::create_directories(root.path() / "dev");
  // A log that already holds records: seq continues after the last one.
  std::ofstream(root.path() / "dev/kmsg") << "6,40,100,-;old\n6,41,123,-;older\n";
  SimTree t(RootPaths(root.path()), NodeConfig{Spec("trn1.2xlarge"), 1, "", ""});
  ASSERT_TRUE(t.Create().ok());
  ASSERT_TRUE(t.AppendKmsg(3, "nrt: NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR nd-id=0 ok").ok());
  ASSERT_TRUE(t.AppendKmsg(6, "a\\b\nc").ok());
  const std::string log = Slurp(root.path() / "dev/kmsg");
  std::istringstream lines(log);
  std::string line;
  std::vector<std::string> recs;
  while (std::getline(lines, line)) recs.push_back(line);
  ASSERT_EQ(recs.size(), 4u);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(recs[2], m, std::regex(R"(3,42,(\d+),-;(.*))")));
  EXPECT_EQ(m[2], "nrt: NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR nd-id=0 ok");
  const uint64_t usec1 = std::stoull(m[1]);
  ASSERT_TRUE(std::regex_match(recs[3], m, std::regex(R"(6,43,(\d+),-;(.*))")));
  EXPECT_EQ(m[2], "a\\x5cb\\x0ac");
  EXPECT_GE(std::stoull(m[1]), usec1);
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  EXPECT_LE(std::stoull(m[1]), static_cast<uint64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000);

  // A second writer on the same root (a runtime process, a restarted daemon) continues too.
  SimTree other(RootPaths(root.path()), NodeConfig{Spec("trn1.2xlarge"), 1, "", ""});
  ASSERT_TRUE(other.AppendKmsg(6, "x").ok());
  EXPECT_THAT(Slurp(root.path() / "dev/kmsg"), HasSubstr("\n6,44,"));
}

TEST(SimTreeTest, KmsgStartsEmptyAndConcurrentWritersNeverRepeatASeq) {
  Node n("trn1.2xlarge");
  EXPECT_EQ(Slurp(n.root() / "dev/kmsg"), "");
  const fs::path kmsg = n.root() / "dev/kmsg";
  auto writer = [&] {
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(AppendKmsgRecord(kmsg, 6, "tick").ok());
  };
  std::thread a(writer), b(writer);
  a.join();
  b.join();
  std::istringstream lines(Slurp(kmsg));
  std::string line;
  std::vector<uint64_t> seqs;
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, std::regex(R"(6,(\d+),\d+,-;tick)"))) << line;
    seqs.push_back(std::stoull(m[1]));
  }
  ASSERT_EQ(seqs.size(), 100u);
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i);
}

TEST(SimTreeTest, CreateTwiceFailsAndDestroyLeavesNothing) {
  TempRoot root;
  SimTree t(RootPaths(root.path()), NodeConfig{Spec("trn1.32xlarge"), 1, "", ""});
  ASSERT_TRUE(t.Create().ok());
  EXPECT_EQ(t.Create().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(t.RemoveDevice(2).ok());
  ASSERT_TRUE(t.RemoveEfa("rdmap32s26").ok());
  ASSERT_TRUE(t.AppendKmsg(6, "hello").ok());
  ASSERT_TRUE(t.Destroy().ok());
  EXPECT_TRUE(fs::is_empty(root.path())) << fs::directory_iterator(root.path())->path();
  // And it can be created again, whole.
  ASSERT_TRUE(t.Create().ok());
  EXPECT_TRUE(t.DevicePresent(2));
  EXPECT_TRUE(fs::exists(root.path() / "sys/class/infiniband/rdmap32s26"));
  ASSERT_TRUE(t.Destroy().ok());
  EXPECT_TRUE(fs::is_empty(root.path()));
}

TEST(SimTreeTest, TwoRootsAreIndependent) {
  Node a("inf2.24xlarge", 1, "i-0aaaaaaaaaaaaaaaa");
  Node b("inf2.24xlarge", 1, "i-0bbbbbbbbbbbbbbbb");
  ASSERT_TRUE(a.tree().RemoveDevice(5).ok());
  ASSERT_TRUE(a.tree().AppendKmsg(6, "only in a").ok());
  EXPECT_FALSE(fs::exists(a.dev(5)));
  EXPECT_TRUE(fs::exists(b.dev(5)));
  EXPECT_TRUE(b.tree().DevicePresent(5));
  EXPECT_EQ(Slurp(b.root() / "dev/kmsg"), "");
  EXPECT_NE(Slurp(a.dev(0) / "info/serial_number"), Slurp(b.dev(0) / "info/serial_number"));
  // Serials are stable for an instance id.
  Node a2("inf2.24xlarge", 1, "i-0aaaaaaaaaaaaaaaa");
  EXPECT_EQ(Slurp(a.dev(0) / "info/serial_number"), Slurp(a2.dev(0) / "info/serial_number"));
}

TEST(SimTreeTest, WriteFileAtomicReplacesWholeAndSetsMode) {
  TempRoot root;
  const fs::path f = root.path() / "a/b/c";
  ASSERT_TRUE(WriteFileAtomic(f, "one\n").ok());
  EXPECT_EQ(Slurp(f), "one\n");
  EXPECT_EQ(Mode(f), 0644);
  EXPECT_EQ(Mode(root.path() / "a/b"), 0755);
  ASSERT_TRUE(WriteFileAtomic(f, "two", 0400).ok());
  EXPECT_EQ(Slurp(f), "two");
  EXPECT_EQ(Mode(f), 0400);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(root.path() / "a/b")) ++entries;
  EXPECT_EQ(entries, 1);  // no temporary left behind
}

// ---- libudev under umockdev sees the tree (docs/architecture.md#discovery) ----

struct HelperRun {
  int exit_code = -1;
  std::string out;
};

HelperRun RunUdevHelper(const fs::path& root, const std::vector<std::string>& args) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    if (kv.starts_with("LD_PRELOAD=") || kv.starts_with("UMOCKDEV_DIR=") ||
        kv.starts_with("ASAN_OPTIONS=")) {
      continue;
    }
    env_strings.emplace_back(kv);
  }
  env_strings.push_back("LD_PRELOAD=libumockdev-preload.so.0");
  env_strings.push_back("UMOCKDEV_DIR=" + root.string());
  // The helper is plain C and unsanitized; these only matter if a sanitizer is injected anyway.
  env_strings.push_back("ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0");
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = {NEURON_UDEV_HELPER};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  int pipefd[2];
  HelperRun run;
  if (::pipe(pipefd) != 0) return run;
  const UniqueFd read_end(pipefd[0]);
  UniqueFd write_end(pipefd[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, read_end.get());
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  write_end.Reset();  // ours closed, the read below ends when the helper exits
  if (rc != 0) return run;
  char buf[4096];
  for (ssize_t n; (n = ::read(read_end.get(), buf, sizeof(buf))) > 0;) run.out.append(buf, n);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SimTreeUmockdevTest, LibudevEnumeratesTheSimulatedNode) {
  Node n("trn1.32xlarge");
  const HelperRun neuron =
      RunUdevHelper(n.root(), {"neuron_device", "core_count", "connected_devices"});
  ASSERT_EQ(neuron.exit_code, 0) << neuron.out;
  const std::vector<std::string> devs = Lines(neuron.out);
  ASSERT_EQ(devs.size(), 16u) << neuron.out;
  EXPECT_THAT(devs,
              ::testing::Contains("neuron0 subsystem=neuron_device devnode=/dev/neuron0 driver=- "
                                  "pci_parent=- core_count=2 connected_devices=12, 3, 4, 1"));
  EXPECT_THAT(devs,
              ::testing::Contains("neuron15 subsystem=neuron_device devnode=/dev/neuron15 driver=- "
                                  "pci_parent=- core_count=2 connected_devices=11, 14, 3, 12"));

  const HelperRun ib = RunUdevHelper(n.root(), {"infiniband", "ports/1/state"});
  ASSERT_EQ(ib.exit_code, 0) << ib.out;
  const std::vector<std::string> ibs = Lines(ib.out);
  ASSERT_EQ(ibs.size(), 8u) << ib.out;
  EXPECT_THAT(ibs, ::testing::Contains("rdmap16s25 subsystem=infiniband devnode=- driver=- "
                                       "pci_parent=0000:10:19.0 ports/1/state=4: ACTIVE"));

  const HelperRun pci = RunUdevHelper(n.root(), {"pci", "vendor", "device"});
  ASSERT_EQ(pci.exit_code, 0) << pci.out;
  const std::vector<std::string> pcis = Lines(pci.out);
  EXPECT_EQ(pcis.size(), 24u) << pci.out;  // 16 Neuron devices + 8 EFA
  EXPECT_THAT(pcis, ::testing::Contains("0000:10:1c.0 subsystem=pci devnode=- driver=neuron-driver "
                                        "pci_parent=- vendor=0x1d0f device=0x7164"));

  const HelperRun uverbs = RunUdevHelper(n.root(), {"infiniband_verbs", "ibdev"});
  ASSERT_EQ(uverbs.exit_code, 0) << uverbs.out;
  EXPECT_THAT(Lines(uverbs.out), ::testing::Contains("uverbs0 subsystem=infiniband_verbs "
                                                     "devnode=/dev/infiniband/uverbs0 driver=- "
                                                     "pci_parent=0000:10:19.0 ibdev=rdmap16s25"));

  // An unplugged device is gone for libudev too.
  ASSERT_TRUE(n.tree().RemoveDevice(0).ok());
  const HelperRun after = RunUdevHelper(n.root(), {"neuron_device"});
  ASSERT_EQ(after.exit_code, 0);
  EXPECT_EQ(Lines(after.out).size(), 15u);
}

}  // namespace
}  // namespace neuron::sim

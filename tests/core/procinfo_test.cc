// core/procinfo, core/pod_identity and core/presence: the process and device facts the tools
// read through core. Expected values are written from proc(5) and the cgroup layouts kubelet's
// cgroup drivers create, not recomputed by the code under test.

#include "core/proc/procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/discovery/inventory.h"
#include "core/discovery/presence.h"
#include "core/proc/pod_identity.h"
#include "tests/support/fake_proc.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::neuron::testing::AddFakeProcess;
using ::neuron::testing::MakeSimTree;
using ::neuron::testing::WriteProcStat;
using ::testing::HasSubstr;

TEST(ProcStatTest, SystemCpuTimes) {
  const auto t = ParseSystemCpuTimes(
      "cpu  4705 356 584 3699 23 7 23 5 0 0\n"
      "cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0\n"
      "cpu1 1 2 3 4 5 6 7 8 9 10\n"
      "intr 1462898\nctxt 115315133\n",
      "stat");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->user, 4705u);
  EXPECT_EQ(t->nice, 356u);
  EXPECT_EQ(t->system, 584u);
  EXPECT_EQ(t->idle, 3699u);
  EXPECT_EQ(t->iowait, 23u);
  EXPECT_EQ(t->irq, 7u);
  EXPECT_EQ(t->softirq, 23u);
  EXPECT_EQ(t->steal, 5u);
  EXPECT_EQ(t->cpus, 2);
  EXPECT_EQ(t->UserTicks(), 4705u + 356u);
  EXPECT_EQ(t->SystemTicks(), 584u + 7u + 23u);
  EXPECT_EQ(t->TotalTicks(), 4705u + 356u + 584u + 3699u + 23u + 7u + 23u + 5u);
}

TEST(ProcStatTest, MalformedSystemCpuTimesNameTheFile) {
  const auto t = ParseSystemCpuTimes("cpu  12 x 3 4\n", "/host/proc/stat");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/host/proc/stat"));
  EXPECT_FALSE(ParseSystemCpuTimes("intr 5\n", "stat").ok());
}

// comm may contain spaces and ')' (proc(5): "the filename of the executable, in parentheses").
TEST(ProcStatTest, ProcessStatWithAwkwardComm) {
  const auto s = ParseProcessStat(
      "4711 (py thon) (x)) R 1 4711 4711 0 -1 4194304 100 0 0 0 250 75 7 3 20 0 8 0 98765 "
      "123456789 4242 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
      "stat");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pid, 4711);
  EXPECT_EQ(s->comm, "py thon) (x)");
  EXPECT_EQ(s->state, 'R');
  EXPECT_EQ(s->ppid, 1);
  EXPECT_EQ(s->utime, 250u);
  EXPECT_EQ(s->stime, 75u);
  EXPECT_EQ(s->cutime, 7u);
  EXPECT_EQ(s->cstime, 3u);
  EXPECT_EQ(s->start_time, 98765u);
  EXPECT_EQ(s->rss_pages, 4242);
  EXPECT_FALSE(ParseProcessStat("4711 (x) R 1 2 3", "stat").ok());
}

TEST(ProcStatTest, CommandLine) {
  EXPECT_EQ(FormatCommandLine(std::string("python3\0train.py\0--tp\0008\0", 23)),
            "python3 train.py --tp 8");
  EXPECT_EQ(FormatCommandLine(""), "");
}

dev_t NumberOf(const char* path) {
  struct stat st {};
  EXPECT_EQ(::stat(path, &st), 0) << path;
  return st.st_rdev;
}

TEST(ProcReaderTest, ReadsRootProcWhenPresent) {
  ::neuron::testing::TempDir root("procinfo");
  // Stand-ins for device nodes: character devices every Linux host has. Holders are found by
  // the number the fd/ link leads to, whatever the link's path says.
  const fs::path alias = root.path() / "container-dev-neuron0";
  fs::create_symlink("/dev/zero", alias);
  AddFakeProcess(root.path(),
                 {4711, {"python3", "train.py"}, {"/dev/zero", "/dev/full"}, "0::/\n", 30, 5});
  AddFakeProcess(root.path(), {4712, {"neuron-monitor"}, {alias.string(), "/dev/random"}});
  AddFakeProcess(root.path(), {4713, {}, {}});  // kernel thread: empty cmdline
  AddFakeProcess(root.path(), {4714, {"gone"}, {"/dev/neuron0", "pipe:[1234]"}});
  WriteProcStat(root.path(), 100, 50, 850, 4);
  const ProcReader proc{RootPaths(root.path())};
  EXPECT_TRUE(proc.uses_root_proc());
  EXPECT_EQ(*proc.CommandLine(4711), "python3 train.py");
  EXPECT_EQ(*proc.CommandLine(4713), "[x]");
  EXPECT_EQ(proc.Stat(4711)->utime, 30u);
  EXPECT_EQ(proc.SystemCpu()->cpus, 4);
  EXPECT_TRUE(absl::IsNotFound(proc.CommandLine(9999).status()));
  const dev_t zero = NumberOf("/dev/zero");
  const dev_t random = NumberOf("/dev/random");
  const dev_t null = NumberOf("/dev/null");
  const ProcReader::DeviceHolders held = proc.HoldersOf({zero, random, null});
  EXPECT_EQ(held.pids.at(zero), (std::vector<int>{4711, 4712}));
  EXPECT_EQ(held.pids.at(random), (std::vector<int>{4712}));
  EXPECT_EQ(held.pids.count(null), 0u);
  EXPECT_EQ(held.processes, 4);
  EXPECT_EQ(held.descriptors, 6);
  EXPECT_EQ(held.problems.processes, 0);
  EXPECT_TRUE(proc.HoldersOf({}).pids.empty());
}

// The real /proc: this process is found holding what it opened for reading, and not what it
// opened write-only (the driver's free-access mode attaches nothing), and it knows its own PID.
TEST(ProcReaderTest, HoldersOfLiveProcessesByNumber) {
  const ProcReader proc = ProcReader::AtDirectory("/proc");
  EXPECT_EQ(proc.SelfPid(), ::getpid());
  const int read_fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  const int write_fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(read_fd, 0);
  ASSERT_GE(write_fd, 0);
  const dev_t zero = NumberOf("/dev/zero");
  const dev_t full = NumberOf("/dev/full");
  const ProcReader::DeviceHolders held = proc.HoldersOf({zero, full});
  ::close(read_fd);
  ::close(write_fd);
  ASSERT_TRUE(held.pids.contains(zero));
  EXPECT_THAT(held.pids.at(zero), ::testing::Contains(::getpid()));
  if (held.pids.contains(full)) {
    EXPECT_THAT(held.pids.at(full), ::testing::Not(::testing::Contains(::getpid())));
  }
  EXPECT_GT(held.processes, 0);
  EXPECT_GT(held.descriptors, 2);
}

TEST(ProcReaderTest, DeviceNumbers) {
  EXPECT_EQ(*ParseDeviceNumber("239:3\n", "dev"), makedev(239, 3));
  EXPECT_EQ(*ParseDeviceNumber("511:1048575", "dev"), makedev(511, 1048575));
  for (const char* bad : {"", "239", ":3", "239:", "a:b", "239:3:1", "-1:3"}) {
    EXPECT_FALSE(ParseDeviceNumber(bad, "neuron0/dev").ok()) << bad;
  }
  EXPECT_THAT(ParseDeviceNumber("x", "neuron0/dev").status().message(), HasSubstr("neuron0/dev"));
}

// Without ROOT/proc the tools see this machine's processes (the simulator's neighbours).
TEST(ProcReaderTest, FallsBackToOwnProc) {
  ::neuron::testing::TempDir root("procinfo_none");
  const ProcReader proc{RootPaths(root.path())};
  EXPECT_FALSE(proc.uses_root_proc());
  EXPECT_EQ(proc.proc_dir(), "/proc");
  const auto me = proc.CommandLine(::getpid());
  ASSERT_TRUE(me.ok()) << me.status();
  // This test program's own command line (glibc's name of it, whichever program holds the test).
  EXPECT_THAT(*me, HasSubstr(program_invocation_short_name));
  EXPECT_EQ(proc.Stat(::getpid())->pid, ::getpid());
}

TEST(PodIdentityTest, SystemdDriverCgroupV1) {
  const auto id = ParsePodFromCgroup(
      "12:pids:/kubepods.slice/kubepods-burstable.slice/"
      "kubepods-burstable-pod6b3b7a1c_2f4e_4d5a_9c1b_0a1b2c3d4e5f.slice/"
      "cri-containerd-7f3e8d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e.scope\n"
      "1:name=systemd:/kubepods.slice\n");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->uid, "6b3b7a1c-2f4e-4d5a-9c1b-0a1b2c3d4e5f");
  EXPECT_EQ(id->qos, "burstable");
  EXPECT_EQ(id->container_id, "7f3e8d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e");
  EXPECT_FALSE(id->name.has_value());
}

TEST(PodIdentityTest, CgroupfsDriverAndCgroupV2Guaranteed) {
  const auto v1 = ParsePodFromCgroup(
      "4:devices:/kubepods/besteffort/pod0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d/"
      "8d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a\n");
  ASSERT_TRUE(v1.has_value());
  EXPECT_EQ(v1->uid, "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d");
  EXPECT_EQ(v1->qos, "besteffort");
  EXPECT_EQ(v1->container_id, "8d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a");
  const auto v2 = ParsePodFromCgroup(
      "0::/kubepods.slice/kubepods-pod11112222_3333_4444_5555_666677778888.slice/"
      "crio-abcdef012345.scope\n");
  ASSERT_TRUE(v2.has_value());
  EXPECT_EQ(v2->uid, "11112222-3333-4444-5555-666677778888");
  EXPECT_EQ(v2->qos, "guaranteed");
  EXPECT_EQ(v2->container_id, "abcdef012345");
}

TEST(PodIdentityTest, NotAPod) {
  EXPECT_FALSE(ParsePodFromCgroup("0::/user.slice/user-0.slice/session-3.scope\n").has_value());
  EXPECT_FALSE(ParsePodFromCgroup("0::/system.slice/docker-abc.scope\n").has_value());
  EXPECT_FALSE(ParsePodFromCgroup("0::/kubepods.slice/podnot-a-uid.slice\n").has_value());
  EXPECT_FALSE(ParsePodFromCgroup("").has_value());
}

TEST(PodIdentityTest, CgroupLocatorReadsRootProc) {
  ::neuron::testing::TempDir root("pods");
  AddFakeProcess(root.path(),
                 {4711,
                  {"python3"},
                  {},
                  "0::/kubepods.slice/kubepods-besteffort.slice/"
                  "kubepods-besteffort-poda1b2c3d4_0000_1111_2222_333344445555.slice/x\n"});
  AddFakeProcess(root.path(), {4712, {"sshd"}, {}, "0::/system.slice/ssh.service\n"});
  auto locator = MakeCgroupPodLocator(ProcReader(RootPaths(root.path())));
  const auto pod = locator->Locate({4711, {0}, {0, 1}});
  ASSERT_TRUE(pod.ok()) << pod.status();
  ASSERT_TRUE(pod->has_value());
  EXPECT_EQ((*pod)->uid, "a1b2c3d4-0000-1111-2222-333344445555");
  const auto host = locator->Locate({4712, {}, {}});
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE(host->has_value());
  EXPECT_FALSE(locator->Locate({9999, {}, {}}).ok());  // gone: cannot tell
}

// A PodResources-like locator (names) in front of the cgroup one (UID): the answers merge.
class FixedLocator : public PodLocator {
 public:
  explicit FixedLocator(absl::StatusOr<std::optional<PodIdentity>> answer)
      : answer_(std::move(answer)) {}
  absl::StatusOr<std::optional<PodIdentity>> Locate(const ProcessRef&) override { return answer_; }
  std::string_view name() const override { return "fixed"; }

 private:
  absl::StatusOr<std::optional<PodIdentity>> answer_;
};

TEST(PodIdentityTest, ChainedLocatorMergesAndToleratesFailures) {
  PodIdentity named;
  named.name = "llama-worker-0";
  named.namespace_name = "training";
  PodIdentity from_cgroup;
  from_cgroup.uid = "a1b2c3d4-0000-1111-2222-333344445555";
  from_cgroup.qos = "guaranteed";
  std::vector<std::unique_ptr<PodLocator>> chain;
  chain.push_back(std::make_unique<FixedLocator>(absl::UnavailableError("kubelet away")));
  chain.push_back(std::make_unique<FixedLocator>(std::optional<PodIdentity>(named)));
  chain.push_back(std::make_unique<FixedLocator>(std::optional<PodIdentity>(from_cgroup)));
  auto merged = MakeChainedPodLocator(std::move(chain))->Locate({1, {}, {}});
  ASSERT_TRUE(merged.ok());
  ASSERT_TRUE(merged->has_value());
  EXPECT_EQ((*merged)->name, "llama-worker-0");
  EXPECT_EQ((*merged)->namespace_name, "training");
  EXPECT_EQ((*merged)->uid, "a1b2c3d4-0000-1111-2222-333344445555");

  std::vector<std::unique_ptr<PodLocator>> failing;
  failing.push_back(std::make_unique<FixedLocator>(absl::UnavailableError("kubelet away")));
  EXPECT_FALSE(MakeChainedPodLocator(std::move(failing))->Locate({1, {}, {}}).ok());
}

TEST(PresenceTest, NamesEachMissingPiece) {
  ::neuron::testing::TempDir root("presence");
  const RootPaths paths(root.path());
  const PresenceCheck no_driver = CheckPresence(paths, Inventory{});
  EXPECT_EQ(no_driver.presence, DevicePresence::kNoDriver);
  EXPECT_THAT(no_driver.message, HasSubstr("sys/class/neuron_device does not exist"));

  std::filesystem::create_directories(paths.NeuronClassDir());
  EXPECT_EQ(CheckPresence(paths, Inventory{}).presence, DevicePresence::kNoDevices);

  std::filesystem::remove_all(root.path() / "sys");
  auto tree = MakeSimTree(root.path(), "inf2.24xlarge");
  auto inv = MakeDirectoryDiscovery(paths, {})->Scan();
  ASSERT_TRUE(inv.ok());
  PresenceCheck ok = CheckPresence(paths, *inv);
  EXPECT_EQ(ok.presence, DevicePresence::kPresent);
  EXPECT_TRUE(ok.missing_device_nodes.empty());
  std::filesystem::remove(paths.DevNeuron(2));
  std::filesystem::remove(paths.DevNeuron(3));
  ok = CheckPresence(paths, *inv);
  EXPECT_EQ(ok.presence, DevicePresence::kPresent);
  EXPECT_EQ(ok.missing_device_nodes, (std::vector<int>{2, 3}));
  EXPECT_THAT(ok.missing_nodes_message, HasSubstr("neuron2-3"));
  EXPECT_EQ(PresenceExitCode(DevicePresence::kPresent), 0);
  EXPECT_EQ(PresenceExitCode(DevicePresence::kNoDriver), 3);
  EXPECT_EQ(PresenceExitCode(DevicePresence::kNoDevices), 4);
  EXPECT_EQ(PresenceExitCode(DevicePresence::kPermissionDenied), 5);
}

// The catalog stands in only for files that exist but cannot be read (a normal user's view of
// the root-only attributes; live_test.cc drops privileges to see it). A file that was read, or
// is absent, is left as discovery found it, with no note.
TEST(PresenceTest, CatalogStandsInOnlyForUnreadableFiles) {
  ::neuron::testing::TempDir root("presence_catalog");
  const RootPaths paths(root.path());
  auto tree = MakeSimTree(root.path(), "trn1.32xlarge");
  std::filesystem::remove(paths.NeuronClassDir() / "neuron1" / "core_count");
  absl::StatusOr<Inventory> inv = MakeDirectoryDiscovery(paths, {})->Scan();
  ASSERT_TRUE(inv.ok());
  const Inventory before = *inv;
  EXPECT_TRUE(FillUnreadableFromCatalog(paths, &*inv).empty());
  EXPECT_EQ(*inv, before);
  EXPECT_EQ(inv->devices[0].physical_cores, 2);
  EXPECT_EQ(inv->devices[1].physical_cores, 0);
}

}  // namespace
}  // namespace neuron

// ProcReader and the cgroup pod locator on the procfs of a fixture tree (tests/fixtures/driver/
// proc.manifest, included by trn1.2xlarge.manifest): the procfs names of
// core/driver/sysfs_files.h must find the manifest's files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>

#include "core/proc/pod_identity.h"
#include "core/proc/procinfo.h"
#include "tests/support/fixture_tree.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

constexpr int kPid = 4242;  // proc.manifest's runtime process

class FixtureProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status s =
        testing::BuildFixtureTree(testing::DriverFixture("trn1.2xlarge.manifest"), tmp_.path());
    ASSERT_TRUE(s.ok()) << s;
  }
  ProcReader Reader() const { return ProcReader(RootPaths(tmp_.path())); }

  testing::TempDir tmp_;
};

TEST_F(FixtureProcTest, ReadsTheRootsProc) {
  const ProcReader proc = Reader();
  EXPECT_EQ(proc.proc_dir(), RootPaths(tmp_.path()).Proc());
  EXPECT_TRUE(proc.uses_root_proc());
}

TEST_F(FixtureProcTest, SystemCpuTimes) {
  absl::StatusOr<SystemCpuTimes> t = Reader().SystemCpu();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cpus, 8);
  EXPECT_EQ(t->user, 2255u);
  EXPECT_EQ(t->system, 2290u);
  EXPECT_EQ(t->idle, 22624563u);
  EXPECT_EQ(t->softirq, 456u);
}

TEST_F(FixtureProcTest, ProcessStatCommandLineAndOpenDevices) {
  const ProcReader proc = Reader();
  absl::StatusOr<ProcessStat> st = proc.Stat(kPid);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->pid, kPid);
  EXPECT_EQ(st->comm, "python3");
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->utime, 73512u);
  EXPECT_EQ(st->stime, 4211u);
  EXPECT_EQ(st->start_time, 1183425u);
  EXPECT_EQ(st->rss_pages, 1524608);

  absl::StatusOr<std::string> cmd = proc.CommandLine(kPid);
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  EXPECT_EQ(*cmd, "python3 train.py --model llama");

  // Holders are found by the device number their fd/ links lead to: the manifest's fd/0 is
  // /dev/null, which exists here too (its fd/5, /dev/neuron0, does not).
  struct stat null_dev {};
  ASSERT_EQ(::stat("/dev/null", &null_dev), 0);
  const ProcReader::DeviceHolders held = proc.HoldersOf({null_dev.st_rdev});
  ASSERT_TRUE(held.pids.contains(null_dev.st_rdev));
  EXPECT_THAT(held.pids.at(null_dev.st_rdev), ElementsAre(kPid));
  EXPECT_EQ(held.processes, 1);
  EXPECT_EQ(held.descriptors, 3);
  EXPECT_EQ(held.problems.processes, 0);
}

// The number a scan looks for is the class device's `dev` ("{neuron_major}:{d}" in
// neuron_device.manifest), not a number of ours.
TEST_F(FixtureProcTest, DeviceNumberFromTheClassDevice) {
  const absl::StatusOr<dev_t> number = NeuronDeviceNumber(RootPaths(tmp_.path()), 0);
  ASSERT_TRUE(number.ok()) << number.status();
  EXPECT_EQ(minor(*number), 0u);
  EXPECT_GT(major(*number), 0u);
  EXPECT_TRUE(absl::IsNotFound(NeuronDeviceNumber(RootPaths(tmp_.path()), 7).status()));
}

TEST_F(FixtureProcTest, PodFromTheProcessCgroup) {
  std::unique_ptr<PodLocator> locator = MakeCgroupPodLocator(Reader());
  absl::StatusOr<std::optional<PodIdentity>> pod = locator->Locate(ProcessRef{kPid, {0}, {0}});
  ASSERT_TRUE(pod.ok()) << pod.status();
  ASSERT_TRUE(pod->has_value());
  EXPECT_EQ((*pod)->uid, "0f6b2a44-5e3c-4d1a-9b7e-1c2d3e4f5a6b");
  EXPECT_THAT((*pod)->qos, Optional(std::string("besteffort")));
  EXPECT_THAT(
      (*pod)->container_id,
      Optional(std::string("4f1c2b3a5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f701")));
}

}  // namespace
}  // namespace neuron

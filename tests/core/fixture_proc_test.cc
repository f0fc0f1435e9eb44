// ProcReader and the cgroup pod locator on the procfs of a fixture tree (tests/fixtures/driver/
// proc.manifest, included by trn1.2xlarge.manifest): the procfs names of
// core/driver/sysfs_files.h must find the manifest's files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

  // The kernel prints the host's path of the device node the process opened.
  const std::filesystem::path node = RootPaths("/").DevNeuron(0);
  const auto open = proc.PidsWithOpen({node});
  ASSERT_TRUE(open.contains(node));
  EXPECT_THAT(open.at(node), ElementsAre(kPid));
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

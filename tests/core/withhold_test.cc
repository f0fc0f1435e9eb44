// The withhold lock (core/node/withhold.h): exclusive against everyone, shared against exclusive
// only, released when its holder goes, and IsWithheld asks without disturbing a shared holder.
#include "core/node/withhold.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using ::neuron::testing::TempDir;

// The plugin's one listing per poll: the devices whose lock file exists, and nothing else there.
TEST(WithholdTest, DevicesWithLockFilesAreTheLockFilesListed) {
  TempDir root;
  EXPECT_TRUE(DevicesWithLockFiles(root.str()).empty()) << "no directory yet";
  ASSERT_TRUE(WithholdLock::Take(root.str(), 3, WithholdLock::Mode::kShared).ok());
  ASSERT_TRUE(WithholdLock::Take(root.str(), 12, WithholdLock::Mode::kExclusive).ok());
  const std::filesystem::path dir =
      std::filesystem::path(WithholdLockPath(root.str(), 3)).parent_path();
  for (const char* stray : {"neuronx.lock", "neuron03.lock", "neuron4.lock.tmp"}) {
    std::ofstream(dir / stray) << "";
  }
  EXPECT_EQ(DevicesWithLockFiles(root.str()), (std::set<int>{3, 12}));
}

TEST(WithholdTest, AnExclusiveHoldWithholdsAndItsReleaseReturnsTheDevice) {
  TempDir root;
  ASSERT_FALSE(*IsWithheld(root.str(), 3));  // no file yet
  {
    absl::StatusOr<WithholdLock> lock =
        WithholdLock::Take(root.str(), 3, WithholdLock::Mode::kExclusive);
    ASSERT_TRUE(lock.ok()) << lock.status();
    EXPECT_TRUE(*IsWithheld(root.str(), 3));
    EXPECT_FALSE(*IsWithheld(root.str(), 2));
    absl::StatusOr<WithholdLock> second =
        WithholdLock::Take(root.str(), 3, WithholdLock::Mode::kShared);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("neuron3 is withheld"), std::string::npos);
  }
  EXPECT_FALSE(*IsWithheld(root.str(), 3));
  EXPECT_TRUE(std::filesystem::exists(WithholdLockPath(root.str(), 3)));
}

TEST(WithholdTest, SharedHoldsCoexistAndKeepTheExclusiveOneOut) {
  TempDir root;
  absl::StatusOr<WithholdLock> a = WithholdLock::Take(root.str(), 0, WithholdLock::Mode::kShared);
  absl::StatusOr<WithholdLock> b = WithholdLock::Take(root.str(), 0, WithholdLock::Mode::kShared);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(*IsWithheld(root.str(), 0));  // asking does not count a shared hold
  EXPECT_FALSE(WithholdLock::Take(root.str(), 0, WithholdLock::Mode::kExclusive).ok());
}

TEST(WithholdTest, AHolderThatDiesReleasesTheDevice) {
  TempDir root;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    auto lock = WithholdLock::Take(root.str(), 1, WithholdLock::Mode::kExclusive);
    const char c = lock.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();  // killed below, holding the lock
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_TRUE(*IsWithheld(root.str(), 1));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(*IsWithheld(root.str(), 1));
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(WithholdTest, AnAllocationHoldsEveryDeviceOrIsRefusedByTheFirstWithheld) {
  TempDir root;
  absl::StatusOr<AllocationHolds> held = HoldForAllocation(root.str(), {0, 1});
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->locks.size(), 2u);
  EXPECT_FALSE(WithholdLock::Take(root.str(), 1, WithholdLock::Mode::kExclusive).ok())
      << "a check waits for the allocation";
  held->locks.clear();
  absl::StatusOr<WithholdLock> check =
      WithholdLock::Take(root.str(), 1, WithholdLock::Mode::kExclusive);
  ASSERT_TRUE(check.ok());
  const absl::StatusOr<AllocationHolds> refused = HoldForAllocation(root.str(), {0, 1});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "neuron1 is withheld by another holder (" + WithholdLockPath(root.str(), 1) + ")");
}

TEST(WithholdTest, WithoutAWritableDirectoryNothingIsWithheldOrRefused) {
  TempDir root;
  // ROOT/run is a file: the lock directory cannot be made, as under a read-only mount.
  std::filesystem::create_directories(root.path());
  { std::ofstream(root.path() / "run") << "not a directory"; }
  const absl::StatusOr<AllocationHolds> held = HoldForAllocation(root.str(), {3});
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(held->locks.empty());
  EXPECT_NE(held->unusable.find("cannot make"), std::string::npos) << held->unusable;
  EXPECT_FALSE(*IsWithheld(root.str(), 3));
}

}  // namespace
}  // namespace neuron

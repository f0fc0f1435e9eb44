// The withhold lock (core/node/withhold.h): exclusive against everyone, shared against exclusive
// only, released when its holder goes, and IsWithheld asks without disturbing a shared holder.
#include "core/node/withhold.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using ::neuron::testing::TempDir;

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

}  // namespace
}  // namespace neuron

// UniqueFd closes exactly once, whatever path the owner leaves by.

#include "core/base/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <utility>

namespace neuron {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFdTest, ClosesWhenItGoesAndNotBefore) {
  int raw = -1;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, MoveTransfersOwnershipAndResetClosesTheOldOne) {
  UniqueFd a(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int first = a.get();
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(b.get(), first);
  b.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  // The kernel may hand the freed number straight back; otherwise it must be closed.
  if (b.get() != first) {
    EXPECT_FALSE(IsOpen(first));
  }
  UniqueFd c;
  c = std::move(b);
  EXPECT_TRUE(c.valid());
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move)
}

TEST(UniqueFdTest, ReleaseGivesUpOwnership) {
  int raw = -1;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    raw = fd.Release();
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_TRUE(IsOpen(raw));
  UniqueFd again(raw);
}

}  // namespace
}  // namespace neuron

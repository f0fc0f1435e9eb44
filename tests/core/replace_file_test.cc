// ReplaceFile: a reader sees the old content or the new, never a part; failures name the file
// and leave the old content and no temporary behind.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "core/base/file_io.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using neuron::testing::ReadFile;

TEST(ReplaceFileTest, AReaderSeesTheOldOrTheNewWhole) {
  neuron::testing::TempDir dir;
  const std::filesystem::path file = dir.path() / "info.json";
  const std::string a(size_t{64} * 1024, 'a');
  const std::string b(size_t{96} * 1024, 'b');
  ASSERT_TRUE(ReplaceFile(file, a).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) EXPECT_TRUE(ReplaceFile(file, i % 2 == 0 ? b : a).ok());
    done = true;
  });
  int torn = 0;
  while (!done) {
    const std::string seen = ReadFile(file);
    if (seen != a && seen != b) ++torn;
  }
  writer.join();
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(ReadFile(file), a);
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));
}

TEST(ReplaceFileTest, AFailureNamesTheFileAndKeepsTheOldContent) {
  neuron::testing::TempDir dir;
  absl::Status missing = ReplaceFile(dir.path() / "no" / "such" / "file", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_NE(missing.message().find("no/such/file.tmp"), std::string::npos) << missing;

  // A directory where the file goes: the rename fails, the temporary goes with it.
  const std::filesystem::path taken = dir.path() / "taken";
  std::filesystem::create_directories(taken / "inside");
  absl::Status over_dir = ReplaceFile(taken, "x");
  EXPECT_FALSE(over_dir.ok());
  EXPECT_NE(over_dir.message().find(taken.string()), std::string::npos) << over_dir;
  EXPECT_TRUE(std::filesystem::is_directory(taken / "inside"));
  EXPECT_FALSE(std::filesystem::exists(taken.string() + ".tmp"));
}

}  // namespace
}  // namespace neuron

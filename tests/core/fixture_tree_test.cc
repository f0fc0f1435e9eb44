// The manifest language of tests/support/fixture_tree.h: expansion, exact contents, modes,
// links, and an error naming the file and line for each kind of bad line.

#include "tests/support/fixture_tree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace neuron::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Paths(const std::vector<FixtureEntry>& entries) {
  std::vector<std::string> out;
  for (const FixtureEntry& e : entries) out.push_back(e.path);
  return out;
}

absl::StatusOr<std::vector<FixtureEntry>> Expand(std::string_view text) {
  return ExpandManifestText(text, "test.manifest", fs::temp_directory_path());
}

TEST(FixtureTreeTest, RangesAlternativesAndIndexedVariablesExpand) {
  absl::StatusOr<std::vector<FixtureEntry>> e = Expand(
      "range d 0-1\n"
      "range c 0-1\n"
      "set v 7\n"
      "set v.1 9\n"
      "under n{d}\n"
      "core{c}/x/{total,present} 0644 {v:c}\n");
  ASSERT_TRUE(e.ok()) << e.status();
  // Alternatives outermost; then ranges in name order, the first varying fastest.
  EXPECT_THAT(Paths(*e), ElementsAre("n0/core0/x/total", "n0/core1/x/total", "n1/core0/x/total",
                                     "n1/core1/x/total", "n0/core0/x/present", "n0/core1/x/present",
                                     "n1/core0/x/present", "n1/core1/x/present"));
  EXPECT_EQ((*e)[0].content, "7\n");
  EXPECT_EQ((*e)[1].content, "9\n");  // c = 1: v.1
  EXPECT_EQ((*e)[0].mode, 0644u);
  EXPECT_EQ((*e)[0].origin, "test.manifest:6");
}

TEST(FixtureTreeTest, QuotedContentIsExactAndLinksAndDirectoriesAreKept) {
  absl::StatusOr<std::vector<FixtureEntry>> e = Expand(
      "# comment\n"
      "\n"
      "set n 2\n"
      "set empty \"\"\n"
      "a 0400 \"{n}\"\n"
      "b 0444 \"x\\ty\\\\\\\"\\x00z\\n\"\n"
      "c 0644 \"{empty}\\n\"\n"
      "d/ 0755\n"
      "e -> ../d/{n}\n");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->size(), 5u);
  EXPECT_EQ((*e)[0].content, "2");
  EXPECT_EQ((*e)[1].content, std::string("x\ty\\\"\0z\n", 8));
  EXPECT_EQ((*e)[2].content, "\n");
  EXPECT_EQ((*e)[3].kind, FixtureEntry::Kind::kDirectory);
  EXPECT_EQ((*e)[3].path, "d");
  EXPECT_EQ((*e)[4].kind, FixtureEntry::Kind::kSymlink);
  EXPECT_EQ((*e)[4].content, "../d/2");
}

TEST(FixtureTreeTest, BadLinesNameTheFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a 0644\n", "a file needs content"},
      {"a 64 1\n", "mode \"64\" is not 3 or 4 octal digits"},
      {"a 0648 1\n", "is not octal"},
      {"a/{x} 0644 1\n", "unknown variable x"},
      {"set v 1\nset v 2\n", "v is already set at test.manifest:1"},
      {"a 0644 1\na 0644 2\n", "a is already given at test.manifest:1"},
      {"a/{b 0644 1\n", "'{' without its '}'"},
      {"a} 0644 1\n", "'}' without '{'"},
      {"a 0644 \"1\n", "unterminated quoted content"},
      {"a 0644 \"\\q\"\n", "unknown escape \\q"},
      {"range r 3-1\n", "range 3-1 is empty"},
      {"range r x\n", "\"x\" is not a number"},
      {"set v\n", "set v needs a value"},
      {"/abs 0644 1\n", "is not relative to the root"},
      {"a/../b 0644 1\n", "has an empty, . or .. component"},
      {"set v 1\na{v:v} 0644 1\n", "v is not a range"},
      {"a -> \n", "a link needs a target"},
      {"d/ 0755 x\n", "a directory has no content"},
      {"include does-not-exist.manifest\n", "cannot read manifest"},
  };
  for (const auto& [text, why] : cases) {
    absl::StatusOr<std::vector<FixtureEntry>> e = Expand(text);
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_THAT(std::string{e.status().message()}, HasSubstr(why)) << text;
    EXPECT_THAT(std::string{e.status().message()}, HasSubstr("test.manifest:")) << text;
  }
}

TEST(FixtureTreeTest, IncludesShareVariablesAndAnIncludeCycleFails) {
  TempDir dir;
  std::ofstream(dir.path() / "inner.manifest") << "under sub\n{x} 0644 1\n";
  std::ofstream(dir.path() / "outer.manifest")
      << "set x leaf\ninclude inner.manifest\nafter 0644 2\n";
  absl::StatusOr<std::vector<FixtureEntry>> e = ExpandManifest(dir.path() / "outer.manifest");
  ASSERT_TRUE(e.ok()) << e.status();
  // `under` ends with the file that set it.
  EXPECT_THAT(Paths(*e), ElementsAre("sub/leaf", "after"));

  std::ofstream(dir.path() / "loop.manifest") << "include loop.manifest\n";
  absl::StatusOr<std::vector<FixtureEntry>> loop = ExpandManifest(dir.path() / "loop.manifest");
  ASSERT_FALSE(loop.ok());
  EXPECT_THAT(std::string{loop.status().message()}, HasSubstr("an include cycle?"));
}

TEST(FixtureTreeTest, WritesFilesDirectoriesAndLinksWithTheirModes) {
  TempDir dir;
  absl::StatusOr<std::vector<FixtureEntry>> e =
      Expand("x/ro 0400 \"2\"\nx/empty/ 0700\nx/link -> ro\n");
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(WriteFixtureTree(*e, dir.path() / "root").ok());
  const fs::path root = dir.path() / "root";
  struct stat st {};
  ASSERT_EQ(::stat((root / "x/ro").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  EXPECT_EQ(st.st_size, 1);
  ASSERT_EQ(::stat((root / "x/empty").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat((root / "x").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(fs::read_symlink(root / "x/link"), "ro");

  // Building twice into the same root fails on the first existing file, naming its line.
  absl::Status again = WriteFixtureTree(*e, root);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(std::string{again.message()}, HasSubstr("test.manifest:1: create"));
}

}  // namespace
}  // namespace neuron::testing

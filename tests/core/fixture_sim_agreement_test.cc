// The simulator's tree against the fixtures transcribed from the driver (tests/fixtures/driver/):
// the same files, directories and links, with the same modes, where the fixture has them; the
// same Neuron device directory, file for file; and, right after load (the trn2 fixture's state),
// the same contents except for what is made up per node. The fixture tests show that core reads
// the names of core/driver/sysfs_files.h; this shows that the simulator writes the driver's.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/fixture_tree.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using testing::FixtureEntry;

struct Built {
  testing::TempDir fixture_dir;
  testing::TempDir sim_dir;
  std::vector<FixtureEntry> entries;
};

// Builds the fixture and the simulator's tree of `instance` side by side.
void Build(std::string_view manifest, std::string_view instance, Built* b) {
  absl::StatusOr<std::vector<FixtureEntry>> entries =
      testing::ExpandManifest(testing::DriverFixture(manifest));
  ASSERT_TRUE(entries.ok()) << entries.status();
  b->entries = *std::move(entries);
  ASSERT_TRUE(testing::WriteFixtureTree(b->entries, b->fixture_dir.path()).ok());
  // The fixtures are driver 2.24.7.0's (tests/fixtures/driver/neuron_device.manifest).
  ASSERT_TRUE(testing::BuildSimTree(b->sim_dir.path(), instance, {.driver_version = "2.24"}).ok());
}

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Where a link leads, relative to its tree's root.
fs::path Resolved(const fs::path& root, const std::string& link) {
  return fs::weakly_canonical(root / link).lexically_relative(fs::weakly_canonical(root));
}

// Every fixture entry exists in the simulator's tree as the same kind, mode and link target.
// Skipped: procfs (not the driver's), and the char-device links, named by the dynamic major.
void ExpectSimHasFixtureEntries(const Built& b) {
  for (const FixtureEntry& e : b.entries) {
    if (e.path.starts_with("proc/") || e.path.starts_with("sys/dev/char/")) continue;
    SCOPED_TRACE(e.origin + " " + e.path);
    const fs::path sim = b.sim_dir.path() / e.path;
    struct stat st {};
    ASSERT_EQ(::lstat(sim.c_str(), &st), 0) << "missing in the simulator's tree";
    switch (e.kind) {
      case FixtureEntry::Kind::kFile:
        EXPECT_TRUE(S_ISREG(st.st_mode));
        EXPECT_EQ(st.st_mode & 07777, e.mode);
        break;
      case FixtureEntry::Kind::kDirectory:
        EXPECT_TRUE(S_ISDIR(st.st_mode));
        EXPECT_EQ(st.st_mode & 07777, e.mode);
        break;
      case FixtureEntry::Kind::kSymlink:
        ASSERT_TRUE(S_ISLNK(st.st_mode));
        EXPECT_EQ(Resolved(b.sim_dir.path(), e.path), Resolved(b.fixture_dir.path(), e.path));
        break;
    }
  }
}

// Paths below `dir`, relative to it.
std::set<std::string> Below(const fs::path& dir) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::end(it); ++it) {
    out.insert(it->path().lexically_relative(dir).string());  // links not followed
  }
  return out;
}

TEST(FixtureSimAgreementTest, Trn1TwoXlargeTreeHasTheDriversFiles) {
  Built b;
  Build("trn1.2xlarge.manifest", "trn1.2xlarge", &b);
  ExpectSimHasFixtureEntries(b);
  const RootPaths fixture(b.fixture_dir.path()), sim(b.sim_dir.path());
  EXPECT_EQ(Below(sim.NeuronDevice(0)), Below(fixture.NeuronDevice(0)));
}

TEST(FixtureSimAgreementTest, Trn2DeviceAfterLoadMatchesTheDriversFilesAndContents) {
  Built b;
  Build("trn2.48xlarge-device0.manifest", "trn2.48xlarge", &b);
  ExpectSimHasFixtureEntries(b);
  const RootPaths fixture(b.fixture_dir.path()), sim(b.sim_dir.path());
  const fs::path fdev = fixture.NeuronDevice(0), sdev = sim.NeuronDevice(0);
  const std::set<std::string> files = Below(fdev);
  EXPECT_EQ(Below(sdev), files);

  // Made up per node or by the hardware: the serial number, the char major in dev and uevent,
  // and the live tensor-engine cycle counters.
  std::set<fs::path> differ = {"dev", "uevent", fs::path(sysfs::kSerialNumber)};
  for (int c = 0; c < 8; ++c) differ.insert(fs::path(sysfs::CoreDir(c)) / sysfs::kPeCounters);
  for (const std::string& f : files) {
    if (differ.contains(f) || !fs::is_regular_file(fdev / f)) continue;
    EXPECT_EQ(Read(sdev / f), Read(fdev / f)) << f;
  }
}

}  // namespace
}  // namespace neuron

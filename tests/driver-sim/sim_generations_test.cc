// `neuron-sim up --driver-version V` serves each known driver generation's tree
// (driver-sim/README.md#driver-versions): the device directory, the class's own attributes and
// the module version match, path for path with kind and mode, the manifest transcribed by hand
// from that generation's driver source, or for 2.30 from its release notes
// (tests/fixtures/driver/sysfs-<V>.manifest). Then the invented future layout, the Trn2 trees
// with health_status/, and the files the daemon keeps writing (health_status/ beside the ECC
// counters, utilization_raw beside the power rollup).

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/driver/driver_generations.h"
#include "core/driver/sysfs_names.h"
#include "tests/support/fixture_tree.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_tree_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using testing::FixtureEntry;
using ::testing::HasSubstr;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What lies under `dir` (links not followed): relative path -> kind and mode ("l" for a link).
std::map<std::string, std::string> Listing(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::end(it); ++it) {
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    const char kind = S_ISLNK(st.st_mode) ? 'l' : S_ISDIR(st.st_mode) ? 'd' : 'f';
    out[it->path().lexically_relative(dir).string()] =
        kind == 'l' ? "l" : fmt::format("{}{:o}", kind, st.st_mode & 07777);
  }
  return out;
}

// The manifest's entries under `prefix` in the same form (parents of listed paths are 0755
// directories, as the fixture writer makes them).
std::map<std::string, std::string> Expected(const std::vector<FixtureEntry>& entries,
                                            const std::string& prefix) {
  std::map<std::string, std::string> out;
  for (const FixtureEntry& e : entries) {
    if (!e.path.starts_with(prefix + "/")) continue;
    const std::string rel = e.path.substr(prefix.size() + 1);
    out[rel] =
        e.kind == FixtureEntry::Kind::kSymlink
            ? "l"
            : fmt::format("{}{:o}", e.kind == FixtureEntry::Kind::kDirectory ? 'd' : 'f', e.mode);
    for (fs::path p = fs::path(rel).parent_path(); !p.empty(); p = p.parent_path()) {
      out.try_emplace(p.string(), "d755");
    }
  }
  return out;
}

std::vector<FixtureEntry> Manifest(const std::string& name) {
  absl::StatusOr<std::vector<FixtureEntry>> entries =
      testing::ExpandManifest(testing::DriverFixture(name));
  EXPECT_TRUE(entries.ok()) << entries.status();
  return entries.ok() ? *entries : std::vector<FixtureEntry>{};
}

// The tree of `root` against the manifest: device 0's directory exactly, the class directory's
// files exactly, and the module version's content.
void ExpectTreeIsManifest(const fs::path& root, const std::string& manifest) {
  SCOPED_TRACE(manifest);
  const std::vector<FixtureEntry> entries = Manifest(manifest);
  const RootPaths paths(root);
  const std::string device = "sys/devices/virtual/neuron_device/neuron0";
  EXPECT_EQ(Listing(paths.NeuronDevice(0)), Expected(entries, device));
  // The class's own attributes; its links to the devices are not.
  auto files = [](std::map<std::string, std::string> m) {
    std::erase_if(m, [](const auto& kv) { return kv.second == "l"; });
    return m;
  };
  EXPECT_EQ(files(Listing(paths.NeuronClassDir())),
            files(Expected(entries, "sys/class/neuron_device")));
  for (const FixtureEntry& e : entries) {
    if (e.path == "sys/module/neuron/version") {
      EXPECT_EQ(Slurp(paths.ModuleVersion()), e.content);
    }
  }
}

// Through the real binary: every generation's flag value gives that generation's tree.
TEST(SimGenerationsTest, UpServesEveryGenerationAsItsSourceBuildsIt) {
  for (const DriverGeneration& g : KnownGenerations()) {
    testing::TempDir dir("gen");
    testing::SimNode node(
        {.sim_bin = NEURON_SIM_BIN, .root = dir.path() / "root", .logs = dir.path() / "logs"});
    ASSERT_TRUE(node.Up("trn1.2xlarge", {"--driver-version", std::string(g.name)})) << node.Log();
    ExpectTreeIsManifest(node.root(), "sysfs-" + std::string(g.name) + ".manifest");
  }
}

TEST(SimGenerationsTest, NewestIsTheDefaultAndTrn2HasHealthStatus) {
  testing::TempDir dir("gen");
  ASSERT_TRUE(testing::BuildSimTree(dir.path(), "trn2.48xlarge").ok());
  ExpectTreeIsManifest(dir.path(), "sysfs-2.29-trn2.manifest");
}

// 2.30 on the chip that has health_status/: the two files its release notes add there, in the
// post-probe state the simulator assumes (no component unhealthy, the heartbeat at 0).
TEST(SimGenerationsTest, Trn2At230HasTheHealthFilesOfItsNotes) {
  testing::TempDir dir("gen");
  ASSERT_TRUE(testing::BuildSimTree(dir.path(), "trn2.48xlarge", {.driver_version = "2.30"}).ok());
  ExpectTreeIsManifest(dir.path(), "sysfs-2.30-trn2.manifest");
  const fs::path hs = RootPaths(dir.path()).NeuronDevice(15) / "stats/hardware/health_status";
  EXPECT_EQ(Slurp(hs / "unhealthy_components"), "\n");
  EXPECT_EQ(Slurp(hs / "healthcheck_heartbeat"), "0\n");
}

TEST(SimGenerationsTest, UnknownVersionIsAUsageError) {
  testing::TempDir dir("gen");
  const testing::RunResult r =
      testing::RunCommand(dir.path(), {NEURON_SIM_BIN, "up", "--instance", "trn1.2xlarge", "--root",
                                       (dir.path() / "root").string(), "--driver-version", "2.31"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("unknown driver version '2.31'; known: 2.24, 2.25, 2.26, 2.27, "
                               "2.28, 2.29, 2.30, future"));
}

// The invented layout (driver-sim/README.md#driver-versions): version 2.31.7.0, everything of
// 2.30 with stats/hardware/ moved to stats/health/ (the 2.30.2 notes' files inside it).
TEST(SimGenerationsTest, FutureMovesStatsHardware) {
  testing::TempDir dir("gen");
  auto tree = testing::BuildSimTree(dir.path(), "trn2.48xlarge", {.driver_version = "future"});
  ASSERT_TRUE(tree.ok()) << tree.status();
  const RootPaths paths(dir.path());
  EXPECT_EQ(Slurp(paths.ModuleVersion()), "2.31.7.0\n");
  const fs::path dev = paths.NeuronDevice(0);
  EXPECT_FALSE(fs::exists(dev / "stats/hardware"));
  for (const char* f :
       {"sram_ecc_uncorrected", "mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected",
        "sram_ecc_corrected", "mem_ecc_corrected", "health_status/hbm_ecc_err_count",
        "health_status/hw_error_event", "health_status/unhealthy_components",
        "health_status/healthcheck_heartbeat"}) {
    EXPECT_TRUE(fs::exists(dev / "stats/health" / f)) << f;
  }
  EXPECT_TRUE(fs::exists(dev / "stats/power/utilization_raw"));
  EXPECT_TRUE(fs::exists(dev / "neuron_core7/stats/tensor_engine/pe_cntrs"));
  // Faults land where the layout puts them.
  ASSERT_TRUE((*tree)->AddHardwareErrors(0, "mem_ecc_uncorrected", 2).ok());
  EXPECT_EQ(Slurp(dev / "stats/health/mem_ecc_uncorrected"), "2\n");
  EXPECT_EQ(Slurp(dev / "stats/health/health_status/hbm_ecc_err_count"), "2\n");
  ASSERT_TRUE((*tree)->WriteHeartbeat(0, 7).ok());
  EXPECT_EQ(Slurp(dev / "stats/health/health_status/healthcheck_heartbeat"), "7\n");
  ASSERT_TRUE((*tree)->AddHardwareErrors(0, "mem_ecc_corrected", 4).ok());
  EXPECT_EQ(Slurp(dev / "stats/health/mem_ecc_corrected"), "4\n");
}

// health_status/ follows the ECC counters it is derived from (DRV
// nsysfsmetric_show_cached_values_metrics), and hw_error_event counts each change.
TEST(SimGenerationsTest, HealthStatusFollowsTheEccCountersOnTrn2) {
  testing::TempDir dir("gen");
  auto tree = testing::BuildSimTree(dir.path(), "trn2.48xlarge", {.driver_version = "2.28"});
  ASSERT_TRUE(tree.ok()) << tree.status();
  const fs::path hs = RootPaths(dir.path()).NeuronDevice(3) / "stats/hardware/health_status";
  ASSERT_TRUE((*tree)->AddHardwareErrors(3, "mem_ecc_uncorrected", 1).ok());
  ASSERT_TRUE((*tree)->AddHardwareErrors(3, "sram_ecc_uncorrected", 70000).ok());
  ASSERT_TRUE((*tree)->AddHardwareErrors(3, "mem_ecc_repairable_uncorrected", 2).ok());
  EXPECT_EQ(Slurp(hs / "hbm_ecc_err_count"), "1\n");
  EXPECT_EQ(Slurp(hs / "sram_ecc_err_count"), "4464\n");  // low 16 bits of 70000
  EXPECT_EQ(Slurp(hs / "repairable_hbm_ecc_err_count"), "2\n");
  EXPECT_EQ(Slurp(hs / "hw_error_event"), "3\n");

  // 2.27 has none, nor has a Trn1 at 2.29.
  testing::TempDir older("gen");
  ASSERT_TRUE(
      testing::BuildSimTree(older.path(), "trn2.48xlarge", {.driver_version = "2.27"}).ok());
  EXPECT_FALSE(
      fs::exists(RootPaths(older.path()).NeuronDevice(0) / "stats/hardware/health_status"));
  testing::TempDir trn1("gen");
  auto t1 = testing::BuildSimTree(trn1.path(), "trn1.32xlarge");
  ASSERT_TRUE(t1.ok());
  ASSERT_TRUE((*t1)->AddHardwareErrors(0, "mem_ecc_uncorrected", 1).ok());
  EXPECT_FALSE(fs::exists(RootPaths(trn1.path()).NeuronDevice(0) / "stats/hardware/health_status"));
}

TEST(SimGenerationsTest, RawPowerFollowsEachRollupPerDie) {
  testing::TempDir dir("gen");
  auto tree = testing::BuildSimTree(dir.path(), "trn2.48xlarge");
  ASSERT_TRUE(tree.ok());
  const fs::path raw = RootPaths(dir.path()).NeuronDevice(1) / "stats/power/utilization_raw";
  EXPECT_EQ(Slurp(raw), "die,util_bips,counter\n0,unavailable\n1,unavailable\n");
  ASSERT_TRUE((*tree)->WritePower(1, "POWER_STATUS_VALID", 1735689600, 1000, 3000, 2000).ok());
  ASSERT_TRUE((*tree)->WritePower(1, "POWER_STATUS_VALID", 1735689660, 1000, 3000, 2500).ok());
  EXPECT_EQ(Slurp(raw), "die,util_bips,counter\n0,2500,2\n1,2500,2\n");
  ASSERT_TRUE((*tree)->WritePower(1, "POWER_STATUS_NO_DATA", 1735689720, 0, 0, 0).ok());
  EXPECT_EQ(Slurp(raw), "die,util_bips,counter\n0,unavailable\n1,unavailable\n");
}

}  // namespace
}  // namespace neuron

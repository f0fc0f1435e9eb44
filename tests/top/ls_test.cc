// neuron-ls, the real binary, where no simulated driver answers: the command line, exit codes
// and the messages that name what is missing (docs/tools-ux.md#requirements Q3, Q9). The formats
// are checked on the report in ls_report_test.cc; live data through the driver's device ABI in
// live_test.cc, against a running `neuron-sim up` node.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"

namespace neuron::top {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
namespace fs = std::filesystem;
using ::neuron::top::testing::ExpectGolden;
using ::neuron::top::testing::MakeTree;
using ::neuron::top::testing::RunCommand;
using ::neuron::top::testing::RunResult;

class LsTest : public ::testing::Test {
 protected:
  RunResult Ls(const fs::path& root, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {NEURON_LS_BIN, "--root", root.string()});
    return RunCommand(work_.path(), flags);
  }

  // An --agent where nothing answers, whatever this machine runs: health from this read.
  std::string NoAgent() const { return "unix:" + (work_.path() / "none.sock").string(); }
  // `out` with the node's temporary root (in the reasons live data is unavailable) as ROOT.
  std::string WithoutRoot(std::string out) const {
    const std::string root = node_.path().string();
    for (size_t at = out.find(root); at != std::string::npos; at = out.find(root, at)) {
      out.replace(at, root.size(), "ROOT");
    }
    return out;
  }

  ::neuron::testing::TempDir work_{"ls_work"};
  ::neuron::testing::TempDir node_{"ls_node"};
};

// The default and --topology formats need no live data: they read sysfs only and never say
// that live data is missing.
TEST_F(LsTest, TableWithoutLiveData) {
  auto tree = MakeTree(node_.path(), "inf2.48xlarge");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{}, std::vector<std::string>{"--topology"}}) {
    const RunResult r = Ls(node_.path(), flags);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out,
                HasSubstr("instance-type: inf2.48xlarge\ninstance-id: i-aabbccdd123456789\n"));
    EXPECT_THAT(r.out, HasSubstr("| 5      | 2      "));
    EXPECT_THAT(r.err, Not(HasSubstr("live process data")));
  }
}

// No agent answers (docs/tools-ux.md#health): the default table's HEALTH column is this read's,
// and stderr says so once; --topology shows no health and asks for none.
TEST_F(LsTest, HealthFromThisReadWhenNoAgentAnswers) {
  auto tree = MakeTree(node_.path(), "inf2.xlarge");
  const std::string agent = "unix:" + (work_.path() / "none.sock").string();
  const RunResult r = Ls(node_.path(), {"--agent", agent});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("| HEALTH  |"));
  EXPECT_THAT(r.out, HasSubstr("| healthy |"));
  EXPECT_THAT(r.err, HasSubstr("neuron-ls: warning: health from this read only (agent at " + agent +
                               " not reachable: "));
  const RunResult topology = Ls(node_.path(), {"--topology", "--agent", agent});
  EXPECT_EQ(topology.code, 0) << topology.err;
  EXPECT_THAT(topology.out, Not(HasSubstr("HEALTH")));
  EXPECT_THAT(topology.err, Not(HasSubstr("health")));
}

// docs/architecture.md#unknown-is-not-zero: without the device nodes (a container started without
// them) the process columns are unknown and stderr names the missing node; the exit code stays 0.
TEST_F(LsTest, ProcessColumnsSayWhyTheyAreUnknown) {
  auto tree = MakeTree(node_.path(), "inf2.24xlarge");
  for (int d = 0; d < 6; ++d) fs::remove(node_.path() / "dev" / ("neuron" + std::to_string(d)));
  const RunResult wide = Ls(node_.path(), {"--wide"});
  EXPECT_EQ(wide.code, 0) << wide.err;
  EXPECT_THAT(wide.err, HasSubstr("neuron-ls: live process data unavailable: no device node " +
                                  (node_.path() / "dev/neuron0").string()));
  EXPECT_THAT(wide.out, HasSubstr("| NA  | NA      | NA      |\n"));
  const RunResult json = Ls(node_.path(), {"--json-output"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_TRUE(j[0]["neuron_processes"].is_null());
  EXPECT_THAT(j[0]["live_data_unavailable"].get<std::string>(), HasSubstr("no device node"));
}

// docs/architecture.md#lnc: --lnc (or NEURON_LOGICAL_NC_CONFIG) overrides the node's LNC on trn2.
TEST_F(LsTest, LncOverride) {
  auto tree = MakeTree(node_.path(), "trn2.48xlarge");
  const RunResult flag = Ls(node_.path(), {"--lnc", "1"});
  ASSERT_EQ(flag.code, 0) << flag.err;
  EXPECT_THAT(flag.out, HasSubstr("logical-neuroncore-config: 1\n"));
  EXPECT_THAT(flag.out, HasSubstr("| 15     | 8      | 120-127  | 96 GB  |"));
  const RunResult env =
      RunCommand(work_.path(), {NEURON_LS_BIN, "--root", node_.path().string(), "--topology"},
                 {"NEURON_LOGICAL_NC_CONFIG=1"});
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("logical-neuroncore-config: 1\n"));
  EXPECT_THAT(env.out, HasSubstr("| 1      | 8      | 96 GB  |"));
  EXPECT_EQ(Ls(node_.path(), {"--lnc", "3"}).code, 2);
}

// docs/tools-ux.md Q3: each missing piece named, with its own exit code.
TEST_F(LsTest, NoDevicesIsAClearErrorWithNonZeroExit) {
  const RunResult none = Ls(node_.path(), {});
  EXPECT_EQ(none.code, 3);
  EXPECT_EQ(none.out, "");
  EXPECT_THAT(none.err, HasSubstr("no Neuron driver"));
  EXPECT_THAT(none.err, HasSubstr("sys/class/neuron_device does not exist"));

  fs::create_directories(node_.path() / "sys/class/neuron_device");
  const RunResult no_devices = Ls(node_.path(), {"--json-output"});
  EXPECT_EQ(no_devices.code, 4);
  EXPECT_EQ(no_devices.out, "");
  EXPECT_THAT(no_devices.err, HasSubstr("lists no device"));
}

// docs/tools-ux.md#ls-json: -j and --json-output print the array of devices byte for byte as the
// golden has it (written by the binary before --output-format json was added), so the scripts
// that parse it keep working. The temporary root is written ROOT.
TEST_F(LsTest, JsonOutputKeepsTheArray) {
  auto tree = MakeTree(node_.path(), "trn1.32xlarge");
  for (const char* flag : {"-j", "--json-output"}) {
    const RunResult r = Ls(node_.path(), {flag, "--agent", NoAgent()});
    ASSERT_EQ(r.code, 0) << r.err;
    ExpectGolden("top/trn1.32xlarge.ls-json-output.json", WithoutRoot(r.out));
  }
}

// docs/tools-ux.md#ls-json-object on a node in a Trn2 UltraServer (the simulator's default place:
// node 0 of 4): the node's facts at the top, the UltraServer's configurations among them, and
// beneath, the very objects -j prints.
TEST_F(LsTest, OutputFormatJsonOnAnUltraServerNode) {
  auto tree = MakeTree(node_.path(), "trn2u.48xlarge");
  const RunResult r = Ls(node_.path(), {"--output-format", "json", "--agent", NoAgent()});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["instance_type"], "trn2u.48xlarge");
  EXPECT_EQ(j["instance_id"], "i-aabbccdd123456789");
  EXPECT_EQ(j["logical_neuroncore_config"], 2);
  EXPECT_TRUE(j["driver_version"].is_string()) << r.out;
  const nlohmann::json& us = j["ultraserver"];
  ASSERT_TRUE(us.is_object()) << r.out;
  EXPECT_EQ(us["supported_modes"], nlohmann::json::parse(R"(["x4", "x2v", "x1"])"));
  ASSERT_FALSE(us["memberships"].empty()) << r.out;
  EXPECT_EQ(
      us["memberships"][0],
      nlohmann::json::parse(R"({"mode": "x4", "node_id": 0, "server_id": "0123456789abcdef"})"));
  // The devices are -j's objects with the published attributes (core/driver/device_attributes.h).
  const RunResult array = Ls(node_.path(), {"-j", "--agent", NoAgent()});
  ASSERT_EQ(array.code, 0) << array.err;
  nlohmann::json devices = j["neuron_devices"];
  ASSERT_EQ(devices.size(), 16U);
  EXPECT_THAT(devices[0]["serial_number"].get<std::string>(), MatchesRegex("[0-9a-f]{16}"));
  for (nlohmann::json& d : devices) d.erase("serial_number");
  EXPECT_EQ(devices, nlohmann::json::parse(array.out));
}

// Off an UltraServer the key is there and null: the driver publishes no place, which is not
// "node 0 of none". Unknown instance facts are null too, never "" or "NA".
TEST_F(LsTest, OutputFormatJsonOffAnUltraServer) {
  auto tree = MakeTree(node_.path(), "trn1.32xlarge");
  fs::remove(node_.path() / "sys/class/dmi/id/board_asset_tag");
  const RunResult r = Ls(node_.path(), {"--output-format", "json", "--agent", NoAgent()});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["instance_type"], "trn1.32xlarge");
  ASSERT_TRUE(j.contains("instance_id"));
  EXPECT_TRUE(j["instance_id"].is_null()) << r.out;
  ASSERT_TRUE(j.contains("ultraserver"));
  EXPECT_TRUE(j["ultraserver"].is_null()) << r.out;
  EXPECT_EQ(j["neuron_devices"].size(), 16U);
  // The default is the table, and `table` says so.
  const RunResult table = Ls(node_.path(), {"--output-format", "table", "--agent", NoAgent()});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(table.out, Ls(node_.path(), {"--agent", NoAgent()}).out);
}

// One output format per run: --output-format with -j, or a format it does not know, is a usage
// error (exit 2, nothing on stdout).
TEST_F(LsTest, OutputFormatUsageErrors) {
  auto tree = MakeTree(node_.path(), "trn1.2xlarge");
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--output-format", "json", "-j"},
        std::vector<std::string>{"--json-output", "--output-format", "table"}}) {
    const RunResult r = Ls(node_.path(), flags);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "neuron-ls: --output-format and --json-output (-j) are alternatives: give one\n");
  }
  const RunResult unknown = Ls(node_.path(), {"--output-format", "yaml"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.out, "");
  EXPECT_THAT(unknown.err, HasSubstr("--output-format"));
}

// docs/tools-ux.md Q9: unknown option -> usage on stderr, exit 2.
TEST_F(LsTest, UnknownOptionIsUsageError) {
  const RunResult r = RunCommand(work_.path(), {NEURON_LS_BIN, "--no-such-option"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("--no-such-option"));
}

// NEURON_ROOT stands in for --root (docs/architecture.md#root-convention).
TEST_F(LsTest, RootFromEnvironment) {
  auto tree = MakeTree(node_.path(), "inf2.48xlarge");
  const RunResult r =
      RunCommand(work_.path(), {NEURON_LS_BIN}, {"NEURON_ROOT=" + node_.path().string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("instance-type: inf2.48xlarge\n"));
}

// A device node missing under ROOT/dev (a container without the devices) is named on stderr;
// the table still comes from sysfs.
TEST_F(LsTest, MissingDeviceNodesAreReported) {
  auto tree = MakeTree(node_.path(), "inf2.48xlarge");
  fs::remove(node_.path() / "dev/neuron3");
  const RunResult r = Ls(node_.path(), {});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("device nodes missing under"));
  EXPECT_THAT(r.err, HasSubstr("neuron3"));
  EXPECT_THAT(r.out, HasSubstr("| 3      | 2      | 6-7      | 32 GB  |"));
}

}  // namespace
}  // namespace neuron::top

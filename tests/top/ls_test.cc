// neuron-ls end to end: the real binary against simulated trn1.32xlarge, trn2.48xlarge and
// inf2.48xlarge trees with runtime processes (datastores written with DatastoreWriter, command
// lines in a fake ROOT/proc). Every format is compared with a golden file under
// tests/fixtures/top/ (NEURON_UPDATE_GOLDENS=1 rewrites them), and the rows TOOLS-UX.md prints
// for trn2 are checked literally against the document.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/datastore_layout.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"

namespace neuron::top {
namespace {

using ::testing::HasSubstr;
using namespace ::neuron::top::testing;

// TOOLS-UX §1.4's sample process, whose command is long enough to be cut at 40 and 80.
constexpr int kBenchPid = 268911;
constexpr int kLsPid = 269192;
const std::vector<std::string> kBenchArgv{
    "neuron-bench",           "exec", "--run-as-cc-neff", "--warmup", "none",
    "--fixed-instance-count", "64",   "--iterations",     "10000",    "/models/llama.neff"};

struct Node {
  std::unique_ptr<::neuron::testing::TempDir> dir;
  fs::path root;
  std::unique_ptr<sim::SimTree> tree;
  std::vector<std::unique_ptr<sim::DatastoreWriter>> writers;
};

void AddRuntime(Node& n, int pid, const std::vector<int>& devices, sim::NdsVersion version) {
  for (const int d : devices) {
    auto w = sim::DatastoreWriter::Create(RootPaths(n.root), d, pid);
    ASSERT_TRUE(w.ok()) << w.status();
    (*w)->SetProcessInfo("bench", version, 1);
    n.writers.push_back(*std::move(w));
  }
}

// trn2.48xlarge as in TOOLS-UX §1.4: the benchmark on every device, and a `neuron-ls -a`
// holding device 0 open without a datastore.
Node Trn2() {
  Node n;
  n.dir = std::make_unique<::neuron::testing::TempDir>("ls_trn2");
  n.root = n.dir->path();
  n.tree = MakeTree(n.root, "trn2.48xlarge");
  std::vector<int> all;
  std::vector<std::string> nodes;
  for (int d = 0; d < 16; ++d) {
    all.push_back(d);
    nodes.push_back("/dev/neuron" + std::to_string(d));
  }
  AddRuntime(n, kBenchPid, all, {2, 0, 0});
  AddFakeProcess(n.root, {kBenchPid, kBenchArgv, nodes});
  AddFakeProcess(n.root, {kLsPid, {"neuron-ls", "--show-all-procs"}, {"/dev/neuron0"}});
  return n;
}

// trn1.32xlarge: a training job on devices 0-3 (two processes on device 0), idle devices
// elsewhere, and a monitor holding device 8 open.
Node Trn1() {
  Node n;
  n.dir = std::make_unique<::neuron::testing::TempDir>("ls_trn1");
  n.root = n.dir->path();
  n.tree = MakeTree(n.root, "trn1.32xlarge");
  AddRuntime(n, 4711, {0, 1, 2, 3}, {2, 21, 33});
  AddRuntime(n, 4712, {0}, {2, 21, 33});
  AddFakeProcess(n.root, {4711,
                          {"/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node",
                           "32", "ray_train_llama2.py", "--model", "llama2-7b", "--tp", "8"},
                          {"/dev/neuron0", "/dev/neuron1", "/dev/neuron2", "/dev/neuron3"}});
  AddFakeProcess(n.root, {4712, {"python3", "eval.py"}, {"/dev/neuron0"}});
  AddFakeProcess(n.root, {5150, {"neuron-monitor", "-c", "/etc/monitor.conf"}, {"/dev/neuron8"}});
  return n;
}

// inf2.48xlarge: one inference server on device 5 whose /proc entry is gone (command NA).
Node Inf2() {
  Node n;
  n.dir = std::make_unique<::neuron::testing::TempDir>("ls_inf2");
  n.root = n.dir->path();
  n.tree = MakeTree(n.root, "inf2.48xlarge");
  AddRuntime(n, 777, {5}, {2, 19, 5});
  AddFakeProcess(n.root, {778, {"unrelated"}, {}});  // ROOT/proc exists, 777 is not in it
  return n;
}

class LsTest : public ::testing::Test {
 protected:
  RunResult Ls(const fs::path& root, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {NEURON_LS_BIN, "--root", root.string()});
    return RunCommand(work_.path(), flags);
  }
  std::string LsOk(const fs::path& root, const std::vector<std::string>& flags) {
    const RunResult r = Ls(root, flags);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    return r.out;
  }
  void Goldens(const std::string& name, const fs::path& root) {
    ExpectGolden(name + ".default.txt", LsOk(root, {}));
    ExpectGolden(name + ".wide.txt", LsOk(root, {"--wide"}));
    ExpectGolden(name + ".show-all-procs.txt", LsOk(root, {"--show-all-procs"}));
    ExpectGolden(name + ".json", LsOk(root, {"--json-output"}));
    ExpectGolden(name + ".topology.txt", LsOk(root, {"--topology"}));
  }

  ::neuron::testing::TempDir work_{"ls_work"};
};

TEST_F(LsTest, Trn1Goldens) {
  Node n = Trn1();
  Goldens("trn1.32xlarge", n.root);
}

TEST_F(LsTest, Trn2Goldens) {
  Node n = Trn2();
  Goldens("trn2.48xlarge", n.root);
}

TEST_F(LsTest, Inf2Goldens) {
  Node n = Inf2();
  Goldens("inf2.48xlarge", n.root);
}

// TOOLS-UX §1.3, rows 0-3 and 15 of the current default table, byte for byte.
TEST_F(LsTest, Trn2DefaultTableMatchesTheDocument) {
  Node n = Trn2();
  const std::string out = LsOk(n.root, {});
  EXPECT_THAT(out, ::testing::StartsWith("instance-type: trn2.48xlarge\n"
                                         "instance-id: i-aabbccdd123456789\n"
                                         "logical-neuroncore-config: 2\n"));
  for (const char* line : {"+--------+--------+----------+--------+---------------+--------------+-"
                           "--------------+------+\n"
                           "| NEURON | NEURON |  NEURON  | NEURON |   CONNECTED   |     PCI      | "
                           "     CPU      | NUMA |\n"
                           "| DEVICE | CORES  | CORE IDS | MEMORY |    DEVICES    |     BDF      | "
                           "  AFFINITY    | NODE |\n"
                           "+--------+--------+----------+--------+---------------+--------------+-"
                           "--------------+------+\n"
                           "| 0      | 4      | 0-3      | 96 GB  | 12, 3, 4, 1   | 0000:cc:00.0 | "
                           "48-95,144-191 | 1    |\n"
                           "| 1      | 4      | 4-7      | 96 GB  | 13, 0, 5, 2   | 0000:b5:00.0 | "
                           "48-95,144-191 | 1    |\n"
                           "| 2      | 4      | 8-11     | 96 GB  | 14, 1, 6, 3   | 0000:b6:00.0 | "
                           "48-95,144-191 | 1    |\n"
                           "| 3      | 4      | 12-15    | 96 GB  | 15, 2, 7, 0   | 0000:cb:00.0 | "
                           "48-95,144-191 | 1    |\n",
                           "| 15     | 4      | 60-63    | 96 GB  | 11, 14, 3, 12 | 0000:f7:00.0 | "
                           "48-95,144-191 | 1    |\n"}) {
    EXPECT_THAT(out, HasSubstr(line));
  }
}

// TOOLS-UX §1.4, --wide and --show-all-procs.
TEST_F(LsTest, Trn2WideAndAllProcsMatchTheDocument) {
  Node n = Trn2();
  EXPECT_THAT(
      LsOk(n.root, {"--wide"}),
      HasSubstr("+--------+--------+--------+---------------+---------+--------+-------------------"
                "---------------------------------------------------------------+---------+\n"
                "| NEURON | NEURON | NEURON |   CONNECTED   |   PCI   |  PID   |                   "
                "                  COMMAND                                      | RUNTIME |\n"
                "| DEVICE | CORES  | MEMORY |    DEVICES    |   BDF   |        |                   "
                "                                                               | VERSION |\n"
                "+--------+--------+--------+---------------+---------+--------+-------------------"
                "---------------------------------------------------------------+---------+\n"
                "| 0      | 4      | 96 GB  | 12, 3, 4, 1   | cc:00.0 | 268911 | neuron-bench exec "
                "--run-as-cc-neff --warmup none --fixed-instance-count 64 --... | 2.0.0   |\n"
                "| 1      | 4      | 96 GB  | 13, 0, 5, 2   | b5:00.0 | 268911 | neuron-bench exec "
                "--run-as-cc-neff --warmup none --fixed-instance-count 64 --... | 2.0.0   |\n"));
  EXPECT_THAT(LsOk(n.root, {"-a"}),
              HasSubstr("+--------+--------+--------+---------------+---------+--------+-----------"
                        "-------------------------------+---------+\n"
                        "| NEURON | NEURON | NEURON |   CONNECTED   |   PCI   |  PID   |           "
                        "      COMMAND                  | RUNTIME |\n"
                        "| DEVICE | CORES  | MEMORY |    DEVICES    |   BDF   |        |           "
                        "                               | VERSION |\n"
                        "+--------+--------+--------+---------------+---------+--------+-----------"
                        "-------------------------------+---------+\n"
                        "| 0      | 4      | 96 GB  | 12, 3, 4, 1   | cc:00.0 | 268911 | "
                        "neuron-bench exec --run-as-cc-neff --... | 2.0.0   |\n"
                        "|        |        |        |               |         | 269192 | neuron-ls "
                        "--show-all-procs               | NA      |\n"
                        "+--------+--------+--------+---------------+---------+--------+-----------"
                        "-------------------------------+---------+\n"));
}

// TOOLS-UX §1.6: the 4x4 torus drawing of the trn2 sample, lines padded to 40 columns.
TEST_F(LsTest, TorusDrawingMatchesTheDocument) {
  Node n = Trn2();
  const std::string out = LsOk(n.root, {"--topology"});
  const std::string marks = "      *        *        *        *      \n";
  const std::string bars = "      │        │        │        │      \n";
  const std::string down = "      ▼        ▼        ▼        ▼      \n";
  const std::string up = "      ▲        ▲        ▲        ▲      \n";
  std::string expected = "+---------+\n\n\nNeuron Device Topology\n" + marks + bars + down;
  expected += "*––►[ 0 ]◄––►[ 1 ]◄––►[ 2 ]◄––►[ 3 ]◄––*\n" + up + bars + down;
  expected += "*––►[ 4 ]◄––►[ 5 ]◄––►[ 6 ]◄––►[ 7 ]◄––*\n" + up + bars + down;
  expected += "*––►[ 8 ]◄––►[ 9 ]◄––►[10 ]◄––►[11 ]◄––*\n" + up + bars + down;
  expected += "*––►[12 ]◄––►[13 ]◄––►[14 ]◄––►[15 ]◄––*\n" + up + bars + marks;
  expected += "\nLegend:\n\n        *––► = Wrap-around link\n";
  EXPECT_THAT(out, ::testing::EndsWith(expected));
  // The table has the first five columns only, with the short BDF.
  EXPECT_THAT(out, HasSubstr("| 15     | 4      | 96 GB  | 11, 14, 3, 12 | f7:00.0 |\n"));
}

// TOOLS-UX §1.7: field names and JSON types.
TEST_F(LsTest, JsonFieldsAndTypes) {
  Node n = Trn2();
  const nlohmann::json j = nlohmann::json::parse(LsOk(n.root, {"--json-output"}));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 16u);
  const nlohmann::json& d0 = j[0];
  EXPECT_EQ(d0["neuron_device"], 0);
  EXPECT_EQ(d0["bdf"], "cc:00.0");
  EXPECT_EQ(d0["cpu_affinity"], "48-95,144-191");
  EXPECT_EQ(d0["numa_node"], "1");  // a string
  EXPECT_EQ(d0["connected_to"], nlohmann::json::parse("[12, 3, 4, 1]"));
  EXPECT_EQ(d0["nc_count"], 4);
  EXPECT_EQ(d0["logical_neuroncore_config"], 2);
  EXPECT_EQ(d0["memory_size"], 103079215104u);
  EXPECT_EQ(d0["neuroncore_ids"], nlohmann::json::parse("[0, 1, 2, 3]"));
  ASSERT_EQ(d0["neuron_processes"].size(), 1u);
  EXPECT_EQ(d0["neuron_processes"][0]["pid"], 268911);
  EXPECT_EQ(d0["neuron_processes"][0]["command"], "neuron-bench exec --run-as-cc-neff --...");
  EXPECT_EQ(d0["neuron_processes"][0]["neuron_runtime_version"], "2.0.0");
}

// The ring and chain drawings and the single-device case (TOOLS-UX §1.6, §2.5 neighbours).
TEST_F(LsTest, RingChainAndUnlinkedDrawings) {
  Node inf2 = Inf2();
  EXPECT_THAT(LsOk(inf2.root, {"-t"}),
              HasSubstr("Neuron Device Topology\n\n"
                        "    [ 0 ]◄––►[ 1 ]◄––►[ 2 ]◄––►[ 3 ]◄––►[ 4 ]◄––►[ 5 ]\n"
                        "      ▲                                            ▲  \n"
                        "      │                                            │  \n"
                        "      ▼                                            ▼  \n"
                        "    [11 ]◄––►[10 ]◄––►[ 9 ]◄––►[ 8 ]◄––►[ 7 ]◄––►[ 6 ]\n"));
  // The ring's neighbours as the driver lists them: [prev, next].
  EXPECT_THAT(LsOk(inf2.root, {}), HasSubstr("| 0      | 2      | 0-1      | 32 GB  | 11, 1"));

  ::neuron::testing::TempDir chain_dir("ls_inf2_24");
  auto chain = MakeTree(chain_dir.path(), "inf2.24xlarge");
  const std::string chain_out = LsOk(chain_dir.path(), {"-t"});
  EXPECT_THAT(chain_out, HasSubstr("Neuron Device Topology\n\n"
                                   "  [ 0 ]◄––►[ 1 ]◄––►[ 2 ]◄––►[ 3 ]◄––►[ 4 ]◄––►[ 5 ]\n"));
  ExpectGolden("inf2.24xlarge.topology.txt", chain_out);

  ::neuron::testing::TempDir single_dir("ls_trn1_2");
  auto single = MakeTree(single_dir.path(), "trn1.2xlarge");
  const std::string single_out = LsOk(single_dir.path(), {"-t"});
  EXPECT_THAT(single_out, HasSubstr("[ 0 ]  (no NeuronLink)\n"));
  ExpectGolden("trn1.2xlarge.topology.txt", single_out);
}

// Decision 13: --lnc (or NEURON_LOGICAL_NC_CONFIG) overrides the node's LNC on trn2.
TEST_F(LsTest, LncOverride) {
  Node n = Trn2();
  const std::string out = LsOk(n.root, {"--lnc", "1"});
  EXPECT_THAT(out, HasSubstr("logical-neuroncore-config: 1\n"));
  EXPECT_THAT(out, HasSubstr("| 0      | 8      | 0-7      | 96 GB  |"));
  EXPECT_THAT(out, HasSubstr("| 15     | 8      | 120-127  | 96 GB  |"));
  const RunResult env =
      RunCommand(work_.path(), {NEURON_LS_BIN, "--root", n.root.string(), "--json-output"},
                 {"NEURON_LOGICAL_NC_CONFIG=1"});
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_EQ(nlohmann::json::parse(env.out)[1]["neuroncore_ids"][0], 8);
  EXPECT_EQ(Ls(n.root, {"--lnc", "3"}).code, 2);
}

// TOOLS-UX Q3: each missing piece named, with its own exit code.
TEST_F(LsTest, NoDevicesIsAClearErrorWithNonZeroExit) {
  ::neuron::testing::TempDir empty("ls_empty");
  const RunResult none = Ls(empty.path(), {});
  EXPECT_EQ(none.code, 3);
  EXPECT_EQ(none.out, "");
  EXPECT_THAT(none.err, HasSubstr("no Neuron driver"));
  EXPECT_THAT(none.err, HasSubstr("sys/class/neuron_device does not exist"));

  fs::create_directories(empty.path() / "sys/class/neuron_device");
  const RunResult no_devices = Ls(empty.path(), {"--json-output"});
  EXPECT_EQ(no_devices.code, 4);
  EXPECT_EQ(no_devices.out, "");
  EXPECT_THAT(no_devices.err, HasSubstr("lists no device"));
}

// TOOLS-UX Q9: unknown option -> usage on stderr, exit 2.
TEST_F(LsTest, UnknownOptionIsUsageError) {
  const RunResult r = RunCommand(work_.path(), {NEURON_LS_BIN, "--no-such-option"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("--no-such-option"));
}

// NEURON_ROOT stands in for --root (DESIGN "The root convention").
TEST_F(LsTest, RootFromEnvironment) {
  Node n = Inf2();
  const RunResult r = RunCommand(work_.path(), {NEURON_LS_BIN}, {"NEURON_ROOT=" + n.root.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("instance-type: inf2.48xlarge\n"));
}

// A device node missing under ROOT/dev (a container without the devices) is named on stderr;
// the table still comes from sysfs.
TEST_F(LsTest, MissingDeviceNodesAreReported) {
  Node n = Inf2();
  fs::remove(n.root / "dev/neuron3");
  const RunResult r = Ls(n.root, {});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("neuron3"));
  EXPECT_THAT(r.out, HasSubstr("| 3      | 2      | 6-7      | 32 GB  |"));
}

// TOOLS-UX Q4: 16 at once, all complete with the same output (read-only, no device opened).
TEST_F(LsTest, SixteenConcurrentRunsAgree) {
  Node n = Trn2();
  std::vector<pid_t> pids;
  std::vector<fs::path> outs;
  for (int i = 0; i < 16; ++i) {
    outs.push_back(work_.path() / ("concurrent." + std::to_string(i)));
    pids.push_back(Spawn({NEURON_LS_BIN, "--root", n.root.string(), "--wide"}, outs.back(), ""));
  }
  for (const pid_t pid : pids) EXPECT_EQ(WaitExit(pid, std::chrono::seconds(120)), 0);
  const std::string first = ReadFile(outs.front());
  EXPECT_THAT(first, HasSubstr("268911"));
  for (const fs::path& o : outs) EXPECT_EQ(ReadFile(o), first) << o;
}

}  // namespace
}  // namespace neuron::top

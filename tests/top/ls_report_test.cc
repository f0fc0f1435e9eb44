// neuron-ls's report and formats (top/ls_report.h) on simulated trn1.32xlarge, trn2.48xlarge and
// inf2.48xlarge trees with runtime processes: datastores from FakeDatastores (the tool reads them
// through the driver's device ABI, which tests/top/live_test.cc exercises end to end), command
// lines and open device files in a fake ROOT/proc. Every format is compared with a golden file
// under tests/fixtures/top/ (NEURON_UPDATE_GOLDENS=1 rewrites them), and the rows docs/tools-ux.md
// prints for trn2 are checked literally against the document.

#include "top/ls_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <nlohmann/json.hpp>

#include "tests/support/fake_datastores.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"

namespace neuron::top {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using ::neuron::top::testing::AddFakeProcess;
using ::neuron::top::testing::ExpectGolden;
using ::neuron::top::testing::MakeTree;
using ::neuron::top::testing::ScanTree;

// The sample process of docs/tools-ux.md#ls-wide, whose command is long enough to be cut at 40 and
// 80.
constexpr int kBenchPid = 268911;
constexpr int kLsPid = 269192;
const std::vector<std::string> kBenchArgv{
    "neuron-bench",           "exec", "--run-as-cc-neff", "--warmup", "none",
    "--fixed-instance-count", "64",   "--iterations",     "10000",    "/models/llama.neff"};

struct Node {
  std::unique_ptr<::neuron::testing::TempDir> dir;
  fs::path root;
  std::string instance;
  std::unique_ptr<sim::SimTree> tree;
  std::shared_ptr<::neuron::testing::FakeDatastores> datastores =
      ::neuron::testing::FakeDatastores::Make();
};

Node MakeNode(const std::string& instance) {
  Node n;
  n.dir = std::make_unique<::neuron::testing::TempDir>("ls_report");
  n.root = n.dir->path();
  n.instance = instance;
  n.tree = MakeTree(n.root, instance);
  return n;
}

// Character devices every Linux host has stand in for device nodes in the fake ROOT/proc: -a
// finds holders by the number an fd/ link leads to (ProcReader::HoldersOf), not by its path.
const std::map<int, std::string> kStandIns = {
    {0, "/dev/zero"}, {3, "/dev/random"}, {8, "/dev/full"}};

std::string HeldNode(int device) {
  const auto it = kStandIns.find(device);
  return it != kStandIns.end() ? it->second : "/dev/neuron" + std::to_string(device);
}

// LsSources::device_numbers: a stand-in's number, or one no file here has.
std::vector<absl::StatusOr<dev_t>> Numbers(const Inventory& inv) {
  std::vector<absl::StatusOr<dev_t>> out;
  for (const NeuronDevice& d : inv.devices) {
    struct stat st {};
    const auto it = kStandIns.find(d.index);
    if (it != kStandIns.end() && ::stat(it->second.c_str(), &st) == 0) {
      out.emplace_back(st.st_rdev);
    } else {
      out.emplace_back(makedev(4094, static_cast<unsigned>(d.index)));
    }
  }
  return out;
}

// A runtime on `devices` whose records libnrt reads with `version`.
void AddRuntime(Node& n, int pid, const std::vector<int>& devices, NdsVersion version) {
  for (const int d : devices) {
    n.datastores->Add(d, pid);
    n.datastores->SetRecords(d, pid).process.runtime_version = version;
  }
}

// trn2.48xlarge as in docs/tools-ux.md#ls-wide: the benchmark on every device, and a `neuron-ls -a`
// holding device 0 open without a datastore.
Node Trn2() {
  Node n = MakeNode("trn2.48xlarge");
  std::vector<int> all;
  std::vector<std::string> nodes;
  for (int d = 0; d < 16; ++d) {
    all.push_back(d);
    nodes.push_back(HeldNode(d));
  }
  AddRuntime(n, kBenchPid, all, {2, 0, 0});
  AddFakeProcess(n.root, {kBenchPid, kBenchArgv, nodes});
  AddFakeProcess(n.root, {kLsPid, {"neuron-ls", "--show-all-procs"}, {HeldNode(0)}});
  return n;
}

// trn1.32xlarge: a training job on devices 0-3 (two processes on device 0), idle devices
// elsewhere, and a monitor holding device 8 open.
Node Trn1() {
  Node n = MakeNode("trn1.32xlarge");
  AddRuntime(n, 4711, {0, 1, 2, 3}, {2, 21, 33});
  AddRuntime(n, 4712, {0}, {2, 21, 33});
  AddFakeProcess(n.root, {4711,
                          {"/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node",
                           "32", "ray_train_llama2.py", "--model", "llama2-7b", "--tp", "8"},
                          {HeldNode(0), HeldNode(1), HeldNode(2), HeldNode(3)}});
  AddFakeProcess(n.root, {4712, {"python3", "eval.py"}, {HeldNode(0)}});
  AddFakeProcess(n.root, {5150, {"neuron-monitor", "-c", "/etc/monitor.conf"}, {HeldNode(8)}});
  return n;
}

// inf2.48xlarge: one inference server on device 5 whose /proc entry is gone (command NA).
Node Inf2() {
  Node n = MakeNode("inf2.48xlarge");
  AddRuntime(n, 777, {5}, {2, 19, 5});
  AddFakeProcess(n.root, {778, {"unrelated"}, {}});  // ROOT/proc exists, 777 is not in it
  return n;
}

struct Options {
  bool processes = true;  // false: the default and --topology formats (no live data read)
  bool all = false;
  int lnc = 0;
  std::optional<std::string> unavailable;  // live data could not be read, and why
};

// What neuron-ls --root n.root builds, as ls_main.cc puts it together.
LsReport Report(const Node& n, const Options& o = {}) {
  const Inventory inv = ScanTree(*n.tree, o.lnc);
  std::vector<DatastoreRecord> records;
  if (!o.unavailable) records = n.datastores->Reader()->ReadAll().records;
  const RuntimeRecordsScan runtime = n.datastores->Records()->Latest();
  const ProcReader proc{RootPaths(n.root)};
  LsSources src;
  src.inventory = &inv;
  src.datastores = o.processes ? &records : nullptr;
  src.runtime_records = &runtime;
  src.live_data_unavailable = o.unavailable;
  src.proc = &proc;
  src.all_processes = o.all;
  src.self_pid = ::getpid();
  src.device_numbers = Numbers(inv);
  return BuildLsReport(src);
}

std::string Text(const Node& n, LsFormat format) {
  Options o;
  o.processes = format != LsFormat::kDefault && format != LsFormat::kTopology;
  o.all = format == LsFormat::kAllProcs || format == LsFormat::kWideAllProcs;
  return RenderLsText(Report(n, o), format);
}

std::string Json(const Node& n) { return RenderLsJson(Report(n)); }

void Goldens(const std::string& name, const Node& n) {
  ExpectGolden("top/" + name + ".default.txt", Text(n, LsFormat::kDefault));
  ExpectGolden("top/" + name + ".wide.txt", Text(n, LsFormat::kWide));
  ExpectGolden("top/" + name + ".show-all-procs.txt", Text(n, LsFormat::kAllProcs));
  ExpectGolden("top/" + name + ".json", Json(n));
  ExpectGolden("top/" + name + ".topology.txt", Text(n, LsFormat::kTopology));
}

TEST(LsReportTest, Trn1Goldens) { Goldens("trn1.32xlarge", Trn1()); }

TEST(LsReportTest, Trn2Goldens) { Goldens("trn2.48xlarge", Trn2()); }

TEST(LsReportTest, Inf2Goldens) { Goldens("inf2.48xlarge", Inf2()); }

// docs/tools-ux.md#ls-default, rows 0-3 and 15 of the current default table, byte for byte.
TEST(LsReportTest, Trn2DefaultTableMatchesTheDocument) {
  const std::string out = Text(Trn2(), LsFormat::kDefault);
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

// docs/tools-ux.md#ls-wide, --wide and --show-all-procs.
TEST(LsReportTest, Trn2WideAndAllProcsMatchTheDocument) {
  const Node n = Trn2();
  EXPECT_THAT(
      Text(n, LsFormat::kWide),
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
  EXPECT_THAT(Text(n, LsFormat::kAllProcs),
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

// docs/tools-ux.md#ls-topology: the 4x4 torus drawing of the trn2 sample, lines padded to 40
// columns.
TEST(LsReportTest, TorusDrawingMatchesTheDocument) {
  const std::string out = Text(Trn2(), LsFormat::kTopology);
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

// docs/tools-ux.md#ls-json: field names and JSON types.
TEST(LsReportTest, JsonFieldsAndTypes) {
  const nlohmann::json j = nlohmann::json::parse(Json(Trn2()));
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
  EXPECT_FALSE(d0.contains("live_data_unavailable"));
}

// docs/architecture.md#unknown-is-not-zero: when the runtimes' live data cannot be read, process
// cells are unknown, never "idle": NA in the table, null in JSON with the reason beside it. -a
// still lists what holds a device, from /proc, with no runtime version.
TEST(LsReportTest, UnavailableLiveDataIsUnknownNotIdle) {
  const Node n = Trn1();
  Options o;
  o.unavailable = "/x/dev/neuron0: no Neuron driver answers its ioctls (Inappropriate ioctl)";
  const LsReport wide = Report(n, o);
  EXPECT_EQ(wide.live_data_unavailable, o.unavailable);
  EXPECT_THAT(RenderLsText(wide, LsFormat::kWide),
              HasSubstr("| 0      | 2      | 32 GB  | 12, 3, 4, 1   | 10:1c.0 | NA  | NA      | "
                        "NA      |\n"));
  const nlohmann::json j = nlohmann::json::parse(RenderLsJson(wide));
  EXPECT_TRUE(j[0]["neuron_processes"].is_null());
  EXPECT_EQ(j[0]["live_data_unavailable"], *o.unavailable);

  o.all = true;
  const LsReport all = Report(n, o);
  ASSERT_EQ(all.devices[0].processes.size(), 2u);
  EXPECT_EQ(all.devices[0].processes[0].pid, 4711);
  EXPECT_EQ(all.devices[0].processes[0].runtime_version, "NA");
  EXPECT_EQ(all.devices[0].processes[1].command, "python3 eval.py");
  ASSERT_EQ(all.devices[8].processes.size(), 1u);
  EXPECT_EQ(all.devices[8].processes[0].pid, 5150);
  const nlohmann::json ja = nlohmann::json::parse(RenderLsJson(all));
  EXPECT_EQ(ja[8]["neuron_processes"].size(), 1u);
  EXPECT_EQ(ja[9]["neuron_processes"], nlohmann::json::array());  // looked: nothing holds it
}

// -a finds a holder by the device's number whatever the fd/ link's path says: a container
// names the host's neuron3 /dev/neuron0, and the simulator's processes name it ROOT/dev/neuron3.
// A device whose number is unknown is said, not taken for one nobody holds.
TEST(LsReportTest, AllProcsFindsHoldersByNumberNotPath) {
  Node n = Inf2();
  const fs::path container_dev = n.dir->path() / "container/dev/neuron0";
  fs::create_directories(container_dev.parent_path());
  fs::create_symlink(HeldNode(3), container_dev);
  AddFakeProcess(n.root, {4242, {"holder"}, {container_dev.string()}});
  const Inventory inv = ScanTree(*n.tree);
  const ProcReader proc{RootPaths(n.root)};
  LsSources src;
  src.inventory = &inv;
  const std::vector<DatastoreRecord> none;
  src.datastores = &none;
  src.proc = &proc;
  src.all_processes = true;
  src.device_numbers = Numbers(inv);
  src.device_numbers[1] = absl::NotFoundError("open neuron1/dev: No such file or directory");
  const LsReport r = BuildLsReport(src);
  ASSERT_EQ(r.devices[3].processes.size(), 1u);
  EXPECT_EQ(r.devices[3].processes[0].pid, 4242);
  EXPECT_TRUE(r.devices[0].processes.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_THAT(r.notes[0], HasSubstr("cannot tell which processes hold neuron1"));
}

// DeviceNumbers reads the class devices' `dev` files, which the simulator writes as the driver
// does ("<major>:<index>").
TEST(LsReportTest, DeviceNumbersComeFromTheClassDevices) {
  const Node n = Inf2();
  const Inventory inv = ScanTree(*n.tree);
  const std::vector<absl::StatusOr<dev_t>> numbers = DeviceNumbers(inv, RootPaths(n.root));
  ASSERT_EQ(numbers.size(), inv.devices.size());
  for (size_t i = 0; i < numbers.size(); ++i) {
    ASSERT_TRUE(numbers[i].ok()) << numbers[i].status();
    EXPECT_EQ(minor(*numbers[i]), static_cast<unsigned>(inv.devices[i].index));
  }
}

// Runtime versions come only from the runtime's process record read through libnrt (no guessing
// from the RUNTIME_VERSION word, whose packing is unverified: docs/tools-ux.md#ls-sources); a
// process whose records are unknown shows NA.
TEST(LsReportTest, RuntimeVersionOnlyFromTheProcessRecord) {
  Node n = Inf2();
  ASSERT_TRUE(
      n.datastores->Add(2, 999).SetDeviceCounter(nds::kRuntimeVersion, (2ull << 40) | 7).ok());
  const LsReport r = Report(n);
  ASSERT_EQ(r.devices[2].processes.size(), 1u);
  EXPECT_EQ(r.devices[2].processes[0].runtime_version, "NA");
  EXPECT_EQ(r.devices[5].processes[0].runtime_version, "2.19.5");
}

// The ring and chain drawings and the single-device case (docs/tools-ux.md#ls-topology,
// #top-trn1-layout neighbours).
TEST(LsReportTest, RingChainAndUnlinkedDrawings) {
  const Node inf2 = Inf2();
  EXPECT_THAT(Text(inf2, LsFormat::kTopology),
              HasSubstr("Neuron Device Topology\n\n"
                        "    [ 0 ]◄––►[ 1 ]◄––►[ 2 ]◄––►[ 3 ]◄––►[ 4 ]◄––►[ 5 ]\n"
                        "      ▲                                            ▲  \n"
                        "      │                                            │  \n"
                        "      ▼                                            ▼  \n"
                        "    [11 ]◄––►[10 ]◄––►[ 9 ]◄––►[ 8 ]◄––►[ 7 ]◄––►[ 6 ]\n"));
  // The ring's neighbours as the driver lists them: [prev, next].
  EXPECT_THAT(Text(inf2, LsFormat::kDefault),
              HasSubstr("| 0      | 2      | 0-1      | 32 GB  | 11, 1"));

  const Node chain = MakeNode("inf2.24xlarge");
  const std::string chain_out = Text(chain, LsFormat::kTopology);
  EXPECT_THAT(chain_out, HasSubstr("Neuron Device Topology\n\n"
                                   "  [ 0 ]◄––►[ 1 ]◄––►[ 2 ]◄––►[ 3 ]◄––►[ 4 ]◄––►[ 5 ]\n"));
  ExpectGolden("top/inf2.24xlarge.topology.txt", chain_out);

  const Node single = MakeNode("trn1.2xlarge");
  const std::string single_out = Text(single, LsFormat::kTopology);
  EXPECT_THAT(single_out, HasSubstr("[ 0 ]  (no NeuronLink)\n"));
  ExpectGolden("top/trn1.2xlarge.topology.txt", single_out);
}

// docs/architecture.md#lnc: the LNC given overrides the node's on trn2.
TEST(LsReportTest, LncOverride) {
  const Node n = Trn2();
  Options o;
  o.processes = false;
  o.lnc = 1;
  const std::string out = RenderLsText(Report(n, o), LsFormat::kDefault);
  EXPECT_THAT(out, HasSubstr("logical-neuroncore-config: 1\n"));
  EXPECT_THAT(out, HasSubstr("| 0      | 8      | 0-7      | 96 GB  |"));
  EXPECT_THAT(out, HasSubstr("| 15     | 8      | 120-127  | 96 GB  |"));
}

// The header's UltraServer line (docs/tools-ux.md#neuron-ls): each configuration the driver's class
// attributes place the node in, and no line on a node in none or while unknown.
TEST(LsReportTest, UltraServerLineOnlyOnANodeInAnUltraServer) {
  LsReport r;
  r.instance_type = "trn2u.48xlarge";
  r.instance_id = "i-0123456789abcdef0";
  r.lnc = 2;
  r.lnc_applies = true;
  r.inventory.ultraserver = UltraServerInfo{
      {1, 3, 4}, {{4, "x4", 2, "0123456789abcdef"}, {2, "x2v", 0, "0123456789abcdee"}}};
  EXPECT_THAT(RenderLsText(r, LsFormat::kDefault),
              ::testing::StartsWith("instance-type: trn2u.48xlarge\n"
                                    "instance-id: i-0123456789abcdef0\n"
                                    "logical-neuroncore-config: 2\n"
                                    "ultraserver: x4 node 2 server 0123456789abcdef, x2v node 0 "
                                    "server 0123456789abcdee\n"));
  r.inventory.ultraserver->memberships.clear();
  EXPECT_THAT(RenderLsText(r, LsFormat::kDefault), ::testing::Not(HasSubstr("ultraserver")));
  r.inventory.ultraserver.reset();
  EXPECT_THAT(RenderLsText(r, LsFormat::kTopology), ::testing::Not(HasSubstr("ultraserver")));
}

// docs/tools-ux.md#ls-json-object: the node's facts above the -j array; each unknown fact a null
// under its key, an UltraServer in none an empty list, a mode a newer driver adds its number.
TEST(LsReportTest, JsonObjectNullsWhatIsUnknown) {
  const Node n = Trn2();
  LsReport r = Report(n);
  r.instance_id.clear();
  r.driver_version.clear();
  r.inventory.ultraserver.reset();
  const nlohmann::json unknown = nlohmann::json::parse(RenderLsJsonObject(r));
  EXPECT_EQ(unknown["instance_type"], "trn2.48xlarge");
  for (const char* key : {"instance_id", "driver_version", "ultraserver"}) {
    ASSERT_TRUE(unknown.contains(key)) << key;
    EXPECT_TRUE(unknown[key].is_null()) << key;
  }
  // The devices are -j's objects and the published attributes, each key there and null when
  // its file could not be read.
  nlohmann::json devices = unknown["neuron_devices"];
  for (nlohmann::json& d : devices) {
    for (const DeviceAttributeSpec& a : kDeviceAttributes) {
      ASSERT_TRUE(d.contains(a.key)) << a.key;
      d.erase(std::string(a.key));
    }
  }
  EXPECT_EQ(devices, nlohmann::json::parse(RenderLsJson(r)));
  r.devices[0].attributes = DeviceAttributes();
  EXPECT_TRUE(
      nlohmann::json::parse(RenderLsJsonObject(r))["neuron_devices"][0]["serial_number"].is_null());

  r.inventory.ultraserver = UltraServerInfo{{1, 5}, {}};
  const nlohmann::json none = nlohmann::json::parse(RenderLsJsonObject(r));
  EXPECT_EQ(none["ultraserver"],
            nlohmann::json::parse(R"({"supported_modes": ["x4", "5"], "memberships": []})"));
}

}  // namespace
}  // namespace neuron::top

// neuron-ls and neuron-top, the real binaries, against a running simulated trn1.2xlarge
// (`neuron-sim up`) whose two NeuronCores a `neuron-sim run --workload matmul` keeps busy. The
// tools read live data only through the driver's device ABI (docs/architecture.md#device-abi),
// which the simulator serves to processes under `neuron-sim exec`:
//   - under exec they show the runtime (PID, command, runtime version) and its utilization;
//   - the same binaries without exec cannot (their ioctls reach a plain file), say so with the
//     reason, and show no utilization figure rather than zeros
//     (docs/architecture.md#unknown-is-not-zero);
//   - `neuron-ls -a` lists a process that merely holds a device open, found through /proc;
//   - a normal user, who cannot read the root-only core_count, still gets the table, with the
//     catalog's core count and a line naming the file and the error.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/support/suite_node.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"

namespace neuron::top {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;
using ::neuron::testing::ReadFile;
using ::neuron::testing::RunCommand;
using ::neuron::testing::RunResult;
using ::neuron::testing::SimNode;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::WaitExit;
using ::neuron::testing::WaitUntil;

// One node and one workload for the whole suite: starting them costs seconds.
class LiveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Driver 2.27, the last whose core_count is root-only (0444 from 2.28,
    // docs/driver-interface.md#driver-generations): NormalUserGetsTheCatalogsCoreCount needs it.
    suite_ = new ::neuron::testing::SuiteNode("live", "trn1.2xlarge", NEURON_SIM_BIN,
                                              {"--driver-version", "2.27"});
    dir_ = &suite_->dir();
    node_ = &suite_->node();
    if (node_->ready()) runtime_ = node_->StartWorkload("0-1");
  }
  static void TearDownTestSuite() { delete suite_; }
  void SetUp() override {
    ASSERT_TRUE(node_->ready()) << node_->Log();
    ASSERT_GT(runtime_, 0) << "the workload did not complete a step";
  }

  static std::string Root() { return node_->root().string(); }
  static std::string Node0() { return (node_->root() / "dev/neuron0").string(); }
  // The text of the table cell that follows `prefix` on its row, without padding or the
  // ellipsis of a cut; empty when no row has it.
  static std::string CellAfter(const std::string& table, const std::string& prefix) {
    const size_t at = table.find(prefix);
    if (at == std::string::npos) return "";
    const size_t begin = at + prefix.size();
    std::string cell = table.substr(begin, table.find(" |", begin) - begin);
    const std::string ellipsis = "...";
    if (cell.ends_with(ellipsis)) cell.resize(cell.size() - ellipsis.size());
    while (!cell.empty() && cell.back() == ' ') cell.pop_back();
    return cell;
  }
  static RunResult Run(const std::vector<std::string>& args) {
    return RunCommand(dir_->path(), args);
  }
  static std::vector<std::string> Ls(const std::vector<std::string>& flags) {
    std::vector<std::string> args{NEURON_LS_BIN, "--root", Root()};
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }
  // With no agent at --agent (whatever this machine runs): health from neuron-top's own read.
  static std::vector<std::string> TopSnapshot(const std::string& log) {
    return {NEURON_TOP_BIN, "--root", Root(),       "--snapshot", "--delay", "1",
            "--agent",      Agent(),  "--log-file", log};
  }
  static std::string Agent() { return "unix:" + (dir_->path() / "no-agent.sock").string(); }
  // The grid's figures of a --snapshot document, all cores.
  static std::vector<nlohmann::json> Utilizations(const nlohmann::json& j) {
    std::vector<nlohmann::json> out;
    for (const auto& d : j["devices"]) {
      for (const auto& c : d["neuroncores"]) out.push_back(c["utilization_ratio"]);
    }
    return out;
  }

  static inline ::neuron::testing::SuiteNode* suite_ = nullptr;
  static inline ::neuron::testing::TempDir* dir_ = nullptr;
  static inline SimNode* node_ = nullptr;
  static pid_t runtime_;
};

pid_t LiveTest::runtime_ = -1;

TEST_F(LiveTest, LsUnderTheDriverShowsTheRuntime) {
  const RunResult r = Run(node_->UnderDriver(Ls({"--wide"})));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("unavailable")));
  EXPECT_THAT(r.out, HasSubstr("| " + std::to_string(runtime_) + " | "));
  // The workload's own command line (the table cuts it at the column's width).
  EXPECT_THAT(r.out, HasSubstr("neuron-sim run --root " + Root().substr(0, 10)));
  EXPECT_THAT(r.out, HasSubstr("| 2.28.0  |"));  // libnrt-sim's version, from its process record

  const RunResult json = Run(node_->UnderDriver(Ls({"--json-output"})));
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j[0]["neuron_processes"].size(), 1u) << json.out;
  EXPECT_EQ(j[0]["neuron_processes"][0]["pid"], runtime_);
  EXPECT_FALSE(j[0].contains("live_data_unavailable"));
}

TEST_F(LiveTest, LsWithoutTheDriverSaysWhyAndShowsNoProcess) {
  const RunResult r = Run(Ls({"--wide"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("neuron-ls: live process data unavailable: " + Node0() +
                               ": no Neuron driver answers its ioctls"));
  EXPECT_THAT(r.out, Not(HasSubstr(std::to_string(runtime_))));
  EXPECT_THAT(r.out, HasSubstr("| NA  | NA      | NA      |\n"));

  const RunResult json = Run(Ls({"--json-output"}));
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_TRUE(j[0]["neuron_processes"].is_null());
  EXPECT_THAT(j[0]["live_data_unavailable"].get<std::string>(),
              HasSubstr(Node0() + ": no Neuron driver answers its ioctls"));
}

TEST_F(LiveTest, TopUnderTheDriverShowsUtilizationAndTheProcess) {
  const RunResult r = Run(node_->UnderDriver(TopSnapshot((dir_->path() / "top1.log").string())));
  ASSERT_EQ(r.code, 0) << r.err;
  // Everything was read: stderr says only that health is this read's (docs/tools-ux.md#health).
  EXPECT_EQ(r.err, "neuron-top: health from this read only (agent at " + Agent() +
                       " not reachable: connect " + Agent() +
                       ": No such file or directory): ECC history and kernel-log records not "
                       "judged\n");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["health"]["source"], "this read only");
  EXPECT_EQ(j["health"]["devices"][0]["state"], "healthy");
  EXPECT_EQ(j["live_data"]["up"], true);
  EXPECT_EQ(j["runtime_attached"], true);
  for (const nlohmann::json& u : Utilizations(j)) {
    ASSERT_TRUE(u.is_number()) << j["devices"];
    EXPECT_GT(u.get<double>(), 0.0);
  }
  ASSERT_EQ(j["processes"].size(), 1u);
  EXPECT_EQ(j["processes"][0]["pid"], runtime_);
  EXPECT_THAT(j["processes"][0]["command"].get<std::string>(), HasSubstr("--workload matmul"));
  EXPECT_GT(j["processes"][0]["utilization_ratio"].get<double>(), 0.0);
  EXPECT_GT(j["processes"][0]["device_memory_bytes"].get<uint64_t>(), 0u);  // GET_ALL_APPS_INFO
}

TEST_F(LiveTest, TopWithoutTheDriverSaysWhyAndShowsNoFigures) {
  const RunResult r = Run(TopSnapshot((dir_->path() / "top2.log").string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("neuron-top: live data unavailable (utilization and processes "
                               "N/A): " +
                               Node0() + ": no Neuron driver answers its ioctls"));
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["live_data"]["up"], false);
  EXPECT_THAT(j["live_data"]["reason"].get<std::string>(), HasSubstr(Node0()));
  EXPECT_TRUE(j["runtime_attached"].is_null());
  EXPECT_TRUE(j["average_utilization_ratio"].is_null());
  for (const nlohmann::json& u : Utilizations(j)) EXPECT_TRUE(u.is_null()) << u;
  EXPECT_EQ(j["processes"], nlohmann::json::array());
}

// A raw opener (no datastore) appears with -a: the scan finds it in /proc by the device's number.
// Only under the driver is the simulator's node a device with a number (outside it, a plain
// file: docs/driver-interface.md#simulator-fidelity, D8 of driver-sim/README.md#deviations), so a
// plain run lists no holder.
TEST_F(LiveTest, AllProcsListsAProcessHoldingTheDevice) {
  const fs::path out = dir_->path() / "holder.out";
  const pid_t holder = Spawn(node_->UnderDriver({NEURON_FD_HOLDER_BIN, Node0()}), out, "");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("holding") != std::string::npos; },
                        ::neuron::testing::kSimReadyCeiling));
  const std::string row = "| " + std::to_string(holder) + " | ";
  const RunResult under = Run(node_->UnderDriver(Ls({"-a", "--wide"})));
  const RunResult plain = Run(Ls({"--show-all-procs"}));
  Stop(holder, std::chrono::seconds(30));
  ASSERT_EQ(under.code, 0) << under.err;
  EXPECT_THAT(under.out, HasSubstr("| " + std::to_string(runtime_) + " | "));
  // The command cell is cut at the column's width, and a checkout's path sets how long it is.
  const std::string command = std::string(NEURON_FD_HOLDER_BIN) + " " + Node0();
  const std::string cell = CellAfter(under.out, row);
  EXPECT_FALSE(cell.empty()) << under.out;
  EXPECT_EQ(command.substr(0, cell.size()), cell) << under.out;
  EXPECT_THAT(under.out, Not(HasSubstr("neuron-ls")));  // itself left out
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_THAT(plain.out, Not(HasSubstr(row)));
  EXPECT_THAT(plain.err, HasSubstr("processes are listed from their open device files only"));
}

// top/format.h, TerminalSafe: a process whose argv holds ESC[2J (clear the screen) and a C1 CSI
// (U+009B, and the raw byte 0x9b) cannot write to the terminal of whoever runs neuron-ls: its
// command shows them as visible escapes, in the table and in the JSON.
TEST_F(LiveTest, AProcessCommandLineCannotWriteToTheTerminal) {
  const fs::path out = dir_->path() / "hostile.out";
  // bash's `exec -a` sets the holder's argv[0], so the escapes open its command line.
  // C++ would read "\x9b31m" as one escape: the bytes after one are added separately.
  const std::string argv0 = std::string("\x1b[2J\xc2\x9b") + "31mX\x9b" + "1m";
  const pid_t holder = Spawn(node_->UnderDriver({"bash", "-c", "exec -a \"$0\" \"$1\" \"$2\"",
                                                 argv0, NEURON_FD_HOLDER_BIN, Node0()}),
                             out, "");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("holding") != std::string::npos; },
                        ::neuron::testing::kSimReadyCeiling));
  const RunResult table = Run(node_->UnderDriver(Ls({"-a", "--wide"})));
  const RunResult json = Run(node_->UnderDriver(Ls({"-a", "-j"})));
  Stop(holder, std::chrono::seconds(30));
  ASSERT_EQ(table.code, 0) << table.err;
  ASSERT_EQ(json.code, 0) << json.err;
  const std::string shown =
      "\\x1b[2J\\x9b31mX\xef\xbf\xbd"
      "1m";
  const std::string cell = CellAfter(table.out, "| " + std::to_string(holder) + " | ");
  EXPECT_TRUE(cell.starts_with(shown)) << table.out;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  std::string command;
  for (const auto& d : doc) {
    for (const auto& p : d["neuron_processes"]) {
      if (p["pid"] == holder) command = p["command"];
    }
  }
  EXPECT_TRUE(command.starts_with(shown)) << command;
  for (const std::string* text : {&table.out, &json.out}) {
    for (const std::string_view raw : {"\x1b", "\x9b"}) {
      EXPECT_EQ(text->find(raw), std::string::npos) << "a raw control byte reached the terminal";
    }
  }
}

// docs/tools-ux.md Q4: concurrent runs all complete with the same output. The table opens no
// device, so any number agree. The process columns open each device (one of its 16 process slots,
// as on hardware): 12 at once beside the runtime stay clear of the reader's rule that keeps two
// slots free, so each of them reads the runtime's datastore.
TEST_F(LiveTest, ConcurrentRunsAgree) {
  for (const auto& [flags, runs] : {std::pair<std::vector<std::string>, int>{{}, 16},
                                    std::pair<std::vector<std::string>, int>{{"--wide"}, 12}}) {
    std::vector<pid_t> pids;
    std::vector<fs::path> outs;
    for (int i = 0; i < runs; ++i) {
      outs.push_back(dir_->path() / ("concurrent." + std::to_string(i)));
      pids.push_back(Spawn(node_->UnderDriver(Ls(flags)), outs.back(), ""));
    }
    for (const pid_t pid : pids) EXPECT_EQ(WaitExit(pid, std::chrono::seconds(120)), 0);
    const std::string first = ReadFile(outs.front());
    EXPECT_THAT(first, HasSubstr("| 0      | 2      |"));
    if (!flags.empty()) {
      EXPECT_THAT(first, HasSubstr(std::to_string(runtime_)));
    }
    for (const fs::path& o : outs) EXPECT_EQ(ReadFile(o), first) << o;
  }
}

// A normal user reads what a normal user can: core_count (0400) comes from the catalog, the
// problem is named, and live data still flows through the device nodes (0666 on a node).
// CI runs as root, so the test drops privileges (docs/build.md#sanitizers).
TEST_F(LiveTest, NormalUserGetsTheCatalogsCoreCount) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop privileges with setpriv";
  fs::permissions(dir_->path(), fs::perms::owner_all | fs::perms::group_read |
                                    fs::perms::group_exec | fs::perms::others_read |
                                    fs::perms::others_exec);
  const fs::path logs = dir_->path() / "nobody";
  fs::create_directories(logs);
  fs::permissions(logs, fs::perms::all);
  const std::vector<std::string> nobody{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                        "--clear-groups"};
  auto as_nobody = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = nobody;
    const std::vector<std::string> under = node_->UnderDriver(args);
    argv.insert(argv.end(), under.begin(), under.end());
    return Run(argv);
  };
  const std::string core_count =
      (node_->root() / "sys/class/neuron_device/neuron0/core_count").string();

  const RunResult ls = as_nobody(Ls({"--wide"}));
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_THAT(ls.out, HasSubstr("| 0      | 2      | 32 GB  |"));
  EXPECT_THAT(ls.out, HasSubstr("| " + std::to_string(runtime_) + " | "));
  EXPECT_THAT(ls.err, HasSubstr("cannot read " + core_count + ": Permission denied"));
  EXPECT_THAT(ls.err, HasSubstr("NeuronCore counts come from the instance catalog (trn1.2xlarge"));

  const RunResult top = as_nobody(TopSnapshot((logs / "top.log").string()));
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_THAT(top.err, HasSubstr("neuron-top: cannot read " + core_count + ": Permission denied"));
  const nlohmann::json j = nlohmann::json::parse(top.out);
  EXPECT_EQ(j["neuroncores_per_device"], 2);
  EXPECT_THAT(j["notes"].dump(), HasSubstr(core_count));
  const std::vector<nlohmann::json> utils = Utilizations(j);
  ASSERT_EQ(utils.size(), 2u);
  for (const nlohmann::json& u : utils) EXPECT_GT(u.get<double>(), 0.0) << j["devices"];
}

}  // namespace
}  // namespace neuron::top

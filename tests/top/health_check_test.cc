// neuron-ls --health-check, the real binary, on a simulated trn1.32xlarge (`neuron-sim up`) with
// the programs `neuron-sim health-programs` writes, run under `neuron-sim exec` with the
// simulator's full libnrt.so.1 (driver-sim/runtime/CMakeLists.txt, nrt_full) named by --libnrt:
//   - a healthy node passes every device and link, records the baseline, and a later run
//     compares against it (a baseline made tiny fails the programs "slow");
//   - `ctl inject sdc` (one flipped output bit) and `inject hbm-ue` fail that device only;
//   - a downed NeuronLink fails that link only;
//   - a device held open by a process and one whose withhold lock is held are skipped, and when
//     every requested device is skipped the exit code is 7; --withheld-by-caller checks the
//     device whose lock the caller holds;
//   - without programs the exit code is 6 and one line says what to provide.
// Each test uses its own devices, so the faults one injects do not reach another's.

#include "top/health_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/node/withhold.h"
#include "tests/support/sanitizer.h"
#include "tests/support/suite_node.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"

namespace neuron::top {
namespace {

using ::neuron::testing::kSanitizerSlowdown;
using ::neuron::testing::ReadFile;
using ::neuron::testing::RunCommand;
using ::neuron::testing::RunResult;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::WaitUntil;
using ::testing::HasSubstr;
namespace fs = std::filesystem;
using json = nlohmann::json;

class HealthCheckTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_ = new ::neuron::testing::SuiteNode("health-check", "trn1.32xlarge", NEURON_SIM_BIN);
    if (!suite_->node().ready()) return;
    programs_ = new fs::path(suite_->dir().path() / "programs");
    const RunResult w = RunCommand(
        suite_->dir().path(), {NEURON_SIM_BIN, "health-programs", "--out", programs_->string()});
    EXPECT_EQ(w.code, 0) << w.err;
  }
  static void TearDownTestSuite() {
    delete suite_;
    delete programs_;
  }
  void SetUp() override { ASSERT_TRUE(suite_->node().ready()) << suite_->node().Log(); }

  static ::neuron::testing::SimNode& Node() { return suite_->node(); }
  static fs::path Dir() { return suite_->dir().path(); }

  // neuron-ls --health-check under the simulated driver; `state` names the state directory. Under
  // a sanitizer each child (an instrumented neuron-ls loading an instrumented libnrt) starts tens
  // of times slower and shares 2 cores with the other tests: the timeout is raised so that only a
  // hang meets it, no further, since the downed-link tests wait for libnrt's own, 2 s inside it.
  static RunResult Check(const std::string& state, const std::vector<std::string>& flags,
                         const std::string& programs = "") {
    std::vector<std::string> args{NEURON_LS_BIN,
                                  "--root",
                                  Node().root().string(),
                                  "--health-check",
                                  "--programs",
                                  programs.empty() ? programs_->string() : programs,
                                  "--state-dir",
                                  (Dir() / state).string(),
                                  "--libnrt",
                                  NEURON_LIBNRT_FULL,
                                  "--agent",
                                  "unix:" + (Dir() / "no-agent.sock").string(),
                                  "--timeout",
                                  std::to_string(kProgramTimeout.count() * kSanitizerSlowdown)};
    args.insert(args.end(), flags.begin(), flags.end());
    return RunCommand(Dir(), Node().UnderDriver(args), {}, std::chrono::seconds(120));
  }
  static json Json(const RunResult& r) {
    json doc = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return doc;
  }
  static const json* Device(const json& doc, int device) {
    for (const json& d : doc["devices"]) {
      if (d["device"] == device) return &d;
    }
    return nullptr;
  }
  // `ctl` and the id of the fault it made ("fault #N ...").
  static int CtlFault(const std::vector<std::string>& args) {
    const RunResult r = Node().Ctl(args);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    std::smatch m;
    const std::string text = r.out;
    return std::regex_search(text, m, std::regex("#([0-9]+)")) ? std::stoi(m[1]) : -1;
  }

  static ::neuron::testing::SuiteNode* suite_;
  static fs::path* programs_;
};

::neuron::testing::SuiteNode* HealthCheckTest::suite_ = nullptr;
fs::path* HealthCheckTest::programs_ = nullptr;

TEST_F(HealthCheckTest, HealthyNodePassesEveryDeviceAndLinkAndRecordsTheBaseline) {
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = Check("healthy", {"--json-output"});
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::printf("health check of a trn1.32xlarge (16 devices, every link): %.2f s wall\n", wall);
  const json doc = Json(r);
  EXPECT_EQ(doc["verdict"], "passed");
  ASSERT_EQ(doc["devices"].size(), 16u);
  for (const json& d : doc["devices"]) {
    EXPECT_EQ(d["verdict"], "passed") << d.dump();
    EXPECT_EQ(d["cores"].size(), 2u) << d.dump();  // trn1: two NeuronCores per device
  }
  // trn1.32xlarge's 2D torus: four neighbours a device, 32 links.
  EXPECT_EQ(doc["links"].size(), 32u);
  for (const json& l : doc["links"]) EXPECT_EQ(l["verdict"], "passed") << l.dump();
  EXPECT_EQ(doc["baseline"]["state"], "recorded");
  const json base = json::parse(ReadFile(Dir() / "healthy/health-check/baseline.json"));
  EXPECT_GT(base["execute_us"]["matmul"].get<int64_t>(), 0);
  EXPECT_GT(base["execute_us"]["allgather"].get<int64_t>(), 0);

  // A later run compares against it: each result carries the baseline it was held to. Asked with
  // --output-format json, the check gives the JSON -j gives (docs/tools-ux.md#ls-options).
  const RunResult again = Check("healthy", {"--output-format", "json", "--device", "0"});
  ASSERT_EQ(again.code, 0) << again.out << again.err;
  const json doc2 = Json(again);
  EXPECT_EQ(doc2["baseline"]["state"], "compared");
  EXPECT_EQ(doc2["devices"][0]["cores"][0]["baseline_us"], base["execute_us"]["matmul"]);
}

TEST_F(HealthCheckTest, AProgramSlowerThanTheBaselineFails) {
  fs::create_directories(Dir() / "slow/health-check");
  std::ofstream(Dir() / "slow/health-check/baseline.json")
      << R"({"version": 1, "slow_factor": 1.0, "slow_margin_us": 0, "execute_us": {"matmul": 1}})";
  const RunResult r = Check("slow", {"--json-output", "--device", "1"});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const json doc = Json(r);
  EXPECT_EQ(doc["devices"][0]["verdict"], "failed");
  EXPECT_EQ(doc["devices"][0]["cores"][0]["failure"], "slow") << r.out;
}

TEST_F(HealthCheckTest, SilentDataCorruptionFailsThatDevice) {
  CtlFault({"inject", "sdc", "--device", "2", "--core", "1"});
  const RunResult r = Check("sdc", {"--json-output", "--device", "2", "--device", "3"});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const json doc = Json(r);
  const json* bad = Device(doc, 2);
  ASSERT_NE(bad, nullptr) << r.out;
  EXPECT_EQ((*bad)["verdict"], "failed");
  EXPECT_EQ((*bad)["cores"][0]["verdict"], "passed");
  EXPECT_EQ((*bad)["cores"][1]["failure"], "mismatch");
  EXPECT_THAT((*bad)["cores"][1]["detail"].get<std::string>(), HasSubstr("differs at byte 0"));
  EXPECT_EQ((*Device(doc, 3))["verdict"], "passed");
}

TEST_F(HealthCheckTest, AnUncorrectableHbmErrorFailsThatDevice) {
  CtlFault({"inject", "hbm-ue", "--device", "4"});
  const RunResult r = Check("hbm", {"--device", "4"});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("NRT_EXEC_HW_ERR_HBM_UE"));
  EXPECT_THAT(r.out, HasSubstr("Verdict: failed: devices 0 passed, 1 failed"));
}

TEST_F(HealthCheckTest, ADownedLinkFailsThatLinkOnly) {
  // Devices 5 and 6 are neighbours on trn1.32xlarge's torus (each row of four is a ring).
  const int id = CtlFault({"link-down", "--device", "5", "--peer", "6"});
  const RunResult r =
      Check("link", {"--json-output", "--device", "5", "--device", "6", "--device", "7"});
  Node().Ctl({"clear-fault", "--id", std::to_string(id)});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const json doc = Json(r);
  for (const json& d : doc["devices"]) EXPECT_EQ(d["verdict"], "passed") << d.dump();
  int failed = 0;
  for (const json& l : doc["links"]) {
    const bool down = l["devices"] == json::array({5, 6});
    EXPECT_EQ(l["verdict"], down ? "failed" : "passed") << l.dump();
    // libnrt's own error, within the check's timeout (NEURON_RT_EXEC_TIMEOUT set inside it).
    if (down) {
      EXPECT_THAT(l["detail"].get<std::string>(), HasSubstr("NRT_EXEC_HW_ERR_COLLECTIVES"));
    }
    failed += l["verdict"] == "failed" ? 1 : 0;
  }
  EXPECT_EQ(failed, 1) << r.out;
}

// One device's check (as a reset runs it) exchanges with each of its NeuronLink neighbours,
// withholding them for the while: a downed link to one fails it.
TEST_F(HealthCheckTest, OneDevicesCheckCoversItsLinksToEveryNeighbour) {
  const int id = CtlFault({"link-down", "--device", "5", "--peer", "6"});
  const RunResult r = Check("one", {"--json-output", "--device", "5"});
  Node().Ctl({"clear-fault", "--id", std::to_string(id)});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const json doc = Json(r);
  ASSERT_EQ(doc["devices"].size(), 1u);
  EXPECT_EQ(doc["devices"][0]["verdict"], "passed");
  std::set<int> peers;
  for (const json& l : doc["links"]) {
    const std::vector<int> ends = l["devices"];
    ASSERT_EQ(ends.size(), 2u);
    ASSERT_TRUE(ends[0] == 5 || ends[1] == 5) << l.dump();
    const int peer = ends[0] == 5 ? ends[1] : ends[0];
    peers.insert(peer);
    EXPECT_EQ(l["verdict"], peer == 6 ? "failed" : "passed") << l.dump();
  }
  EXPECT_EQ(peers, (std::set<int>{1, 4, 6, 9})) << "trn1.32xlarge's torus: four neighbours";
}

TEST_F(HealthCheckTest, BusyAndWithheldDevicesAreSkipped) {
  const std::string out = (Dir() / "holder.out").string();
  const std::string dev8 = (Node().root() / "dev/neuron8").string();
  const pid_t holder = Spawn(Node().UnderDriver({NEURON_FD_HOLDER_BIN, dev8}), out, "");
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(out).find("holding") != std::string::npos; },
                        ::neuron::testing::kSimReadyCeiling));
  absl::StatusOr<WithholdLock> lock =
      WithholdLock::Take(Node().root().string(), 9, WithholdLock::Mode::kExclusive);
  ASSERT_TRUE(lock.ok()) << lock.status();
  const RunResult r = Check("busy", {"--device", "8", "--device", "9"});
  // The caller that holds the lock checks the device with --withheld-by-caller.
  const RunResult caller = Check("busy", {"--device", "9", "--withheld-by-caller"});
  Stop(holder, std::chrono::seconds(30));
  EXPECT_EQ(r.code, 7) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("held open by PID " + std::to_string(holder)));
  EXPECT_THAT(r.out, HasSubstr("withheld by another holder"));
  EXPECT_THAT(r.err, HasSubstr("allocation could not be checked"));
  EXPECT_EQ(caller.code, 0) << caller.out << caller.err;
}

TEST_F(HealthCheckTest, NoProgramsExitsSixSayingWhatToProvide) {
  const std::string missing = (Dir() / "no-programs").string();
  const RunResult r = Check("none", {"--device", "10"}, missing);
  EXPECT_EQ(r.code, 6) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("no reference programs"));
  EXPECT_THAT(r.err, HasSubstr(missing + "/manifest.json"));
  EXPECT_THAT(r.err, HasSubstr("--programs DIR"));
  // A libnrt that cannot execute programs (the monitors' datastore-only one) is exit 6 too.
  std::vector<std::string> args{
      NEURON_LS_BIN,       "--root",   Node().root().string(),       "--health-check", "--programs",
      programs_->string(), "--libnrt", NEURON_LIBNRT_DATASTORE_ONLY, "--device",       "10"};
  const RunResult lib = RunCommand(Dir(), Node().UnderDriver(args));
  EXPECT_EQ(lib.code, 6) << lib.out << lib.err;
  EXPECT_THAT(lib.err, HasSubstr("no libnrt to run the programs"));
}

// A timeout shorter than libnrt's own 2 s margin would let the child be killed before libnrt can
// say what hung: the flag refuses it as a usage error.
TEST_F(HealthCheckTest, ATimeoutBelowLibnrtsMarginIsAUsageError) {
  const std::vector<std::string> args{NEURON_LS_BIN,
                                      "--root",
                                      Node().root().string(),
                                      "--health-check",
                                      "--programs",
                                      programs_->string(),
                                      "--device",
                                      "11",
                                      "--timeout",
                                      "2"};
  const RunResult r = RunCommand(Dir(), Node().UnderDriver(args));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("--timeout: Value 2 not in range 3 to 3600"));
}

}  // namespace
}  // namespace neuron::top

// Driver 2.30's health files on a simulated node (driver-sim/README.md#driver-versions,
// #ctl-protocol), through the real neuron-sim binary: the heartbeat the daemon advances once per
// period (stalled and resumed by ctl, paused by a reset, restarted by one), unhealthy_components
// set and cleared by ctl and following injected uncorrected errors, corrected ECC injection, and
// the refusals where the driver or the chip has no such files. Expected texts are written
// literally from the README, not recomputed by the code under test.

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using neuron::testing::ReadFile;
using neuron::testing::RunResult;
using neuron::testing::WaitUntil;

// A ceiling, not an expectation (docs/architecture.md#timing-in-tests): this machine is shared.
constexpr auto kHealthCeiling = 30s;

class SimHealthTest : public ::testing::Test {
 protected:
  // `neuron-sim up --instance <instance> --driver-version <version> <extra...>`, ready.
  void Up(std::string_view instance, std::string_view version,
          std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--driver-version", std::string(version)});
    node_ = std::make_unique<neuron::testing::SimNode>(
        neuron::testing::SimNodeOptions{.sim_bin = NEURON_SIM_BIN,
                                        .root = dir_.path() / "root",
                                        .logs = dir_.path() / "logs",
                                        .on_stop = neuron::testing::ExpectCleanExit});
    ASSERT_TRUE(node_->Up(instance, extra)) << node_->Log();
  }
  RunResult Ctl(const std::vector<std::string>& words) const { return node_->Ctl(words); }
  fs::path Health(int device, std::string_view file) const {
    return node_->Device(device) / "stats/hardware/health_status" / file;
  }
  // The heartbeat's count; every write is whole (renamed into place), so it always parses.
  uint64_t Beats(int device) const {
    const std::string text = ReadFile(Health(device, "healthcheck_heartbeat"));
    uint64_t v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return v;
  }
  std::string State(int device) const { return ReadFile(node_->Device(device) / "reset"); }

  neuron::testing::TempDir dir_{"health"};
  std::unique_ptr<neuron::testing::SimNode> node_;
};

TEST_F(SimHealthTest, HeartbeatAdvancesOncePerPeriodUntilStalled) {
  Up("trn2.48xlarge", "2.30", {"--heartbeat-period", "200ms"});
  ASSERT_TRUE(WaitUntil([&] { return Beats(0) >= 2; }, kHealthCeiling));
  // Never faster than the period; a late loop skips beats, so on a busy machine fewer.
  const auto start = std::chrono::steady_clock::now();
  const uint64_t before = Beats(0);
  std::this_thread::sleep_for(2s);
  const uint64_t beats = Beats(0) - before;
  const auto periods = (std::chrono::steady_clock::now() - start) / 200ms;
  EXPECT_LE(beats, static_cast<uint64_t>(periods) + 1);
  EXPECT_GE(beats, 3u);

  RunResult r = Ctl({"heartbeat", "stall", "--device", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  const uint64_t stalled = Beats(0);
  EXPECT_EQ(r.out, fmt::format("device 0: healthcheck_heartbeat stalled at {}\n", stalled));
  const uint64_t other = Beats(1);
  ASSERT_TRUE(WaitUntil([&] { return Beats(1) >= other + 5; }, kHealthCeiling));
  EXPECT_EQ(Beats(0), stalled) << "five periods later";
  EXPECT_THAT(Ctl({"status"}).out,
              ContainsRegex(fmt::format("\n +0 +0 +0 +{} +stalled +none\n", stalled)));
  r = Ctl({"heartbeat", "stall", "--device", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("device 0: healthcheck_heartbeat is already stalled"));

  r = Ctl({"heartbeat", "resume", "--device", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, fmt::format("device 0: healthcheck_heartbeat resumed at {}; it advances every "
                               "200 ms\n",
                               stalled));
  EXPECT_TRUE(WaitUntil([&] { return Beats(0) > stalled; }, kHealthCeiling));
  r = Ctl({"heartbeat", "resume", "--device", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("is not stalled"));
}

// A device in reset has no health check; a completed reset to READY restarts a stalled heartbeat.
TEST_F(SimHealthTest, ResetPausesTheHeartbeatAndRestartsAStalledOne) {
  Up("trn2.48xlarge", "2.30", {"--heartbeat-period", "100ms", "--reset-ms", "5000"});
  ASSERT_TRUE(WaitUntil([&] { return Beats(3) >= 1; }, kHealthCeiling));
  ASSERT_EQ(Ctl({"heartbeat", "stall", "--device", "2"}).code, 0);
  const uint64_t stalled = Beats(2);
  ASSERT_EQ(Ctl({"reset", "--device", "3"}).code, 0);
  ASSERT_EQ(Ctl({"reset", "--device", "2"}).code, 0);
  const uint64_t at_reset = Beats(3);
  const uint64_t other = Beats(0);
  ASSERT_TRUE(WaitUntil([&] { return Beats(0) >= other + 5; }, kHealthCeiling));
  const uint64_t during = Beats(3);
  // Read after the count: still RESET now means RESET then too.
  ASSERT_EQ(State(3), "0\n") << "the reset outlived 5 s before five 100 ms beats elsewhere";
  EXPECT_EQ(during, at_reset);
  EXPECT_THAT(Ctl({"status"}).out, ContainsRegex(fmt::format("\n +3 +0 +0 +{} +paused ", during)));

  ASSERT_TRUE(WaitUntil([&] { return State(2) == "1\n" && State(3) == "1\n"; }, kHealthCeiling));
  EXPECT_TRUE(WaitUntil([&] { return Beats(3) > during && Beats(2) > stalled; }, kHealthCeiling));
  EXPECT_THAT(Ctl({"status"}).out, ContainsRegex("\n +2 +0 +0 +[0-9]+ +advancing +none\n"));
}

TEST_F(SimHealthTest, ComponentsAreSetByCtlAndByInjectedErrorsAndClearedByAReset) {
  Up("trn2.48xlarge", "2.30", {"--reset-ms", "300"});
  const fs::path file = Health(1, "unhealthy_components");
  EXPECT_EQ(ReadFile(file), "\n");
  RunResult r = Ctl({"component", "set", "link_efa,hbm", "--device", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "device 1: stats/hardware/health_status/unhealthy_components is now hbm,link_efa\n");
  EXPECT_EQ(ReadFile(file), "hbm,link_efa\n");
  EXPECT_THAT(Ctl({"status"}).out, ContainsRegex("\n +1 +0 +0 +[0-9]+ +advancing +hbm,link_efa\n"));
  r = Ctl({"component", "clear", "--device", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ReadFile(file), "\n");
  r = Ctl({"component", "set", "hbm,gpu", "--device", "1"});
  EXPECT_EQ(r.code, 2);  // refused before it reaches the daemon
  EXPECT_THAT(r.err, HasSubstr("unknown component 'gpu'; known: hbm, sram, firmware_service_api"));

  // The driver's health check sees what its error counters see.
  r = Ctl({"inject", "hbm-ue", "--device", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("unhealthy_components is now hbm\n"));
  ASSERT_EQ(Ctl({"inject", "sram-ue", "--device", "4", "--count", "3"}).code, 0);
  EXPECT_EQ(ReadFile(Health(4, "unhealthy_components")), "hbm,sram\n");
  EXPECT_EQ(ReadFile(node_->Device(4) / "stats/hardware/sram_ecc_uncorrected"), "3\n");
  EXPECT_EQ(ReadFile(Health(4, "sram_ecc_err_count")), "3\n");
  const nlohmann::json faults =
      nlohmann::json::parse(ReadFile(dir_.path() / "root/run/neuron/faults.json"))["faults"];
  EXPECT_EQ(faults.size(), 2u) << "one pending fault per injection, whatever its count";
  ASSERT_EQ(Ctl({"inject", "nan", "--device", "5"}).code, 0);
  EXPECT_EQ(ReadFile(Health(5, "unhealthy_components")), "\n");

  // A completed reset is a fresh probe: nothing unhealthy.
  ASSERT_EQ(Ctl({"reset", "--device", "4"}).code, 0);
  ASSERT_TRUE(WaitUntil([&] { return State(4) == "1\n"; }, kHealthCeiling));
  EXPECT_EQ(ReadFile(Health(4, "unhealthy_components")), "\n");
}

// Corrected errors reach sysfs only; a Trn1 at 2.30 has them but no health_status/ files.
TEST_F(SimHealthTest, CorrectedErrorsCountOnlyInSysfsAndTrn1HasNoHealthFiles) {
  Up("trn1.2xlarge", "2.30");
  const fs::path hw = node_->Device(0) / "stats/hardware";
  RunResult r = Ctl({"inject", "hbm-ce", "--device", "0", "--count", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "device 0: stats/hardware/mem_ecc_corrected is now 3 (corrected: nothing pending for "
            "the runtime)\n");
  ASSERT_EQ(Ctl({"inject", "sram-ce", "--device", "0"}).code, 0);
  EXPECT_EQ(ReadFile(hw / "mem_ecc_corrected"), "3\n");
  EXPECT_EQ(ReadFile(hw / "sram_ecc_corrected"), "1\n");
  EXPECT_EQ(ReadFile(hw / "mem_ecc_uncorrected"), "0\n");
  EXPECT_TRUE(nlohmann::json::parse(ReadFile(dir_.path() / "root/run/neuron/faults.json"))["faults"]
                  .empty());
  EXPECT_THAT(Ctl({"status"}).out, ContainsRegex("\n +0 +1 +3 +- +- +-\n"));

  for (const std::vector<std::string>& words : std::vector<std::vector<std::string>>{
           {"heartbeat", "stall", "--device", "0"}, {"component", "set", "hbm", "--device", "0"}}) {
    r = Ctl(words);
    EXPECT_EQ(r.code, 1) << words[0];
    EXPECT_THAT(r.err,
                HasSubstr("device 0 has no stats/hardware/health_status/"
                          "unhealthy_components and healthcheck_heartbeat: driver 2.30 "
                          "writes them on Trn2 and Trn3 only, and a trn1.2xlarge is a Trn1"));
  }
  ASSERT_EQ(Ctl({"inject", "hbm-ue", "--device", "0"}).code, 0);
  EXPECT_FALSE(fs::exists(hw / "health_status"));
}

// `raise` takes any row of core/driver/health_counters.h by its file name, and only where this
// driver writes it on this chip.
TEST_F(SimHealthTest, RaiseTakesAnyHealthCounterThisDriverWrites) {
  Up("trn1.2xlarge", "2.30");
  RunResult r = Ctl({"raise", "mem_ecc_corrected", "--device", "0", "--count", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "device 0: stats/hardware/mem_ecc_corrected is now 2 (nothing pending for the "
            "runtime)\n");
  ASSERT_EQ(Ctl({"raise", "sram_ecc_uncorrected", "--device", "0"}).code, 0);
  EXPECT_EQ(ReadFile(node_->Device(0) / "stats/hardware/sram_ecc_uncorrected"), "1\n");
  EXPECT_TRUE(nlohmann::json::parse(ReadFile(dir_.path() / "root/run/neuron/faults.json"))["faults"]
                  .empty());
  r = Ctl({"raise", "hbm_ecc_err_count", "--device", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("driver 2.30 on Trn1 has no stats/hardware/health_status/"
                               "hbm_ecc_err_count"));
  r = Ctl({"raise", "warp_core_breach", "--device", "0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("raise takes sram_ecc_uncorrected or "));
  EXPECT_EQ(Ctl({"raise", "mem_ecc_corrected", "--device", "0", "--count", "0"}).code, 2);
}

TEST_F(SimHealthTest, Driver229RefusesWhatOnly230Writes) {
  Up("trn1.2xlarge", "2.29");
  RunResult r = Ctl({"heartbeat", "stall", "--device", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("driver 2.29 does not write them (they arrive with driver 2.30: "
                               "neuron-sim up --driver-version 2.30)"));
  r = Ctl({"inject", "hbm-ce", "--device", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("device 0 has no stats/hardware/mem_ecc_corrected: driver 2.29 "
                               "counts no corrected ECC errors"));
  EXPECT_THAT(Ctl({"status"}).out, Not(HasSubstr("HEARTBEAT")));

  const RunResult bad = neuron::testing::RunCommand(
      dir_.path(), {NEURON_SIM_BIN, "up", "--instance", "trn1.2xlarge", "--root",
                    (dir_.path() / "other").string(), "--heartbeat-period", "10ms"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--heartbeat-period: '10ms' is out of range: 100ms to 1h"));
}

}  // namespace
}  // namespace neuron::sim

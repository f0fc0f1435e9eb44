// An unknown driver generation, end to end (docs/driver-interface.md#detection): `neuron-sim up
// --driver-version future` serves version 2.31.7.0 with stats/hardware/ moved elsewhere
// (driver-sim/README.md#driver-versions). The real neuron-exporter says which version and
// generation it reads, counts the missing nodes per device, names them once in its log, leaves
// their series out (never 0) and serves everything else; neuron-ls and neuron-top say it in their
// headers. The newest known generation, for contrast, has nothing missing.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::HttpGet;
using ::testing::Not;
using testing::ReadFile;

// Checked against the newest known generation, 2.30: the three uncorrected counters and 2.30's two
// corrected ones, all moved out of stats/hardware/ (a Trn1 has no health_status/).
constexpr std::string_view kFutureLine =
    "driver 2.31.7: unknown sysfs layout, 5 nodes missing (first: "
    "neuron0/stats/hardware/sram_ecc_uncorrected)";

size_t Count(const std::string& text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class DriverLayoutE2eTest : public ::testing::Test {
 protected:
  void Up(const std::string& driver_version) {
    sim_ = std::make_unique<testing::SimNode>(testing::SimNodeOptions{
        .sim_bin = NEURON_SIM_BIN, .root = dir_.path() / "root", .logs = dir_.path()});
    ASSERT_TRUE(sim_->Up("trn1.2xlarge", {"--driver-version", driver_version})) << sim_->Log();
    pid_ =
        testing::Spawn({NEURON_EXPORTER_BIN, "--root", sim_->root().string(), "--no-pod-resources",
                        "--web.listen-address", "127.0.0.1:0", "--share-window-ms", "0"},
                       dir_.path() / "exp.out", dir_.path() / "exp.err");
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return (port_ = testing::ListeningPort(ReadFile(dir_.path() / "exp.err"))) > 0; },
        60s))
        << ReadFile(dir_.path() / "exp.err");
  }
  void TearDown() override {
    if (pid_ > 0) testing::Stop(pid_, 20s);
  }
  testing::RunResult Tool(const std::string& bin, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {bin, "--root", sim_->root().string()});
    return testing::RunCommand(dir_.path(), flags);
  }

  testing::TempDir dir_{"drvlayout"};
  std::unique_ptr<testing::SimNode> sim_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST_F(DriverLayoutE2eTest, UnknownLayoutIsCountedNamedOnceAndTheRestServed) {
  Up("future");
  std::string text;
  for (int i = 0; i < 3; ++i) text = HttpGet(port_, "/metrics").body;
  EXPECT_THAT(text, HasSubstr("neuron_driver_info{version=\"2.31.7.0\",generation=\"unknown\"} 1"));
  EXPECT_THAT(text, HasSubstr("neuron_exporter_sysfs_nodes_missing{neuron_device=\"0\"} 5"));
  // The moved counters are absent, not 0; what the tree still holds is served.
  EXPECT_THAT(text, Not(HasSubstr("neuron_device_ecc_uncorrected_errors_total")));
  EXPECT_THAT(text, Not(HasSubstr("neuron_device_hbm_repairable_uncorrected_errors_total")));
  EXPECT_THAT(text, HasSubstr("neuron_up 1"));
  // Its uncorrected ECC counters cannot be read: its health is unknown, not healthy.
  EXPECT_THAT(text, HasSubstr("neuron_device_health{neuron_device=\"0\",state=\"unknown\"} 1"));
  EXPECT_THAT(text, HasSubstr("neuron_device_info{neuron_device=\"0\""));
  EXPECT_THAT(text,
              HasSubstr("neuroncore_memory_used_bytes{neuron_device=\"0\",neuroncore=\"1\"}"));
  EXPECT_THAT(text, HasSubstr("neuron_device_power_data_valid{neuron_device=\"0\"}"));
  EXPECT_THAT(text,
              HasSubstr("neuroncore_reset_requests_total{neuron_device=\"0\",neuroncore=\"0\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("neuron_exporter_read_errors_total 1")));

  const std::string log = ReadFile(dir_.path() / "exp.err");
  EXPECT_EQ(Count(log, "neuron0: 5 sysfs nodes missing"), 1u) << log;
  EXPECT_THAT(log, HasSubstr("stats/hardware/sram_ecc_uncorrected, "
                             "stats/hardware/mem_ecc_uncorrected, "
                             "stats/hardware/mem_ecc_repairable_uncorrected"));
  EXPECT_EQ(Count(log, "driver 2.31.7.0: unknown sysfs layout"), 1u) << log;

  const testing::RunResult ls = Tool(NEURON_LS_BIN, {});
  EXPECT_EQ(ls.code, 0) << ls.err;
  EXPECT_THAT(ls.out, HasSubstr("driver-version: 2.31.7.0\n" + std::string(kFutureLine) + "\n"));
  const testing::RunResult json = Tool(NEURON_LS_BIN, {"--json-output"});
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc[0]["driver_version"], "2.31.7.0");
  EXPECT_EQ(doc[0]["driver_problem"], kFutureLine);
  const testing::RunResult top = Tool(NEURON_TOP_BIN, {"--snapshot"});
  EXPECT_EQ(top.code, 0) << top.err;
  EXPECT_EQ(nlohmann::json::parse(top.out)["notes"][0], kFutureLine);
}

TEST_F(DriverLayoutE2eTest, NewestKnownGenerationHasNothingMissing) {
  Up("2.29");
  const std::string text = HttpGet(port_, "/metrics").body;
  EXPECT_THAT(text, HasSubstr("neuron_driver_info{version=\"2.29.0.0\",generation=\"2.29\"} 1"));
  EXPECT_THAT(text, HasSubstr("neuron_exporter_sysfs_nodes_missing{neuron_device=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("neuron_device_ecc_uncorrected_errors_total{neuron_device=\"0\","
                              "memory=\"hbm\"} 0"));
  EXPECT_THAT(ReadFile(dir_.path() / "exp.err"),
              HasSubstr("driver 2.29.0.0: sysfs generation 2.29"));
  const testing::RunResult ls = Tool(NEURON_LS_BIN, {});
  EXPECT_THAT(ls.out, HasSubstr("driver-version: 2.29.0.0\n+"));
}

}  // namespace
}  // namespace neuron

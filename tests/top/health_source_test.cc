// Where neuron-ls and neuron-top take health from (top/node_health.h, docs/tools-ux.md#health):
// the agent's GET /health on a Unix socket (a stand-in server answering as the device plugin
// does, 304 for `?unless=` the current generation), and, with no agent there, this process's own
// read of a simulated tree, kept from read to read; neuron-ls's HEALTH column and JSON.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include "http/http_server.h"
#include "tests/support/temp_dir.h"
#include "tests/top/top_test_util.h"
#include "top/ls_report.h"
#include "top/node_health.h"

namespace neuron::top {
namespace {

using ::neuron::top::testing::MakeTree;
using ::neuron::top::testing::ScanTree;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kDocument =
    R"({"generation":7,"stale":false,"devices":[{"device":0,"present":true,"state":"unhealthy",)"
    R"("components":["sram"],"reasons":["NEURON_HW_ERR SRAM_UNCORRECTABLE_ERROR"],)"
    R"("degraded":false}],"efas":[]})";

TEST(HealthSourceTest, AsksTheAgentThenOnlyForAChange) {
  ::neuron::testing::TempDir dir("health_agent");
  const std::string agent = "unix:" + (dir.path() / "plugin.sock").string();
  std::atomic<int> asked{0};
  std::atomic<int> unchanged{0};
  HttpServer::Options options;
  options.listen_address = agent;
  options.handlers["/health"] = [&](const HttpRequest& req) {
    ++asked;
    HttpResponse r;
    if (req.query == "unless=7") {
      ++unchanged;
      r.status = 304;
      return r;
    }
    r.content_type = "application/json";
    r.body = std::string(kDocument);
    return r;
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status();

  HealthSource source({.root = dir.path(), .agent = agent, .timeout = std::chrono::seconds(5)});
  const NodeHealthView first = source.Read(nullptr);
  EXPECT_TRUE(first.from_agent);
  EXPECT_TRUE(first.notice.empty());
  ASSERT_EQ(first.devices.size(), 1u);
  EXPECT_EQ(HealthText(first.devices[0]), "unhealthy: sram");
  const NodeHealthView second = source.Read(nullptr);
  EXPECT_EQ(second, first) << "a 304 keeps the last answer";
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(unchanged.load(), 1);
}

// No agent: the verdicts are this read's, say so, and the evidence is kept, so that an ECC
// counter rising between two reads shows.
TEST(HealthSourceTest, WithoutTheAgentThisReadJudgesAndSaysSo) {
  ::neuron::testing::TempDir dir("health_own");
  const std::unique_ptr<sim::SimTree> tree = MakeTree(dir.path() / "root", "trn1.2xlarge");
  ASSERT_NE(tree, nullptr);
  const auto inventory = std::make_shared<const Inventory>(ScanTree(*tree));
  const std::string agent = "unix:" + (dir.path() / "none.sock").string();
  HealthSource source({.root = dir.path() / "root", .agent = agent, .timeout = kAgentTimeout});
  NodeHealthView h = source.Read(inventory);
  EXPECT_TRUE(h.known);
  EXPECT_FALSE(h.from_agent);
  EXPECT_THAT(h.notice,
              HasSubstr("health from this read only (agent at " + agent + " not reachable: "));
  EXPECT_THAT(h.notice, HasSubstr("): ECC history and kernel-log records not judged"));
  ASSERT_EQ(h.devices.size(), 1u);
  EXPECT_EQ(HealthText(h.devices[0]), "healthy");

  ASSERT_TRUE(tree->AddHardwareErrors(0, "mem_ecc_uncorrected", 1).ok());
  h = source.Read(inventory);
  EXPECT_EQ(HealthText(h.devices[0]), "unhealthy: hbm") << "the first read was the baseline";
  ASSERT_TRUE(tree->SetDeviceState(0, DeviceState::kReset).ok());
  source.Read(inventory);
  ASSERT_TRUE(tree->SetDeviceState(0, DeviceState::kReady).ok());
  EXPECT_EQ(HealthText(source.Read(inventory).devices[0]), "healthy") << "a reset in between";
}

TEST(HealthSourceTest, NeuronLsShowsAHealthColumnAndJson) {
  ::neuron::testing::TempDir dir("health_ls");
  const std::unique_ptr<sim::SimTree> tree = MakeTree(dir.path() / "root", "trn1.2xlarge");
  ASSERT_NE(tree, nullptr);
  const Inventory inv = ScanTree(*tree);
  absl::StatusOr<NodeHealthView> health = ParseAgentHealth(kDocument, "unix:/x");
  ASSERT_TRUE(health.ok());
  LsSources src;
  src.inventory = &inv;
  src.health = &*health;
  const LsReport report = BuildLsReport(src);
  const std::string text = RenderLsText(report, LsFormat::kDefault);
  EXPECT_THAT(text, HasSubstr("|     HEALTH      |"));  // centred, as every header
  EXPECT_THAT(text, HasSubstr("| unhealthy: sram |"));
  EXPECT_THAT(RenderLsText(report, LsFormat::kWide), Not(HasSubstr("HEALTH")));
  const nlohmann::json j = nlohmann::json::parse(RenderLsJson(report));
  EXPECT_EQ(j[0]["health"]["state"], "unhealthy");
  EXPECT_EQ(j[0]["health"]["source"], "agent");
  src.health = nullptr;
  EXPECT_THAT(RenderLsText(BuildLsReport(src), LsFormat::kDefault), Not(HasSubstr("HEALTH")));
}

}  // namespace
}  // namespace neuron::top

// GET /health (plugin/health_api.h) through the real neuron-device-plugin binary on a simulated
// node of every type the agent serves: every device and EFA listed healthy, an injected
// uncorrected HBM error read as an unhealthy device with its component and the Node condition
// AWS's node-problem-detector would set, and a reset that brings both back
// (docs/architecture.md#health).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/model/catalog.h"
#include "driver-sim/kubelet/kubelet_emulator.h"
#include "http/local_client.h"
#include "nlohmann/json.hpp"
#include "tests/plugin/plugin_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

namespace fs = std::filesystem;
using ::neuron::plugin::testing::kCeiling;
using ::neuron::testing::ReadFile;
using ::neuron::testing::SimNode;
using ::neuron::testing::Spawn;
using ::neuron::testing::Stop;
using ::neuron::testing::TempDir;
using ::neuron::testing::WaitUntil;
using nlohmann::json;

struct NodeType {
  std::string instance;
  std::vector<std::string> sim_extra;  // and the plugin's: the LNC both must agree on
  std::vector<std::string> driver;     // the simulator's alone: --driver-version
};

void PrintTo(const NodeType& t, std::ostream* os) { *os << t.instance; }

class HealthApiTest : public ::testing::TestWithParam<NodeType> {
 protected:
  void SetUp() override {
    std::vector<std::string> sim_args = GetParam().sim_extra;
    sim_args.insert(sim_args.end(), GetParam().driver.begin(), GetParam().driver.end());
    ASSERT_TRUE(sim_.Up(GetParam().instance, sim_args)) << sim_.Log();
    absl::StatusOr<std::unique_ptr<sim::KubeletEmulator>> k = sim::KubeletEmulator::Start(
        {.kubelet_dir = kdir_.string(), .root = root_.string(), .rpc_deadline = kCeiling});
    ASSERT_TRUE(k.ok()) << k.status();
    kubelet_ = *std::move(k);
    std::vector<std::string> args{NEURON_PLUGIN_BIN, "--root",          root_.string(),
                                  "--kubelet-dir",   kdir_.string(),    "--listen",
                                  address_,          "--socket-suffix", "i-health"};
    args.insert(args.end(), GetParam().sim_extra.begin(), GetParam().sim_extra.end());
    pid_ = Spawn(args, tmp_.path() / "p.out", tmp_.path() / "p.err");
  }
  void TearDown() override {
    if (pid_ > 0) {
      EXPECT_EQ(Stop(pid_, kCeiling), 0) << ReadFile(tmp_.path() / "p.err");
    }
  }

  // Waits for a document that `want` accepts; the last one read stays in last_.
  bool WaitDocument(const std::function<bool(const json&)>& want) {
    return WaitUntil(
        [&] {
          absl::StatusOr<LocalResponse> r = LocalGet(address_, "/health");
          if (!r.ok() || r->status != 200) return false;
          last_ = json::parse(r->body, nullptr, false);
          return !last_.is_discarded() && want(last_);
        },
        kCeiling);
  }
  static const json& DeviceOf(const json& doc, int index) {
    for (const json& d : doc["devices"]) {
      if (d["device"] == index) return d;
    }
    static const json kNone;
    return kNone;
  }

  TempDir tmp_{"hapi"};
  const fs::path root_ = tmp_.path() / "root";
  const fs::path kdir_ = tmp_.path() / "k";
  const std::string address_ = "unix:" + (tmp_.path() / "plugin.sock").string();
  SimNode sim_{{.sim_bin = NEURON_SIM_BIN,
                .root = root_,
                .logs = tmp_.path(),
                .on_stop = ::neuron::testing::ExpectCleanExit}};
  std::unique_ptr<sim::KubeletEmulator> kubelet_;
  pid_t pid_ = -1;
  json last_;
};

TEST_P(HealthApiTest, EveryDeviceHealthyThenAFaultNamesItsComponentAndTheNode) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(GetParam().instance);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const size_t devices = (*spec)->devices, efas = (*spec)->efas.size();
  auto all_healthy = [&](const json& doc) {
    if (doc["stale"] != false || doc["devices"].size() != devices) return false;
    if (doc["efas"].size() != efas) return false;
    for (const char* kind : {"devices", "efas"}) {
      for (const json& d : doc[kind]) {
        if (d["state"] != "healthy") return false;
      }
    }
    return doc["node_condition"]["status"] == "False";
  };
  ASSERT_TRUE(WaitDocument(all_healthy)) << last_.dump() << ReadFile(tmp_.path() / "p.err");
  EXPECT_EQ(last_["node_condition"]["reason"], "NeuronHasNoError");
  // An unchanged document is not sent again.
  absl::StatusOr<LocalResponse> again =
      LocalGet(address_, "/health?unless=" + std::to_string(last_["generation"].get<uint64_t>()));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());

  ASSERT_EQ(sim_.Ctl({"inject", "hbm-ue", "--device", "1"}, kCeiling).code, 0);
  ASSERT_TRUE(WaitDocument([](const json& doc) {
    return DeviceOf(doc, 1)["state"] == "unhealthy";
  })) << last_.dump();
  EXPECT_EQ(DeviceOf(last_, 1)["components"], json::array({"hbm"}));
  EXPECT_EQ(DeviceOf(last_, 1)["reasons"][0], "uncorrected ECC (hbm)");
  EXPECT_EQ(DeviceOf(last_, 0)["state"], "healthy");
  EXPECT_EQ(last_["node_condition"]["status"], "True");
  EXPECT_EQ(last_["node_condition"]["reason"], "NeuronHasError_HBM_UNCORRECTABLE_ERROR");

  ASSERT_EQ(sim_.Ctl({"reset", "--device", "1"}, kCeiling).code, 0);
  EXPECT_TRUE(WaitDocument(all_healthy)) << last_.dump();
}

// Driver 2.30's own health files on a Trn2 (the only chips that have them): the components the
// driver lists, a stalled heartbeat, rising corrected ECC.
using Driver230HealthTest = HealthApiTest;

TEST_P(Driver230HealthTest, TheDriversComponentsAndHeartbeatAndCorrectedEcc) {
  auto device2 = [](std::string_view state) {
    return [state](const json& doc) { return DeviceOf(doc, 2)["state"] == state; };
  };
  ASSERT_TRUE(WaitDocument(device2("healthy"))) << last_.dump() << ReadFile(tmp_.path() / "p.err");
  ASSERT_EQ(sim_.Ctl({"component", "set", "link_efa", "--device", "2"}, kCeiling).code, 0);
  ASSERT_TRUE(WaitDocument(device2("unhealthy"))) << last_.dump();
  EXPECT_EQ(DeviceOf(last_, 2)["components"], json::array({"link_efa"}));
  EXPECT_EQ(last_["node_condition"]["reason"], "NeuronHasError_LINK_EFA");
  ASSERT_EQ(sim_.Ctl({"component", "clear", "--device", "2"}, kCeiling).code, 0);
  ASSERT_TRUE(WaitDocument(device2("healthy"))) << last_.dump();

  // The heartbeat's period is 1 s on both sides (assumed, as on a real node): unknown within
  // three periods of the stall. The time is printed, not asserted: the machine is shared.
  ASSERT_EQ(sim_.Ctl({"heartbeat", "stall", "--device", "2"}, kCeiling).code, 0);
  const auto stalled = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitDocument(device2("unknown"))) << last_.dump();
  std::printf("heartbeat stalled -> unknown in %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - stalled)
                                         .count()));
  EXPECT_EQ(DeviceOf(last_, 2)["reasons"][0], "healthcheck_heartbeat stalled");
  EXPECT_EQ(last_["node_condition"]["status"], "False") << "unknown does not condemn the node";
  ASSERT_EQ(sim_.Ctl({"heartbeat", "resume", "--device", "2"}, kCeiling).code, 0);
  ASSERT_TRUE(WaitDocument(device2("healthy"))) << last_.dump();

  ASSERT_EQ(sim_.Ctl({"inject", "hbm-ce", "--device", "2", "--count", "3"}, kCeiling).code, 0);
  ASSERT_TRUE(WaitDocument([](const json& doc) { return DeviceOf(doc, 2)["degraded"] == true; }))
      << last_.dump();
  EXPECT_EQ(DeviceOf(last_, 2)["state"], "healthy") << "degraded is not unhealthy";
}

INSTANTIATE_TEST_SUITE_P(Trn2, Driver230HealthTest,
                         ::testing::Values(NodeType{
                             "trn2.48xlarge", {}, {"--driver-version", "2.30"}}),
                         [](const auto&) { return std::string("trn2_48xlarge_driver_2_30"); });

INSTANTIATE_TEST_SUITE_P(
    EveryNodeType, HealthApiTest,
    ::testing::Values(NodeType{"trn1.32xlarge", {}, {}}, NodeType{"trn1n.32xlarge", {}, {}},
                      NodeType{"inf2.48xlarge", {}, {}},
                      NodeType{"trn2.48xlarge", {"--lnc", "2"}, {}},
                      NodeType{"trn2u.48xlarge", {}, {"--driver-version", "2.30"}}),
    [](const ::testing::TestParamInfo<NodeType>& info) {
      std::string name = info.param.instance;
      for (char& c : name) {
        if (c == '.') c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace neuron::plugin

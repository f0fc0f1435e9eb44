// The kubelet emulator against the real neuron-device-plugin in DRA mode on a simulated
// trn1.32xlarge: a pod with a claim on devices 4 and 5 shows them Healthy in its status
// (`neuron-sim pod status`, the Kubernetes API's field names); an uncorrected HBM error injected
// on device 5 turns it Unhealthy with the plugin's reason, a reset turns it Healthy again, and the
// plugin stopped turns both Unknown (driver-sim/README.md#kubelet-dra).
#include <gtest/gtest.h>

#include <filesystem>

#include "driver-sim/kubelet/kubelet_emulator.h"
#include "http/http_server.h"
#include "nlohmann/json.hpp"
#include "tests/support/dra_claims_stand_in.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;
using ::neuron::testing::ReadFile;
using ::neuron::testing::SimNode;
using ::neuron::testing::TempDir;
using ::neuron::testing::WaitUntil;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kCeiling = 15s;

class KubeletDraPluginHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<SimNode>(
        ::neuron::testing::SimNodeOptions{.sim_bin = NEURON_SIM_BIN,
                                          .root = tmp_.path() / "root",
                                          .logs = tmp_.path(),
                                          .on_stop = ::neuron::testing::ExpectCleanExit});
    ASSERT_TRUE(sim_->Up("trn1.32xlarge")) << sim_->Log();
    // neuron-dra-api's answer for default/pair (docs/kubelet-api.md#dra-claims).
    absl::StatusOr<std::unique_ptr<HttpServer>> api = ::neuron::testing::ServeDraClaims(
        "unix:" + (tmp_.path() / "dra-api.sock").string(),
        {{"pair", ::neuron::testing::DraClaimAnswer("pair", "node-a", {"neuron-4", "neuron-5"})}});
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *std::move(api);
    KubeletEmulator::Options k;
    k.kubelet_dir = kdir().string();
    k.root = (tmp_.path() / "root").string();
    k.cdi_dir = (tmp_.path() / "cdi").string();
    k.plugin_poll = 20ms;
    k.rpc_deadline = kCeiling;
    absl::StatusOr<std::unique_ptr<KubeletEmulator>> kubelet = KubeletEmulator::Start(k);
    ASSERT_TRUE(kubelet.ok()) << kubelet.status();
    kubelet_ = *std::move(kubelet);
  }
  void TearDown() override {
    if (plugin_ > 0) ::neuron::testing::Stop(plugin_, kCeiling);
    kubelet_.reset();
  }

  fs::path kdir() const { return tmp_.path() / "k"; }

  void StartPlugin() {
    plugin_ = ::neuron::testing::Spawn(
        {NEURON_PLUGIN_BIN, "--api", "dra", "--node-name", "node-a", "--root",
         (tmp_.path() / "root").string(), "--kubelet-dir", kdir().string(), "--listen",
         "unix:" + (tmp_.path() / "plugin.sock").string(), "--cdi-dir",
         (tmp_.path() / "cdi").string(), "--dra.claims",
         "unix:" + (tmp_.path() / "dra-api.sock").string()},
        tmp_.path() / "p.out", tmp_.path() / "p.err");
    ASSERT_TRUE(
        WaitUntil([&] { return kubelet_->DraPlugins().contains("neuron.aws.com"); }, kCeiling))
        << ReadFile(tmp_.path() / "p.err");
  }

  // `neuron-sim pod status` of the pod: its container's allocatedResourcesStatus.
  json Status() {
    const ::neuron::testing::RunResult r = ::neuron::testing::RunCommand(
        tmp_.path(), {NEURON_SIM_BIN, "pod", "status", "--kubelet-dir", kdir().string(), "--name",
                      "llama-0", "--namespace", "default"});
    EXPECT_EQ(r.code, 0) << r.err;
    const json pod = json::parse(r.out, nullptr, false);
    if (pod.is_discarded()) return json();
    return pod["status"]["containerStatuses"][0].value("allocatedResourcesStatus", json::array());
  }
  // The health of each device by resource ID, "" when absent.
  std::string HealthOf(const json& status, const std::string& device) {
    for (const json& rs : status) {
      for (const json& r : rs["resources"]) {
        if (r["resourceID"] == "aws.amazon.com/neuron=uid-pair-" + device) return r["health"];
      }
    }
    return "";
  }
  bool WaitHealth(const std::string& device, const std::string& health) {
    return WaitUntil([&] { return HealthOf(last_ = Status(), device) == health; }, kCeiling);
  }

  TempDir tmp_{"kdph"};
  std::unique_ptr<SimNode> sim_;
  std::unique_ptr<HttpServer> api_;
  std::unique_ptr<KubeletEmulator> kubelet_;
  pid_t plugin_ = -1;
  json last_;
};

TEST_F(KubeletDraPluginHealthTest, TheClaimsDevicesHealthFollowsAFaultAResetAndThePlugin) {
  ASSERT_NO_FATAL_FAILURE(StartPlugin());
  PodSpec pod;
  pod.name = "llama-0";
  pod.containers.push_back(ContainerSpec{});
  pod.claims = {ClaimRef{"default", "pair", "uid-pair", {"neuron.aws.com"}}};
  absl::StatusOr<AdmittedPod> admitted = kubelet_->AdmitPod(pod);
  ASSERT_TRUE(admitted.ok()) << admitted.status() << ReadFile(tmp_.path() / "p.err");

  ASSERT_TRUE(WaitHealth("neuron-5", "Healthy")) << last_.dump();
  EXPECT_EQ(last_.size(), 1u);
  EXPECT_EQ(last_[0]["name"], "claim:pair");
  EXPECT_EQ(HealthOf(last_, "neuron-4"), "Healthy") << last_.dump();

  const ::neuron::testing::RunResult inject =
      sim_->Ctl({"inject", "hbm-ue", "--device", "5"}, kCeiling);
  ASSERT_EQ(inject.code, 0) << inject.err;
  ASSERT_TRUE(WaitHealth("neuron-5", "Unhealthy")) << last_.dump();
  EXPECT_EQ(HealthOf(last_, "neuron-4"), "Healthy");
  for (const json& r : last_[0]["resources"]) {
    if (r["health"] == "Unhealthy") {
      EXPECT_EQ(r.value("message", ""), "uncorrected ECC (hbm)") << last_.dump();
    }
  }

  const ::neuron::testing::RunResult reset = sim_->Ctl({"reset", "--device", "5"}, kCeiling);
  ASSERT_EQ(reset.code, 0) << reset.err;
  ASSERT_TRUE(WaitHealth("neuron-5", "Healthy")) << last_.dump();

  EXPECT_EQ(::neuron::testing::Stop(plugin_, kCeiling), 0) << ReadFile(tmp_.path() / "p.err");
  plugin_ = -1;
  ASSERT_TRUE(WaitHealth("neuron-5", "Unknown")) << last_.dump();
  EXPECT_EQ(HealthOf(last_, "neuron-4"), "Unknown");
  EXPECT_FALSE(last_[0]["resources"][0].contains("message"));

  const ::neuron::testing::RunResult none = ::neuron::testing::RunCommand(
      tmp_.path(),
      {NEURON_SIM_BIN, "pod", "status", "--kubelet-dir", kdir().string(), "--name", "no-such-pod"});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("no pod default/no-such-pod"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace neuron::sim

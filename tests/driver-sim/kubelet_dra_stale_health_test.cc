// A node watcher that stalls, seen from the kubelet (plugin/dra/server.h, the health stream's
// freshness): the plugin's DRA server and driver in process over a NodeState that the test feeds
// as the node watcher does (the same hardware every 100 ms), the kubelet emulator watching its
// health stream. While the evidence is read, the claim's device stays Healthy past its timeout;
// once the watcher stalls, the plugin sends nothing more and the kubelet reads the device as
// Unknown within health.stale_after (the plugin's health_check_timeout_seconds), not at its own
// 30 s default; the watcher back, Healthy again.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "driver-sim/kubelet/kubelet_emulator.h"
#include "plugin/dra/server.h"
#include "tests/plugin/dra_testing.h"
#include "tests/support/dra_claims_stand_in.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron::sim {
namespace {

using ::neuron::testing::WaitUntil;
using namespace std::chrono_literals;

class OneClaim : public plugin::dra::ClaimSource {
 public:
  absl::StatusOr<plugin::dra::ResourceClaim> Get(std::string_view, std::string_view) override {
    return plugin::dra::ParseClaim(
        ::neuron::testing::DraClaimAnswer("pair", "node-a", {"neuron-4", "neuron-5"}));
  }
};

// The node watcher's rhythm: SetHardware every 100 ms while `reading`.
class Watcher {
 public:
  explicit Watcher(plugin::NodeState& state)
      : thread_([this, &state] {
          const plugin::Hardware hw = plugin::dra::testing::CatalogHardware("trn1.32xlarge");
          while (!done_) {
            if (reading_) state.SetHardware(hw);
            std::this_thread::sleep_for(100ms);
          }
        }) {}
  ~Watcher() {
    done_ = true;
    thread_.join();
  }
  void Reading(bool on) { reading_ = on; }

 private:
  std::atomic<bool> reading_{true};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(KubeletDraStaleHealthTest, AStalledWatcherTurnsTheDevicesUnknownWithinStaleAfter) {
  ::neuron::testing::TempDir tmp("kdsh");
  plugin::NodeState state(1000ms);
  Watcher watcher(state);
  ASSERT_TRUE(WaitUntil([&] { return state.evidence_time().has_value(); }, 5s));
  OneClaim claims;
  auto driver = plugin::dra::Driver::Create({.node_name = "node-a",
                                             .cdi_dir = tmp.path() / "cdi",
                                             .checkpoint_dir = tmp.path() / "ck",
                                             .state = &state,
                                             .claims = &claims});
  ASSERT_TRUE(driver.ok()) << driver.status();
  const std::string kdir = (tmp.path() / "k").string();
  auto server = plugin::dra::Server::Start({.kubelet_dir = kdir,
                                            .node_name = "node-a",
                                            .driver = driver->get(),
                                            .state = &state,
                                            .stale_after = 3s});
  ASSERT_TRUE(server.ok()) << server.status();
  // The container runtime's check that the CDI spec's device nodes exist on the node.
  for (const char* dev : {"neuron4", "neuron5"}) {
    ::neuron::testing::WriteFile(tmp.path() / "root/dev" / dev, "");
  }
  KubeletEmulator::Options k;
  k.kubelet_dir = kdir;
  k.root = (tmp.path() / "root").string();
  k.cdi_dir = (tmp.path() / "cdi").string();
  k.plugin_poll = 20ms;
  k.rpc_deadline = 10s;
  auto kubelet = KubeletEmulator::Start(k);
  ASSERT_TRUE(kubelet.ok()) << kubelet.status();
  ASSERT_TRUE(WaitUntil([&] { return (*kubelet)->DraPlugins().contains("neuron.aws.com"); }, 10s));
  PodSpec pod;
  pod.name = "llama-0";
  pod.containers.push_back(ContainerSpec{});
  pod.claims = {ClaimRef{"default", "pair", "uid-pair", {"neuron.aws.com"}}};
  const absl::StatusOr<AdmittedPod> admitted = (*kubelet)->AdmitPod(pod);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  const auto health = [&] {
    const std::vector<AdmittedPod> pods = (*kubelet)->Pods();
    const auto& status = pods.at(0).containers.at(0).allocated_resources_status;
    return status.empty() || status[0].resources.empty() ? std::string("<none>")
                                                         : status[0].resources[0].health;
  };
  ASSERT_TRUE(WaitUntil([&] { return health() == "Healthy"; }, 10s)) << health();
  // Read all along: Healthy past the timeout (the list goes again every second).
  std::this_thread::sleep_for(4500ms);
  EXPECT_EQ(health(), "Healthy");

  watcher.Reading(false);
  const auto stalled = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return health() == "Unknown"; }, 10s)) << health();
  // At most stale_after after the last send, which was at most a third of it before the stall.
  EXPECT_LT(std::chrono::steady_clock::now() - stalled, 4500ms);

  watcher.Reading(true);
  EXPECT_TRUE(WaitUntil([&] { return health() == "Healthy"; }, 5s)) << health();
}

}  // namespace
}  // namespace neuron::sim

// The kubelet emulator's side of DRA resource health (KEP-4680) against the DRA plugin double
// (kubelet_dra_fixture.h): the health service picked from what the plugin advertises, the pod's
// allocatedResourcesStatus built from the stream (name, resource ID, health, message), Unknown
// for a report too old, a plugin gone or a plugin without health, Unimplemented ending the
// watch; and the health cache's rules on their own (dra_health.h).
#include "driver-sim/kubelet/dra_health.h"
#include "tests/driver-sim/kubelet_dra_fixture.h"
#include "tests/driver-sim/kubelet_emulator_fixture.h"

namespace neuron::sim::kubelet_test {
namespace {

class KubeletDraHealthTest : public KubeletDraTestBase {
 protected:
  void AdvertiseHealth(const std::vector<std::string>& services) {
    for (const std::string& s : services) plugin_.state.info.add_supported_versions(s);
  }
  std::unique_ptr<KubeletEmulator> StartWithPod(KubeletEmulator::Options o) {
    std::unique_ptr<KubeletEmulator> k = StartRegistered(std::move(o));
    absl::StatusOr<AdmittedPod> admitted = k->AdmitPod(ClaimPod("llama-0", {claim_}));
    EXPECT_TRUE(admitted.ok()) << admitted.status();
    return k;
  }
  // The container's status as the kubelet would build it now.
  static std::vector<ResourceStatus> Status(const KubeletEmulator& k) {
    return k.Pods().at(0).containers.at(0).allocated_resources_status;
  }
  static std::string HealthOf(const KubeletEmulator& k, size_t device = 0) {
    const std::vector<ResourceStatus> s = Status(k);
    if (s.empty() || s[0].resources.size() <= device) return "<none>";
    return s[0].resources[device].health;
  }
};

TEST_F(KubeletDraHealthTest, AHealthyDeviceShowsInThePodsStatusUnderItsCdiId) {
  plugin_.state.devices["uid-1"] = {"neuron-2", "neuron-3"};
  plugin_.state.health = {{"neuron-2", 1, "", 0}, {"neuron-3", 1, "", 0}};
  AdvertiseHealth({std::string(kHealthV1alpha1), std::string(kHealthV1)});
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s));
  EXPECT_EQ(
      Status(*k),
      (std::vector<ResourceStatus>{{"claim:llama-0-neurons",
                                    {{"aws.amazon.com/neuron=uid-1-neuron-2", "Healthy", ""},
                                     {"aws.amazon.com/neuron=uid-1-neuron-3", "Healthy", ""}}}}));
  // v1 before v1alpha1, whatever the plugin's order (pickHealthService).
  EXPECT_EQ(plugin_.Watches("v1"), 1);
  EXPECT_EQ(plugin_.Watches("v1alpha1"), 0);
}

TEST_F(KubeletDraHealthTest, AnUnhealthyDeviceCarriesTheDriversMessageCutAt1024) {
  AdvertiseHealth({std::string(kHealthV1)});
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s)) << HealthOf(*k);
  plugin_.SetHealth({{"neuron-3", 2, std::string(2000, 'x'), 0}});
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Unhealthy"; }, 5s));
  EXPECT_EQ(Status(*k).at(0).resources.at(0).message, std::string(1024, 'x'));
  plugin_.SetHealth({{"neuron-3", 1, "", 0}});
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s));
  EXPECT_EQ(Status(*k).at(0).resources.at(0).message, "");
}

// v1alpha1 has no message: the status has none either.
TEST_F(KubeletDraHealthTest, AV1alpha1PluginIsWatchedOnV1alpha1) {
  plugin_.state.health = {{"neuron-3", 2, "ignored on v1alpha1", 0}};
  AdvertiseHealth({std::string(kHealthV1alpha1)});
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Unhealthy"; }, 5s));
  EXPECT_EQ(Status(*k).at(0).resources.at(0).message, "");
  EXPECT_EQ(plugin_.Watches("v1"), 0);
}

TEST_F(KubeletDraHealthTest, APluginThatAdvertisesNoHealthServiceIsNeverWatched) {
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(HealthOf(*k), "Unknown");
  EXPECT_EQ(plugin_.Watches("v1") + plugin_.Watches("v1alpha1"), 0);
}

// The stream's entries are cleared when it ends: a plugin gone leaves its devices Unknown.
TEST_F(KubeletDraHealthTest, ThePluginStoppedTurnsItsDevicesUnknown) {
  AdvertiseHealth({std::string(kHealthV1)});
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s));
  plugin_.Stop();
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Unknown"; }, 5s));
  plugin_.Serve();  // a new registration opens a new stream at once
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s));
}

// A kubelet restart ends the streams (their entries dropped); the plugins register again and are
// watched again.
TEST_F(KubeletDraHealthTest, AKubeletRestartWatchesThePluginAgain) {
  AdvertiseHealth({std::string(kHealthV1)});
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s));
  ASSERT_TRUE(k->Restart().ok());
  EXPECT_TRUE(WaitUntil([&] { return plugin_.Watches("v1") == 2; }, 5s));
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(*k) == "Healthy"; }, 5s));
}

// healthinfo.go: a report older than the device's timeout reads as Unknown, lazily; v1's
// health_check_timeout_seconds replaces the default.
TEST_F(KubeletDraHealthTest, AReportOlderThanItsTimeoutReadsUnknown) {
  plugin_.state.devices["uid-1"] = {"neuron-2", "neuron-3"};
  plugin_.state.health = {{"neuron-2", 1, "", 0}, {"neuron-3", 1, "", 30}};
  AdvertiseHealth({std::string(kHealthV1)});
  KubeletEmulator::Options o = DraOpts();
  o.dra_health_timeout = 300ms;
  std::unique_ptr<KubeletEmulator> k = StartWithPod(o);
  ASSERT_TRUE(WaitUntil([&] { return HealthOf(*k, 1) == "Healthy"; }, 5s));
  EXPECT_TRUE(WaitUntil([&] { return HealthOf(*k, 0) == "Unknown"; }, 5s));
  EXPECT_EQ(HealthOf(*k, 1), "Healthy");  // its own timeout: 30 s
}

TEST_F(KubeletDraHealthTest, UnimplementedLeavesTheDevicesUnknown) {
  plugin_.state.health_unimplemented = true;
  AdvertiseHealth({std::string(kHealthV1)});
  std::unique_ptr<KubeletEmulator> k = StartWithPod(DraOpts());
  ASSERT_TRUE(WaitUntil([&] { return plugin_.Watches("v1") == 1; }, 5s));
  EXPECT_EQ(HealthOf(*k), "Unknown");
}

// DraHealthStreams alone, with a short retry: a stream that ends is opened again; one answered
// Unimplemented is not.
TEST_F(KubeletDraHealthTest, AnEndedStreamIsOpenedAgainAfterTheRetryPeriod) {
  AdvertiseHealth({std::string(kHealthV1)});
  plugin_.Serve();
  DraHealthCache cache(30s);
  DraHealthStreams streams(&cache, spdlog::default_logger(), 100ms);
  const HealthTarget target{plugin_.dra_socket().string(), std::string(kHealthV1)};
  streams.Follow("neuron.aws.com", target);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return cache.Get("neuron.aws.com", "node-1", "neuron-3", DraHealthCache::Clock::now())
                   .health == DeviceHealthStatus::kHealthy;
      },
      5s));
  plugin_.Stop();
  plugin_.Serve();
  EXPECT_TRUE(WaitUntil([&] { return plugin_.Watches("v1") >= 2; }, 5s));
  // The newest plugin serves no health: no fall-back to the old stream, and no entries.
  streams.Follow("neuron.aws.com", HealthTarget{target.endpoint, ""});
  EXPECT_EQ(cache.Get("neuron.aws.com", "node-1", "neuron-3", DraHealthCache::Clock::now()).health,
            DeviceHealthStatus::kUnknown);
  const int watched = plugin_.Watches("v1");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(plugin_.Watches("v1"), watched);
  streams.Follow("neuron.aws.com", std::nullopt);  // no plugin at all

  {
    std::lock_guard lock(plugin_.state.mu);
    plugin_.state.health_unimplemented = true;
  }
  const int before = plugin_.Watches("v1");
  streams.Follow("neuron.aws.com", target);
  ASSERT_TRUE(WaitUntil([&] { return plugin_.Watches("v1") == before + 1; }, 5s));
  std::this_thread::sleep_for(500ms);  // five retry periods
  EXPECT_EQ(plugin_.Watches("v1"), before + 1);
}

// updateHealthInfo and getHealthInfo on their own, on a clock the test moves.
TEST(DraHealthCacheTest, FollowsTheKubeletsTimeoutRules) {
  DraHealthCache cache(30s);
  const auto t0 = DraHealthCache::Clock::now();
  DeviceHealth a{.pool = "p",
                 .device = "a",
                 .health = DeviceHealthStatus::kUnhealthy,
                 .message = "ECC",
                 .timeout = 0ms,
                 .last_updated = {}};
  DeviceHealth b{.pool = "p",
                 .device = "b",
                 .health = DeviceHealthStatus::kHealthy,
                 .message = "",
                 .timeout = 60s,
                 .last_updated = {}};
  cache.Update("d", {a, b}, t0);
  EXPECT_EQ(cache.Get("d", "p", "a", t0 + 10s).message, "ECC");
  EXPECT_EQ(cache.Get("d", "p", "a", t0 + 31s).health, DeviceHealthStatus::kUnknown);
  EXPECT_EQ(cache.Get("d", "p", "a", t0 + 31s).message, "");
  EXPECT_EQ(cache.Get("d", "p", "b", t0 + 31s).health, DeviceHealthStatus::kHealthy);
  EXPECT_EQ(cache.Get("d", "p", "c", t0).health, DeviceHealthStatus::kUnknown);
  EXPECT_EQ(cache.Get("other", "p", "b", t0).health, DeviceHealthStatus::kUnknown);
  // A report without "b" keeps it until its own timeout.
  cache.Update("d", {a}, t0 + 40s);
  EXPECT_EQ(cache.Get("d", "p", "b", t0 + 50s).health, DeviceHealthStatus::kHealthy);
  cache.ClearDriver("d");
  EXPECT_EQ(cache.Get("d", "p", "a", t0 + 41s).health, DeviceHealthStatus::kUnknown);
}

TEST(DraHealthCacheTest, PicksTheNewestHealthServiceTheKubeletKnows) {
  EXPECT_EQ(PickHealthService({"v1beta1.DRAPlugin"}), "");
  EXPECT_EQ(PickHealthService({}), "");
  EXPECT_EQ(PickHealthService({"v1.DRAPlugin", "v1alpha1.DRAResourceHealth"}),
            "v1alpha1.DRAResourceHealth");
  EXPECT_EQ(PickHealthService({"v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}),
            "v1.DRAResourceHealth");
  EXPECT_EQ(PickHealthService({"v2.DRAResourceHealth"}), "");
}

}  // namespace
}  // namespace neuron::sim::kubelet_test

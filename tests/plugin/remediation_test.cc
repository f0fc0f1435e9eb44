// The health policy's `reset` (plugin/remediation.h, docs/OPERATIONS.md#remediation) through the
// real binaries on a simulated trn1.32xlarge: neuron-device-plugin under `neuron-sim exec` (so its
// scan of the node's processes and its check's libnrt reach the simulated driver), with the
// active check `neuron-ls --health-check` on the simulator's reference programs.
//   - a fault on an idle, unallocated device: withheld, reset, checked, returned (the time from
//     the fault to the return is printed);
//   - a device allocated to a pod, and one a process holds open: never reset, and /health says why;
//   - a check that cannot pass (no reference programs): the tries run out and the device stays
//     withheld.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

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
using ::neuron::plugin::testing::Allocate;
using ::neuron::plugin::testing::kCeiling;
using ::neuron::plugin::testing::PluginStub;
using ::neuron::testing::ReadFile;
using ::neuron::testing::SimNode;
using ::neuron::testing::TempDir;
using ::neuron::testing::WaitUntil;
using ::neuron::testing::WriteFile;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A reset and its check take seconds; the ceiling is for cause and effect, not speed.
constexpr auto kResetCeiling = std::chrono::seconds(60);

class RemediationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(sim_.Up("trn1.32xlarge")) << sim_.Log();
    const ::neuron::testing::RunResult programs = ::neuron::testing::RunCommand(
        tmp_.path(),
        {NEURON_SIM_BIN, "health-programs", "--out", (tmp_.path() / "programs").string()});
    ASSERT_EQ(programs.code, 0) << programs.err;
    absl::StatusOr<std::unique_ptr<sim::KubeletEmulator>> k = sim::KubeletEmulator::Start(
        {.kubelet_dir = kdir_.string(), .root = root_.string(), .rpc_deadline = kCeiling});
    ASSERT_TRUE(k.ok()) << k.status();
    kubelet_ = *std::move(k);
  }

  // The plugin with `policy` (YAML under health.policy) and `tries`.
  void StartPlugin(const std::string& policy, int tries = 3) {
    const fs::path config = tmp_.path() / "plugin.yaml";
    WriteFile(config, "health:\n  policy: " + policy + "\n  reset_tries: " + std::to_string(tries) +
                          "\n  check_command: " + NEURON_LS_BIN +
                          "\n  check_programs: " + (tmp_.path() / "programs").string() +
                          "\n  state_dir: " + (tmp_.path() / "state").string() + "\n");
    // The check the plugin runs loads the simulator's full libnrt.so.1, named as the DaemonSet
    // names the host's (deploy/components/reset).
    ASSERT_GT(sim_.StartUnderDriver(
                  {"env", std::string("NEURON_LIBNRT=") + NEURON_LIBNRT_FULL, NEURON_PLUGIN_BIN,
                   "--root", root_.string(), "--kubelet-dir", kdir_.string(), "--listen", address_,
                   "--socket-suffix", "i-reset", "--config", config.string()},
                  "plugin"),
              0);
    ASSERT_TRUE(WaitDevice(0, [](const json& d) { return d["state"] == "healthy"; })) << Err();
  }

  std::string Err() const { return ReadFile(tmp_.path() / "plugin.err"); }

  // Waits until /health's entry of `device` satisfies `want`; the last one read is last_.
  bool WaitDevice(int device, const std::function<bool(const json&)>& want,
                  std::chrono::milliseconds ceiling = kResetCeiling) {
    return WaitUntil(
        [&] {
          absl::StatusOr<LocalResponse> r = LocalGet(address_, "/health");
          if (!r.ok() || r->status != 200) return false;
          const json doc = json::parse(r->body, nullptr, false);
          if (doc.is_discarded()) return false;
          for (const json& d : doc["devices"]) {
            if (d["device"] == device) last_ = d;
          }
          return want(last_);
        },
        ceiling);
  }

  // Every core's reset_req_count/total of `device`, summed: how many resets were requested.
  uint64_t ResetRequests(int device) const {
    uint64_t sum = 0;
    const fs::path dir = root_ / "sys/class/neuron_device" / ("neuron" + std::to_string(device));
    for (const auto& e : fs::directory_iterator(dir)) {
      if (!e.path().filename().string().starts_with("neuron_core")) continue;
      sum += std::stoull(ReadFile(e.path() / "stats/other_info/reset_req_count/total"));
    }
    return sum;
  }

  std::string Metrics() const {
    absl::StatusOr<LocalResponse> r = LocalGet(address_, "/metrics");
    return r.ok() ? r->body : "";
  }

  TempDir tmp_{"reset"};
  const fs::path root_ = tmp_.path() / "root";
  const fs::path kdir_ = tmp_.path() / "k";
  const std::string address_ = "unix:" + (tmp_.path() / "plugin.sock").string();
  SimNode sim_{{.sim_bin = NEURON_SIM_BIN,
                .root = root_,
                .logs = tmp_.path(),
                .on_stop = ::neuron::testing::ExpectCleanExit}};
  std::unique_ptr<sim::KubeletEmulator> kubelet_;
  json last_;
};

TEST_F(RemediationTest, AFaultyIdleDeviceIsResetCheckedAndReturned) {
  StartPlugin("{ecc: reset, hw_errors: reset}");
  const uint64_t before = ResetRequests(5);
  const Clock::time_point fault = Clock::now();
  ASSERT_EQ(sim_.Ctl({"inject", "hbm-ue", "--device", "5"}).code, 0);
  ASSERT_TRUE(WaitDevice(5, [](const json& d) { return d["withheld"] == true; })) << last_.dump();
  ASSERT_TRUE(WaitDevice(5,
                         [](const json& d) {
                           return d.contains("remediation") &&
                                  d["remediation"]["phase"] == "returned" &&
                                  d["withheld"] == false && d["state"] == "healthy";
                         }))
      << last_.dump() << Err();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - fault);
  std::printf(
      "reset remediation: fault -> withheld -> reset -> check passed -> returned in %lld ms\n",
      static_cast<long long>(took.count()));
  EXPECT_GT(ResetRequests(5), before) << "the device was reset through sysfs";
  EXPECT_NE(Metrics().find("neuron_device_remediations_total{action=\"reset\",neuron_device=\"5\","
                           "result=\"passed\"} 1"),
            std::string::npos)
      << Metrics();
  EXPECT_TRUE(fs::exists(tmp_.path() / "state")) << "the check kept its baseline";
}

TEST_F(RemediationTest, AnAllocatedDeviceIsNeverReset) {
  StartPlugin("{ecc: reset, hw_errors: reset}");
  const fs::path socket = kdir_ / "device-plugins/neuron-i-reset.sock";
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(socket); }, kCeiling));
  v1beta1::AllocateResponse r;
  ASSERT_TRUE(Allocate(PluginStub(socket).get(), {{"6"}}, &r).ok());
  const uint64_t before = ResetRequests(6);
  ASSERT_EQ(sim_.Ctl({"inject", "hbm-ue", "--device", "6"}).code, 0);
  ASSERT_TRUE(WaitDevice(6, [](const json& d) {
    return d.contains("remediation") && d["remediation"]["phase"] == "refused";
  })) << last_.dump();
  EXPECT_EQ(last_["in_use"], true);
  EXPECT_EQ(last_["remediation"]["message"],
            "reset refused: in a pod's allocation or prepared claim");
  EXPECT_EQ(last_["state"], "unhealthy");
  EXPECT_EQ(ResetRequests(6), before);
}

TEST_F(RemediationTest, ADeviceAProcessHoldsOpenIsNeverReset) {
  StartPlugin("{ecc: reset, hw_errors: reset}");
  const fs::path node = root_ / "dev/neuron7";
  ASSERT_GT(sim_.StartUnderDriver({NEURON_FD_HOLDER_BIN, node.string()}, "holder"), 0);
  ASSERT_TRUE(WaitUntil(
      [&] { return ReadFile(tmp_.path() / "holder.out").find("holding") != std::string::npos; },
      kCeiling));
  const uint64_t before = ResetRequests(7);
  ASSERT_EQ(sim_.Ctl({"inject", "hbm-ue", "--device", "7"}).code, 0);
  ASSERT_TRUE(WaitDevice(7,
                         [](const json& d) {
                           return d.contains("remediation") &&
                                  d["remediation"]["phase"] == "refused";
                         }))
      << last_.dump() << Err();
  EXPECT_NE(last_["remediation"]["message"].get<std::string>().find("held open by PID"),
            std::string::npos)
      << last_.dump();
  EXPECT_NE(last_["remediation"]["message"].get<std::string>().find("fd_holder"), std::string::npos)
      << last_.dump();
  EXPECT_EQ(ResetRequests(7), before);
  EXPECT_EQ(last_["withheld"], true) << "withheld meanwhile: nobody else is given it";
}

// A check that cannot pass: here the node has no reference programs, so no try can prove the
// device (a failed check on a device is HealthCheckTest's, tests/top/health_check_test.cc).
TEST_F(RemediationTest, ACheckThatCannotPassRunsOutOfTriesAndTheDeviceStaysWithheld) {
  fs::remove_all(tmp_.path() / "programs");
  StartPlugin("{ecc: reset, hw_errors: reset}", /*tries=*/2);
  const uint64_t before = ResetRequests(2);
  ASSERT_EQ(sim_.Ctl({"inject", "hbm-ue", "--device", "2"}).code, 0);
  ASSERT_TRUE(WaitDevice(2,
                         [](const json& d) {
                           return d.contains("remediation") &&
                                  d["remediation"]["phase"] == "gave_up";
                         }))
      << last_.dump() << Err();
  EXPECT_EQ(last_["remediation"]["tries"], 2);
  EXPECT_NE(last_["remediation"]["message"].get<std::string>().find(
                "no reference program: the device cannot be proved"),
            std::string::npos)
      << last_.dump();
  EXPECT_EQ(last_["withheld"], true);
  // The last reset's return to READY clears the evidence (read at the watcher's next poll): the
  // device is healthy by it, and stays withheld because only a passed check returns it.
  EXPECT_TRUE(WaitDevice(2, [](const json& d) { return d["state"] == "healthy"; })) << last_.dump();
  EXPECT_EQ(last_["withheld"], true);
  EXPECT_EQ(ResetRequests(2), before + uint64_t{2 * 2}) << "two tries, each a reset of both cores";
  EXPECT_NE(Metrics().find("neuron_device_remediations_total{action=\"reset\",neuron_device=\"2\","
                           "result=\"gave_up\"} 1"),
            std::string::npos);
  EXPECT_NE(Err().find("the device stays withheld until the plugin restarts"), std::string::npos);
}

}  // namespace
}  // namespace neuron::plugin

// Health transitions without a simulated node: core's HealthEvidence (core/node/health_evidence.h)
// fed events and ECC counter files step by step, judged by the plugin's JudgeHealth under the
// default policy and with one kind of evidence switched off (docs/architecture.md#health).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/base/component_log.h"
#include "core/node/health_evidence.h"
#include "plugin/node_watcher.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

namespace fs = std::filesystem;

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Spelled here, not taken from core/driver: a misspelling shared by both sides still fails.
    fs::create_directories(Hardware0());
    SetSramUncorrected(0);
  }
  fs::path Hardware0() const {
    return root_ / "sys/devices/virtual/neuron_device/neuron0/stats/hardware";
  }
  void SetSramUncorrected(int n) const {
    std::ofstream(Hardware0() / "sram_ecc_uncorrected") << n << "\n";
  }

  neuron::testing::TempDir dir_;
  const fs::path root_ = dir_.path();
};

Event DeviceEvent(EventKind kind, std::optional<DeviceState> state = std::nullopt) {
  Event e;
  e.kind = kind;
  e.device = 0;
  e.state = state;
  if (kind == EventKind::kHardwareError) {
    HwErrorRecord record;
    record.type = "SRAM_UNCORRECTABLE_ERROR";
    record.nd_id = 0;
    record.text = "NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR nd-id=0";
    e.hw_error = record;
  }
  return e;
}

Event EfaEvent(EventKind kind, std::string port = "") {
  Event e;
  e.kind = kind;
  e.efa = "efa0";
  e.port_state = std::move(port);
  return e;
}

struct HealthStep {
  std::string name;
  std::function<void(HealthEvidence&)> act;
  std::string reason;         // device 0's (or efa0's) under the default policy; "": healthy
  bool HealthPolicy::*off;    // one kind of evidence switched off ...
  std::string reason_if_off;  // ... and the reason then
};

std::string ReasonOf(const Hardware& hw, bool efa) {
  if (efa) return hw.efas.empty() ? "no efa" : hw.efas[0].reason;
  return hw.devices.empty() ? "no device" : hw.devices[0].reason;
}

// Device 0's life: each step, the reason under the default policy and with one kind off.
// `set_sram` writes device 0's uncorrected SRAM ECC counter.
std::vector<HealthStep> DeviceSteps(const std::function<void(int)>& set_sram) {
  const auto ready = DeviceState::kReady;
  return {
      {"appears READY; the first poll takes the baseline",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceAdded, ready));
         h.PollEcc();
       },
       "", &HealthPolicy::ecc, ""},
      {"an uncorrected SRAM error",
       [=](HealthEvidence& h) {
         set_sram(1);
         h.PollEcc();
       },
       "uncorrected ECC errors", &HealthPolicy::ecc, ""},
      {"a NEURON_HW_ERR record as well: ECC is named first",
       [=](HealthEvidence& h) { h.Apply(DeviceEvent(EventKind::kHardwareError)); },
       "uncorrected ECC errors", &HealthPolicy::ecc, "NEURON_HW_ERR record"},
      {"in reset",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceStateChanged, DeviceState::kReset));
       },
       "state RESET", &HealthPolicy::state, "uncorrected ECC errors"},
      {"READY again: a new baseline forgets the old evidence",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceStateChanged, ready));
         h.PollEcc();
       },
       "", &HealthPolicy::hw_errors, ""},
      {"a NEURON_HW_ERR record alone",
       [=](HealthEvidence& h) { h.Apply(DeviceEvent(EventKind::kHardwareError)); },
       "NEURON_HW_ERR record", &HealthPolicy::hw_errors, ""},
      {"unplugged: absent, and listed still",
       [=](HealthEvidence& h) { h.Apply(DeviceEvent(EventKind::kDeviceRemoved)); }, "absent",
       &HealthPolicy::absence, "NEURON_HW_ERR record"},
      {"replugged: a new baseline",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceAdded, ready));
         h.PollEcc();
       },
       "", &HealthPolicy::absence, ""},
      {"a counter that restarted lower is the new baseline, not evidence",
       [=](HealthEvidence& h) {
         set_sram(0);
         h.PollEcc();
       },
       "", &HealthPolicy::ecc, ""},
      {"and rising from there is evidence",
       [=](HealthEvidence& h) {
         set_sram(1);
         h.PollEcc();
       },
       "uncorrected ECC errors", &HealthPolicy::ecc, ""},
      {"a state that cannot be read",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceStateChanged, std::nullopt));
       },
       "state unknown", &HealthPolicy::state, "uncorrected ECC errors"},
  };
}

std::vector<HealthStep> EfaSteps() {
  return {
      {"EFA appears ACTIVE",
       [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaAdded, "ACTIVE")); }, "",
       &HealthPolicy::efa_port, ""},
      {"EFA port DOWN",
       [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaPortStateChanged, "DOWN")); },
       "port DOWN", &HealthPolicy::efa_port, ""},
      {"EFA port state unreadable",
       [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaPortStateChanged, "")); },
       "port unknown", &HealthPolicy::efa_port, ""},
      {"EFA removed", [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaRemoved)); },
       "absent", &HealthPolicy::absence, ""},
  };
}

TEST_F(HealthTest, EvidenceComesAndGoesAsThePolicySays) {
  const std::vector<HealthStep> device_steps =
      DeviceSteps([this](int n) { SetSramUncorrected(n); });
  const std::vector<HealthStep> efa_steps = EfaSteps();
  HealthEvidence evidence(RootPaths(root_), ComponentLogger("test.health"));
  for (const auto* steps : {&device_steps, &efa_steps}) {
    const bool efa = steps == &efa_steps;
    for (const HealthStep& step : *steps) {
      SCOPED_TRACE(step.name);
      step.act(evidence);
      EXPECT_EQ(ReasonOf(JudgeHealth(evidence, HealthPolicy{}), efa), step.reason);
      HealthPolicy off;
      off.*step.off = false;
      EXPECT_EQ(ReasonOf(JudgeHealth(evidence, off), efa), step.reason_if_off);
    }
  }
  const Hardware hw = JudgeHealth(evidence, HealthPolicy{});
  ASSERT_EQ(hw.devices.size(), 1u);
  EXPECT_FALSE(hw.devices[0].healthy);
  EXPECT_TRUE(hw.devices[0].unknown) << "present, state unreadable";
  ASSERT_EQ(hw.efas.size(), 1u);
  EXPECT_FALSE(hw.efas[0].present);
}

TEST_F(HealthTest, AnEventAboutSomethingNewAsksForARescan) {
  HealthEvidence evidence(RootPaths(root_), ComponentLogger("test.health"));
  EXPECT_TRUE(evidence.Apply(DeviceEvent(EventKind::kDeviceStateChanged, DeviceState::kReady)))
      << "a device not known yet";
  EXPECT_FALSE(evidence.Apply(DeviceEvent(EventKind::kDeviceRemoved))) << "nothing to forget";
  EXPECT_TRUE(evidence.Apply(DeviceEvent(EventKind::kDeviceAdded, DeviceState::kReady)));
  EXPECT_FALSE(evidence.Apply(DeviceEvent(EventKind::kDeviceStateChanged, DeviceState::kReset)));
  EXPECT_TRUE(evidence.Apply(EfaEvent(EventKind::kEfaAdded, "ACTIVE"))) << "its uverbs node";
  EXPECT_FALSE(evidence.Apply(EfaEvent(EventKind::kEfaPortStateChanged, "DOWN")));
}

}  // namespace
}  // namespace neuron::plugin

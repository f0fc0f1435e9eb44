// Health transitions without a simulated node: core's HealthEvidence (core/node/health_evidence.h)
// fed events and ECC counter files step by step, judged by the plugin's JudgeHealth under the
// default policy and with one kind of evidence switched off (docs/architecture.md#health); and
// every health counter row raised in a simulated tree (no daemon) as evidence of its class.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/component_log.h"
#include "core/discovery/inventory.h"
#include "core/node/device_health.h"
#include "core/node/health_evidence.h"
#include "nlohmann/json.hpp"
#include "plugin/health_api.h"
#include "plugin/node_watcher.h"
#include "tests/support/sim_tree_fixture.h"
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
    for (const char* f : {"mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected"}) {
      std::ofstream(Hardware0() / f) << "0\n";
    }
  }
  fs::path Hardware0() const {
    return root_ / "sys/devices/virtual/neuron_device/neuron0/stats/hardware";
  }
  void SetSramUncorrected(int n) const {
    std::ofstream(Hardware0() / "sram_ecc_uncorrected") << n << "\n";
  }
  // Evidence as a consumer without Events keeps it (poll_state), with one scan applied: device 0,
  // READY.
  std::unique_ptr<HealthEvidence> PollingEvidenceAfterAScan() const {
    fs::create_directories(root_ / "sys/module/neuron");
    auto evidence = std::make_unique<HealthEvidence>(
        RootPaths(root_), ComponentLogger("test.health"),
        HealthEvidenceOptions{.heartbeat_period = std::chrono::seconds(1), .poll_state = true});
    Inventory inv;
    NeuronDevice d;
    d.index = 0;
    d.state = DeviceState::kReady;
    inv.devices.push_back(d);
    evidence->ApplyScan(inv);
    return evidence;
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
  std::string reason;  // device 0's (or efa0's) under the default policy; "": healthy
  EvidenceClass off = EvidenceClass::kAbsence;  // one kind of evidence switched off ...
  std::string reason_if_off;                    // ... and the reason then
};

std::string ReasonOf(const Hardware& hw, bool efa) {
  if (efa) return hw.efas.empty() ? "no efa" : hw.efas[0].reason;
  return hw.devices.empty() ? "no device" : hw.devices[0].reason;
}

constexpr const char* kEcc = "uncorrected ECC (sram)";
constexpr const char* kHwErr = "NEURON_HW_ERR SRAM_UNCORRECTABLE_ERROR";

// Device 0's life: each step, the reason under the default policy and with one kind off.
// `set_sram` writes device 0's uncorrected SRAM ECC counter.
std::vector<HealthStep> DeviceSteps(const std::function<void(int)>& set_sram) {
  const auto ready = DeviceState::kReady;
  return {
      {"appears READY; the first poll takes the baseline",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceAdded, ready));
         h.PollCounters(std::chrono::steady_clock::now());
       },
       "", EvidenceClass::kEcc, ""},
      {"an uncorrected SRAM error",
       [=](HealthEvidence& h) {
         set_sram(1);
         h.PollCounters(std::chrono::steady_clock::now());
       },
       kEcc, EvidenceClass::kEcc, ""},
      {"a NEURON_HW_ERR record as well: ECC is named first",
       [=](HealthEvidence& h) { h.Apply(DeviceEvent(EventKind::kHardwareError)); }, kEcc,
       EvidenceClass::kEcc, kHwErr},
      {"in reset",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceStateChanged, DeviceState::kReset));
       },
       "state RESET", EvidenceClass::kState, kEcc},
      {"READY again: a new baseline forgets the old evidence",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceStateChanged, ready));
         h.PollCounters(std::chrono::steady_clock::now());
       },
       "", EvidenceClass::kHwErrors, ""},
      {"a NEURON_HW_ERR record alone",
       [=](HealthEvidence& h) { h.Apply(DeviceEvent(EventKind::kHardwareError)); }, kHwErr,
       EvidenceClass::kHwErrors, ""},
      {"unplugged: absent, and listed still",
       [=](HealthEvidence& h) { h.Apply(DeviceEvent(EventKind::kDeviceRemoved)); }, "absent",
       EvidenceClass::kAbsence, kHwErr},
      {"replugged: a new baseline",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceAdded, ready));
         h.PollCounters(std::chrono::steady_clock::now());
       },
       "", EvidenceClass::kAbsence, ""},
      {"a counter that restarted lower is the new baseline, not evidence",
       [=](HealthEvidence& h) {
         set_sram(0);
         h.PollCounters(std::chrono::steady_clock::now());
       },
       "", EvidenceClass::kEcc, ""},
      {"and rising from there is evidence",
       [=](HealthEvidence& h) {
         set_sram(1);
         h.PollCounters(std::chrono::steady_clock::now());
       },
       kEcc, EvidenceClass::kEcc, ""},
      {"a state that cannot be read beside a fault: the fault decides",
       [=](HealthEvidence& h) {
         h.Apply(DeviceEvent(EventKind::kDeviceStateChanged, std::nullopt));
       },
       kEcc, EvidenceClass::kState, kEcc},
      {"and alone: unknown",
       [=](HealthEvidence& h) {
         set_sram(0);  // a restart: the new baseline
         h.PollCounters(std::chrono::steady_clock::now());
         h.Apply(DeviceEvent(EventKind::kDeviceAdded, std::nullopt));
       },
       "device state cannot be read", EvidenceClass::kState, ""},
  };
}

std::vector<HealthStep> EfaSteps() {
  return {
      {"EFA appears ACTIVE",
       [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaAdded, "ACTIVE")); }, "",
       EvidenceClass::kEfaPort, ""},
      {"EFA port DOWN",
       [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaPortStateChanged, "DOWN")); },
       "port DOWN", EvidenceClass::kEfaPort, ""},
      {"EFA port state unreadable",
       [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaPortStateChanged, "")); },
       "port unknown", EvidenceClass::kEfaPort, ""},
      {"EFA removed", [](HealthEvidence& h) { h.Apply(EfaEvent(EventKind::kEfaRemoved)); },
       "absent", EvidenceClass::kAbsence, ""},
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
      off.actions[step.off] = Action::kIgnore;
      EXPECT_EQ(ReasonOf(JudgeHealth(evidence, off), efa), step.reason_if_off);
    }
  }
  const Hardware hw = JudgeHealth(evidence, HealthPolicy{});
  ASSERT_EQ(hw.devices.size(), 1u);
  EXPECT_FALSE(hw.devices[0].healthy) << "unknown is not healthy to the kubelet";
  EXPECT_TRUE(hw.devices[0].unknown) << "present, state unreadable";
  EXPECT_EQ(hw.devices[0].health.state, HealthState::kUnknown);
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

// A consumer without Events (the exporter, the tools) has PollCounters look at presence and
// state: a reset between two scans clears the ECC evidence, an unplug is absent, a replug is a
// new baseline.
TEST_F(HealthTest, WithoutEventsThePollSeesResetsAndUnplugs) {
  const fs::path dev0 = root_ / "sys/devices/virtual/neuron_device/neuron0";
  auto set_state = [&](int s) { std::ofstream(dev0 / "reset") << s << "\n"; };
  set_state(1);
  const std::unique_ptr<HealthEvidence> evidence = PollingEvidenceAfterAScan();
  const auto t0 = std::chrono::steady_clock::now();
  auto judge = [&](int ms) {
    evidence->PollCounters(t0 + std::chrono::milliseconds(ms));
    return JudgeDevice(evidence->devices().at(0), EvidenceClasses::All());
  };
  EXPECT_EQ(judge(0).state, HealthState::kHealthy);
  SetSramUncorrected(1);
  EXPECT_EQ(judge(250).components.Join(), "sram");
  set_state(0);
  EXPECT_EQ(judge(500).reasons.front(), "state RESET") << "seen without a scan";
  set_state(1);
  EXPECT_EQ(judge(750).state, HealthState::kHealthy) << "READY again: a new baseline";
  fs::rename(dev0, root_ / "unplugged");
  DeviceHealth h = judge(1000);
  EXPECT_EQ(h.reasons, std::vector<std::string>{"absent"});
  fs::rename(root_ / "unplugged", dev0);
  SetSramUncorrected(2);
  EXPECT_EQ(judge(1250).state, HealthState::kHealthy) << "replugged: its counters are the baseline";
  fs::remove(dev0 / "reset");
  h = judge(1500);
  EXPECT_EQ(h.state, HealthState::kUnknown);
  EXPECT_EQ(h.reasons, std::vector<std::string>{"device state cannot be read"});
}

// While the consumer reads the kernel log (the exporter), the driver's reset records are what
// read a device's state; the poll reads every state only every state_recheck (10 s) besides. A
// reset that began and ended between two reads is still a reset: the evidence starts afresh.
TEST_F(HealthTest, WhileTheLogIsReadItsResetRecordsReadTheState) {
  const fs::path dev0 = root_ / "sys/devices/virtual/neuron_device/neuron0";
  auto set_state = [&](int s) { std::ofstream(dev0 / "reset") << s << "\n"; };
  set_state(1);
  const std::unique_ptr<HealthEvidence> evidence = PollingEvidenceAfterAScan();
  evidence->SetResetsLogged(true);
  const auto t0 = std::chrono::steady_clock::now();
  auto judge = [&](int ms) {
    evidence->PollCounters(t0 + std::chrono::milliseconds(ms));
    return JudgeDevice(evidence->devices().at(0), EvidenceClasses::All());
  };
  auto record = [&](ResetStep step) {
    Event e = DeviceEvent(EventKind::kDeviceReset);
    e.reset = step;
    evidence->Apply(e);
  };
  EXPECT_EQ(judge(0).state, HealthState::kHealthy);
  SetSramUncorrected(1);
  EXPECT_EQ(judge(1000).components.Join(), "sram");
  set_state(0);
  EXPECT_EQ(judge(2000).components.Join(), "sram") << "no record: the state is not read";
  record(ResetStep::kInitiated);
  EXPECT_EQ(judge(3000).reasons.front(), "state RESET");
  set_state(1);
  record(ResetStep::kCompleted);
  EXPECT_EQ(judge(4000).state, HealthState::kHealthy) << "READY again: a new baseline";
  SetSramUncorrected(2);
  EXPECT_EQ(judge(5000).components.Join(), "sram");
  record(ResetStep::kCompleted);  // RESET came and went between two reads
  EXPECT_EQ(judge(6000).state, HealthState::kHealthy) << "a reset nobody saw still happened";
  set_state(2);
  EXPECT_EQ(judge(7000).state, HealthState::kHealthy) << "no record, before the recheck";
  EXPECT_EQ(judge(12000).reasons.front(), "state INVALID") << "the recheck reads every state";
}

// A scan is a read of presence and state: the poll right after it does not read them again
// (neuron-ls's one health read after its scan), and the next poll does.
TEST_F(HealthTest, ThePollRightAfterAScanTakesItsStateFromTheScan) {
  const fs::path dev0 = root_ / "sys/devices/virtual/neuron_device/neuron0";
  std::ofstream(dev0 / "reset") << 0 << "\n";  // RESET on disk; the scan said READY
  const std::unique_ptr<HealthEvidence> evidence = PollingEvidenceAfterAScan();
  const auto t0 = std::chrono::steady_clock::now();
  evidence->PollCounters(t0);
  EXPECT_EQ(evidence->devices().at(0).state, DeviceState::kReady);
  evidence->PollCounters(t0 + std::chrono::milliseconds(250));
  EXPECT_EQ(evidence->devices().at(0).state, DeviceState::kReset);
}

// The v2 chip layer (Trn1, Inf2) prints mem_ecc_repairable_uncorrected but never moves it
// (docs/driver-interface.md#generation-differences): the once-a-second poll leaves it unread there,
// 16 files a second fewer on a trn1.32xlarge. On Trn2 it is evidence like its kin.
TEST_F(HealthTest, TheRepairableHbmCounterIsReadWhereTheChipCanMoveIt) {
  fs::create_directories(root_ / "sys/module/neuron");
  const fs::path repairable = Hardware0() / "mem_ecc_repairable_uncorrected";
  for (const std::string instance_type : {"Trn1", "Inf2", "Trn2"}) {
    SCOPED_TRACE(instance_type);
    std::ofstream(repairable) << "0\n";
    HealthEvidence evidence(RootPaths(root_), ComponentLogger("test.health"));
    Inventory inv;
    NeuronDevice d;
    d.index = 0;
    d.state = DeviceState::kReady;
    d.instance_type = instance_type;
    inv.devices.push_back(d);
    evidence.ApplyScan(inv);
    const auto t0 = std::chrono::steady_clock::now();
    evidence.PollCounters(t0);  // the baseline
    std::ofstream(repairable) << "1\n";
    evidence.PollCounters(t0 + std::chrono::milliseconds(100));
    const DeviceHealth h = JudgeDevice(evidence.devices().at(0), EvidenceClasses::All());
    EXPECT_EQ(h.state, instance_type == "Trn2" ? HealthState::kUnhealthy : HealthState::kHealthy);
  }
}

// A driver 2.30 device (Trn2): its tree holds health_status/ with the two files of the notes.
class Driver230Test : public HealthTest {
 protected:
  using Clock = std::chrono::steady_clock;
  void SetUp() override {
    HealthTest::SetUp();
    fs::create_directories(HealthStatus0());
    for (const char* f : {"hbm_ecc_err_count", "repairable_hbm_ecc_err_count", "sram_ecc_err_count",
                          "hw_error_event"}) {
      std::ofstream(HealthStatus0() / f) << "0\n";
    }
    Write("unhealthy_components", "\n");
    Write("healthcheck_heartbeat", "5\n");
    fs::create_directories(root_ / "sys/module/neuron");
    Inventory inv;
    NeuronDevice d;
    d.index = 0;
    d.state = DeviceState::kReady;
    d.sysfs_groups = NodeGroups{NodeGroup::kHealthStatus, NodeGroup::kHealthComponents};
    inv.devices.push_back(d);
    evidence_.ApplyScan(inv);
    Poll(0);
  }
  fs::path HealthStatus0() const { return Hardware0() / "health_status"; }
  void Write(const char* name, const std::string& text) const {
    std::ofstream(HealthStatus0() / name) << text;
  }
  void Poll(int ms) { evidence_.PollCounters(t0_ + std::chrono::milliseconds(ms)); }
  DeviceHealth Judge(const HealthPolicy& p = {}) const {
    return JudgeHealth(evidence_, p).devices.at(0).health;
  }

  HealthEvidence evidence_{RootPaths(root_), ComponentLogger("test.health"),
                           HealthEvidenceOptions{.heartbeat_period = std::chrono::seconds(1)}};
  const Clock::time_point t0_ = Clock::now();
};

TEST_F(Driver230Test, TheDriversListOfComponentsMakesTheDeviceUnhealthy) {
  EXPECT_EQ(Judge().state, HealthState::kHealthy);
  Write("unhealthy_components", "hbm, link_efa,warp_drive\n");
  Poll(100);
  const DeviceHealth h = Judge();
  EXPECT_EQ(h.state, HealthState::kUnhealthy);
  EXPECT_EQ(h.components.Join(), "hbm,link_efa");
  ASSERT_FALSE(h.reasons.empty());
  EXPECT_EQ(h.reasons[0], "driver: unhealthy hbm,link_efa,warp_drive") << "a newer word is kept";
  HealthPolicy off;
  off.actions[EvidenceClass::kComponents] = Action::kIgnore;
  EXPECT_EQ(Judge(off).state, HealthState::kHealthy);
  Write("unhealthy_components", "\n");
  Poll(200);
  EXPECT_EQ(Judge().state, HealthState::kHealthy) << "the driver's list is read as it is now";
}

TEST_F(Driver230Test, AStalledHeartbeatIsUnknownAfterTwoPeriods) {
  Poll(1500);
  EXPECT_EQ(Judge().state, HealthState::kHealthy) << "within two periods";
  Poll(2100);
  DeviceHealth h = Judge();
  EXPECT_EQ(h.state, HealthState::kUnknown);
  EXPECT_EQ(h.reasons, std::vector<std::string>{"healthcheck_heartbeat stalled"});
  HealthPolicy off;
  off.actions[EvidenceClass::kHeartbeat] = Action::kIgnore;
  EXPECT_EQ(Judge(off).state, HealthState::kHealthy);
  Write("healthcheck_heartbeat", "6\n");
  Poll(2200);
  EXPECT_EQ(Judge().state, HealthState::kHealthy) << "it moves again";
}

TEST_F(Driver230Test, AnUnreadableEvidenceFileIsUnknownNotHealthy) {
  fs::remove(Hardware0() / "mem_ecc_uncorrected");
  fs::remove(HealthStatus0() / "healthcheck_heartbeat");
  Poll(100);
  const DeviceHealth h = Judge();
  EXPECT_EQ(h.state, HealthState::kUnknown);
  EXPECT_EQ(h.reasons, (std::vector<std::string>{
                           "stats/hardware/mem_ecc_uncorrected cannot be read",
                           "stats/hardware/health_status/healthcheck_heartbeat cannot be read"}));
  HealthPolicy off;
  off.actions[EvidenceClass::kEcc] = Action::kIgnore;
  off.actions[EvidenceClass::kHeartbeat] = Action::kIgnore;
  EXPECT_EQ(Judge(off).state, HealthState::kHealthy) << "evidence not counted is not missed";
}

TEST_F(Driver230Test, RisingCorrectedEccIsDegradedNotUnhealthy) {
  // The device's tree gains the corrected counters (2.30): a first reading is no rise.
  std::ofstream(Hardware0() / "mem_ecc_corrected") << "3\n";
  std::ofstream(Hardware0() / "sram_ecc_corrected") << "0\n";
  Inventory inv;
  NeuronDevice d;
  d.index = 0;
  d.state = DeviceState::kReady;
  d.sysfs_groups =
      NodeGroups{NodeGroup::kHealthStatus, NodeGroup::kHealthComponents, NodeGroup::kEccCorrected};
  inv.devices.push_back(d);
  evidence_.ApplyScan(inv);
  Poll(100);
  EXPECT_FALSE(Judge().degraded());
  std::ofstream(Hardware0() / "mem_ecc_corrected") << "4\n";
  Poll(200);
  const DeviceHealth h = Judge();
  EXPECT_EQ(h.state, HealthState::kHealthy);
  EXPECT_TRUE(h.degraded());
  HealthPolicy off;
  off.actions[EvidenceClass::kEccCorrected] = Action::kIgnore;
  EXPECT_FALSE(Judge(off).degraded());
}

// Every row of core/driver/health_counters.h, raised in the simulator's tree as `ctl raise`
// raises it, is evidence of its class: a kFault row makes its device unhealthy naming the row's
// component, a kDegraded row flags it degraded. A row a device apiece, on a trn2 of the newest
// generation known, whose tree has every row's group (a row of a newer driver comes with it).
TEST(HealthCounterRowsTest, EveryRowRaisedInTheSimulatorIsEvidenceOfItsClass) {
  neuron::testing::TempDir dir("health-rows");
  auto tree = neuron::testing::BuildSimTree(
      dir.path(), "trn2.48xlarge", {.driver_version = std::string(NewestGeneration().name)});
  ASSERT_TRUE(tree.ok()) << tree.status();
  const absl::StatusOr<Inventory> inv = neuron::testing::ScanSimTree(**tree);
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_LE(kHealthCounters.size(), inv->devices.size());
  HealthEvidence evidence(RootPaths(dir.path()), ComponentLogger("test.health"));
  evidence.ApplyScan(*inv);
  const auto t0 = std::chrono::steady_clock::now();
  evidence.PollCounters(t0);  // the baseline
  for (size_t i = 0; i < kHealthCounters.size(); ++i) {
    const absl::Status s =
        (*tree)->AddHardwareErrors(static_cast<int>(i), kHealthCounters[i].name, 1);
    ASSERT_TRUE(s.ok()) << s;
  }
  evidence.PollCounters(t0 + std::chrono::milliseconds(100));
  for (size_t i = 0; i < kHealthCounters.size(); ++i) {
    const HealthCounter& c = kHealthCounters[i];
    SCOPED_TRACE(c.name);
    const DeviceHealth h =
        JudgeDevice(evidence.devices().at(static_cast<int>(i)), EvidenceClasses::All());
    if (c.meaning == CounterMeaning::kFault) {
      EXPECT_EQ(h.state, HealthState::kUnhealthy);
      EXPECT_TRUE(h.classes.Has(c.evidence_class));
      EXPECT_TRUE(h.components.Has(c.component));
      EXPECT_FALSE(h.degraded());
    } else {
      EXPECT_EQ(h.state, HealthState::kHealthy);
      EXPECT_TRUE(h.degraded_classes.Has(c.evidence_class));
    }
  }
}

TEST_F(Driver230Test, ADeviceGoneWithTheDriverIsUnknownNotAbsent) {
  fs::remove_all(root_ / "sys/module/neuron");
  evidence_.ApplyScan(Inventory{});
  DeviceHealth h = Judge();
  EXPECT_EQ(h.state, HealthState::kUnknown);
  EXPECT_EQ(h.reasons, std::vector<std::string>{"the Neuron driver is not loaded"});
  fs::create_directories(root_ / "sys/module/neuron");
  evidence_.ApplyScan(Inventory{});
  h = Judge();
  EXPECT_EQ(h.state, HealthState::kUnhealthy);
  EXPECT_EQ(h.components.Join(), "link_host");
}

TEST(NodeConditionTest, APermanentFaultNamesItsTypeTransientOnesDoNot) {
  DeviceHealth reset{.state = HealthState::kUnhealthy,
                     .components = {},
                     .reasons = {"state RESET"},
                     .classes = {EvidenceClass::kState},
                     .hw_error_types = {}};
  EXPECT_FALSE(JudgeNodeCondition({{0, reset}}).problem);
  EXPECT_EQ(JudgeNodeCondition({{0, reset}}).reason, "NeuronHasNoError");
  DeviceHealth hbm = reset;
  hbm.components.Add(HealthComponent::kHbm);
  hbm.reasons = {"uncorrected ECC (hbm)"};
  hbm.classes = {EvidenceClass::kEcc};
  DeviceHealth link = hbm;
  link.components = {};
  link.components.Add(HealthComponent::kLinkEfa);
  link.reasons = {"driver: unhealthy link_efa"};
  link.classes = {EvidenceClass::kComponents};
  const NodeConditionVerdict c = JudgeNodeCondition({{0, reset}, {3, hbm}, {5, link}});
  EXPECT_TRUE(c.problem);
  EXPECT_EQ(c.reason, "NeuronHasError_HBM_UNCORRECTABLE_ERROR");
  EXPECT_EQ(c.message, "neuron3: uncorrected ECC (hbm) | neuron5: driver: unhealthy link_efa");
  EXPECT_EQ(JudgeNodeCondition({{5, link}}).reason, "NeuronHasError_LINK_EFA");
  DeviceHealth record = hbm;
  record.classes = {EvidenceClass::kHwErrors};
  record.hw_error_types = {"DMA_ERROR"};
  EXPECT_EQ(JudgeNodeCondition({{1, record}}).reason, "NeuronHasError_DMA_ERROR");
}

// A device whose resets gave up is lost to the node until the plugin restarts: the condition is
// True for it even when its evidence no longer condemns it, and names it beside what does.
TEST(NodeConditionTest, AResetThatGaveUpRaisesTheCondition) {
  NodeView view;
  HardwareDevice device;
  device.index = 2;
  device.present = true;
  view.devices[2] = device;
  const auto condition = [&](const HealthContext& context) {
    const HealthResponse r = BuildHealthResponse(view, std::nullopt, false, std::nullopt, context);
    return nlohmann::json::parse(r.body)["node_condition"];
  };
  HealthContext context;
  context.remediation[2] = {.phase = "failed", .tries = 1, .message = "check failed"};
  EXPECT_EQ(condition(context)["status"], "False");
  context.remediation[2] = {
      .phase = std::string{kPhaseGaveUp}, .tries = 3, .message = "check failed"};
  const nlohmann::json c = condition(context);
  EXPECT_EQ(c["status"], "True");
  EXPECT_EQ(c["reason"], "NeuronHasError_RESET_FAILED");
  EXPECT_EQ(c["message"], "neuron2: reset gave up after 3 tries (check failed)");
  // Stale evidence still makes it Unknown: nothing is known about now.
  const HealthResponse stale = BuildHealthResponse(view, std::nullopt, true, std::nullopt, context);
  EXPECT_EQ(nlohmann::json::parse(stale.body)["node_condition"]["status"], "Unknown");
}

}  // namespace
}  // namespace neuron::plugin

// Both discovery back ends agree on simulated trees (docs/architecture.md#discovery), and the
// libudev event path works under umockdev. libudev only sees a fake tree through umockdev's
// preload, so this executable runs with LD_PRELOAD=libumockdev-preload.so.0 (ctest sets it); run by
// hand without it, each test re-runs itself in a child process with the preload.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <umockdev.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "core/discovery/inventory.h"
#include "core/events/events.h"
#include "driver-sim/driver/sim_tree.h"
#include "tests/support/event_collector.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

bool PreloadActive() {
  const char* p = std::getenv("LD_PRELOAD");
  return p != nullptr && std::strstr(p, "libumockdev-preload") != nullptr;
}

// Runs the current test in a child with umockdev's preload (ASan must tolerate the preload
// coming first, see docs/build.md#sanitizers). Returns its exit status.
int RerunUnderUmockdev() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("LD_PRELOAD", "libumockdev-preload.so.0", 1);
    std::string asan = std::getenv("ASAN_OPTIONS") != nullptr ? std::getenv("ASAN_OPTIONS") : "";
    ::setenv("ASAN_OPTIONS",
             (asan + (asan.empty() ? "" : ":") + "verify_asan_link_order=0").c_str(), 1);
    ::execl("/proc/self/exe", "discovery_agreement_test", filter.c_str(), nullptr);
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

#define REQUIRE_UMOCKDEV()                                               \
  do {                                                                   \
    if (!PreloadActive()) {                                              \
      const int status = RerunUnderUmockdev();                           \
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)         \
          << "the test failed under umockdev (status " << status << ")"; \
      return;                                                            \
    }                                                                    \
  } while (0)

using TempRoot = ::neuron::testing::TempDir;

// UMOCKDEV_DIR for the duration of a scope: libudev in this process then reads `root`.
class UmockdevDir {
 public:
  explicit UmockdevDir(const fs::path& root) { ::setenv("UMOCKDEV_DIR", root.c_str(), 1); }
  ~UmockdevDir() { ::unsetenv("UMOCKDEV_DIR"); }
};

Inventory Scan(Discovery& d) {
  absl::StatusOr<Inventory> inv = d.Scan();
  EXPECT_TRUE(inv.ok()) << inv.status();
  return inv.ok() ? *std::move(inv) : Inventory{};
}

// Scans `root` with both back ends and the same options; returns the directory back end's
// inventory after checking that the udev one is equal to it.
Inventory ExpectAgreement(const fs::path& root, const DiscoveryOptions& options, size_t devices,
                          size_t efas, size_t warnings = 0) {
  const RootPaths paths(root);
  const Inventory dir = Scan(*MakeDirectoryDiscovery(paths, options));
  Inventory udev;
  {
    UmockdevDir env(root);
    absl::StatusOr<std::unique_ptr<Discovery>> d = MakeUdevDiscovery(paths, options);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return dir;
    EXPECT_EQ((*d)->name(), "udev");
    udev = Scan(**d);
  }
  // Guard against agreeing on nothing.
  EXPECT_EQ(dir.devices.size(), devices);
  EXPECT_EQ(dir.efas.size(), efas);
  EXPECT_EQ(dir.warnings.size(), warnings) << ::testing::PrintToString(dir.warnings);
  EXPECT_EQ(udev.warnings, dir.warnings);
  EXPECT_EQ(udev.devices.size(), dir.devices.size());
  EXPECT_EQ(udev.efas.size(), dir.efas.size());
  for (size_t i = 0; i < std::min(udev.devices.size(), dir.devices.size()); ++i) {
    EXPECT_EQ(udev.devices[i], dir.devices[i]) << "device " << dir.devices[i].index;
  }
  for (size_t i = 0; i < std::min(udev.efas.size(), dir.efas.size()); ++i) {
    EXPECT_EQ(udev.efas[i], dir.efas[i]) << "EFA " << dir.efas[i].name;
  }
  EXPECT_TRUE(udev == dir);
  return dir;
}

const InstanceSpec& Spec(std::string_view instance) {
  absl::StatusOr<const InstanceSpec*> spec = FindInstance(instance);
  if (!spec.ok()) std::abort();  // a typo in this file
  return **spec;
}

// These trees have no simulated driver behind their device nodes, so both back ends get the
// PCI addresses it would answer (tests/support/sim_discovery.h).
using ::neuron::testing::MakeSimTree;
using ::neuron::testing::SimDiscoveryOptions;

TEST(DiscoveryAgreement, Trn1_32xlarge) {
  REQUIRE_UMOCKDEV();
  TempRoot root;
  auto tree = MakeSimTree(root.path(), "trn1.32xlarge", {.lnc = 1});
  const DiscoveryOptions options = SimDiscoveryOptions(Spec("trn1.32xlarge"));
  const Inventory inv = ExpectAgreement(root.path(), options, 16, 8);
  ASSERT_NE(inv.FindDevice(0), nullptr);
  EXPECT_EQ(inv.FindDevice(0)->bdf, "0000:10:1c.0");
  // Still equal after an unplug, an EFA reset and a state change.
  ASSERT_TRUE(tree->RemoveDevice(7).ok());
  ASSERT_TRUE(tree->RemoveEfa("rdmap32s26").ok());
  ASSERT_TRUE(tree->SetDeviceState(2, DeviceState::kInvalid).ok());
  ExpectAgreement(root.path(), options, 15, 7);
}

// LNC comes from --lnc or the instance default (the tree shows physical cores either way), so
// one trn2 tree serves both settings.
TEST(DiscoveryAgreement, Trn2_48xlargeLnc2And1) {
  REQUIRE_UMOCKDEV();
  TempRoot root;
  auto tree = MakeSimTree(root.path(), "trn2.48xlarge", {.lnc = 2});
  const InstanceSpec& spec = Spec("trn2.48xlarge");
  EXPECT_EQ(ExpectAgreement(root.path(), SimDiscoveryOptions(spec), 16, 16).lnc, 2);
  const Inventory lnc1 = ExpectAgreement(root.path(), SimDiscoveryOptions(spec, 1), 16, 16);
  EXPECT_EQ(lnc1.lnc, 1);
  EXPECT_EQ(lnc1.LogicalCoresPerDevice(), 8);
}

TEST(DiscoveryAgreement, Inf2_48xlarge) {
  REQUIRE_UMOCKDEV();
  TempRoot root;
  auto tree = MakeSimTree(root.path(), "inf2.48xlarge", {.lnc = 1});
  ExpectAgreement(root.path(), SimDiscoveryOptions(Spec("inf2.48xlarge")), 12, 0);
}

// Without a driver behind the device nodes both back ends ask DEVICE_BDF_EXT, get ENOTTY, and
// say so in the same single warning, with no PCI address on any device.
TEST(DiscoveryAgreement, WithoutADriverBothLeaveBdfsAbsent) {
  REQUIRE_UMOCKDEV();
  TempRoot root;
  auto tree = MakeSimTree(root.path(), "inf2.24xlarge", {.lnc = 1});
  const Inventory inv = ExpectAgreement(root.path(), {}, 6, 0, /*warnings=*/1);
  for (const NeuronDevice& d : inv.devices) EXPECT_EQ(d.bdf, "") << d.index;
  ASSERT_EQ(inv.warnings.size(), 1u);
  EXPECT_THAT(inv.warnings[0], HasSubstr("no Neuron driver behind the device node"));
}

// Events in udev mode: add/remove reach us through the udev monitor (umockdev forwards the
// testbed's uevents); state comes from polling. The rescan safety net is set to an hour so only
// the monitor can explain a prompt add or remove.
EventsOptions MonitorOnlyOptions() {
  EventsOptions o;
  o.mode = WatchMode::kUdev;
  o.state_poll = std::chrono::milliseconds(50);
  o.rescan = std::chrono::hours(1);
  o.watch_kmsg = false;
  return o;
}

using Collector = ::neuron::testing::EventCollector;

TEST(UdevEvents, TestbedUeventsBecomeEvents) {
  REQUIRE_UMOCKDEV();
  UMockdevTestbed* tb = umockdev_testbed_new();  // sets UMOCKDEV_DIR for this process
  ASSERT_NE(tb, nullptr);
  gchar* root = umockdev_testbed_get_root_dir(tb);
  gchar* dev0 =
      umockdev_testbed_add_device(tb, "neuron_device", "neuron0", nullptr, "reset", "1\n",
                                  "core_count", "2", nullptr, "DEVNAME", "neuron0", nullptr);
  gchar* dev1 =
      umockdev_testbed_add_device(tb, "neuron_device", "neuron1", nullptr, "reset", "1\n",
                                  "core_count", "2", nullptr, "DEVNAME", "neuron1", nullptr);
  ASSERT_NE(dev0, nullptr);
  ASSERT_NE(dev1, nullptr);

  Collector got;
  Events events(RootPaths(root), MonitorOnlyOptions());
  events.Subscribe([&](const Event& e) { got.Add(e); });
  ASSERT_TRUE(events.Start().ok());

  // 0.17 sends no "remove" from remove_device (docs/build.md#umockdev): send it first, then remove.
  umockdev_testbed_uevent(tb, dev1, "remove");
  umockdev_testbed_remove_device(tb, dev1);
  EXPECT_TRUE(got.WaitFor(
      [](const Event& e) { return e.kind == EventKind::kDeviceRemoved && e.device == 1; }));

  gchar* dev3 = umockdev_testbed_add_device(tb, "neuron_device", "neuron3", nullptr, "reset", "0\n",
                                            nullptr, "DEVNAME", "neuron3", nullptr);
  umockdev_testbed_uevent(tb, dev3, "add");
  std::optional<Event> added = got.WaitFor(
      [](const Event& e) { return e.kind == EventKind::kDeviceAdded && e.device == 3; });
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->state, DeviceState::kReset);

  // No uevent for a state change (docs/driver-interface.md#device-nodes): polling finds it.
  umockdev_testbed_set_attribute(tb, dev0, "reset", "2\n");
  std::optional<Event> changed = got.WaitFor(
      [](const Event& e) { return e.kind == EventKind::kDeviceStateChanged && e.device == 0; });
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->state, DeviceState::kInvalid);

  events.Stop();
  g_free(dev0);
  g_free(dev1);
  g_free(dev3);
  g_free(root);
  g_object_unref(tb);
}

// A simulated node inside a testbed: unplug sends "remove" like the kernel, then the tree goes.
TEST(UdevEvents, SimUnplugWithUevent) {
  REQUIRE_UMOCKDEV();
  UMockdevTestbed* tb = umockdev_testbed_new();
  ASSERT_NE(tb, nullptr);
  gchar* root = umockdev_testbed_get_root_dir(tb);
  auto tree = MakeSimTree(root, "inf2.24xlarge", {.lnc = 1});

  Collector got;
  Events events(RootPaths(root), MonitorOnlyOptions());
  events.Subscribe([&](const Event& e) { got.Add(e); });
  ASSERT_TRUE(events.Start().ok());

  umockdev_testbed_uevent(tb, "/sys/devices/virtual/neuron_device/neuron4", "remove");
  ASSERT_TRUE(tree->RemoveDevice(4).ok());
  EXPECT_TRUE(got.WaitFor(
      [](const Event& e) { return e.kind == EventKind::kDeviceRemoved && e.device == 4; }));
  ASSERT_TRUE(tree->AddDevice(4).ok());
  umockdev_testbed_uevent(tb, "/sys/devices/virtual/neuron_device/neuron4", "add");
  std::optional<Event> added = got.WaitFor(
      [](const Event& e) { return e.kind == EventKind::kDeviceAdded && e.device == 4; });
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->state, DeviceState::kReady);
  ASSERT_TRUE(tree->SetDeviceState(2, DeviceState::kReset).ok());
  EXPECT_TRUE(got.WaitFor([](const Event& e) {
    return e.kind == EventKind::kDeviceStateChanged && e.device == 2 &&
           e.state == DeviceState::kReset;
  }));
  events.Stop();
  tree.reset();
  g_free(root);
  g_object_unref(tb);
}

}  // namespace
}  // namespace neuron

// What docs/OPERATIONS.md asks of a real node, on a simulated one with every binary under the
// simulated driver: pods under `--device-numbering container` see devices and cores from 0 while
// their runtime works on the host device the plugin chose; the costs of monitoring through the
// device node (docs/OPERATIONS.md#costs-on-a-real-node): an operator's sysfs reset works while the
// exporter runs and no job does, and a 16th process still attaches while the exporter runs; and the
// preloads a test of the plugin stacks in one process (the sanitizer's runtime, umockdev's, the
// simulated driver's) still let the driver answer the plugin's ioctls. Every wait is on an
// observable event with a generous ceiling (docs/architecture.md#timing-in-tests).
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "tests/e2e/agent_node.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"

namespace neuron::e2e {
namespace {

using neuron::testing::HttpGet;
using neuron::testing::ReadFile;
using neuron::testing::ReadU64File;
using neuron::testing::Spawn;
using neuron::testing::WaitExit;
using neuron::testing::WaitUntil;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- processes, the driver's view and sysfs ----

// The child processes of one test, stopped with SIGTERM in reverse order when the test ends,
// however it ends. Declared after the AgentNode, so they go before the node does.
class Children {
 public:
  ~Children() {
    for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) neuron::testing::Stop(*it, 60s);
  }
  pid_t Add(pid_t pid) {
    if (pid > 0) pids_.push_back(pid);
    return pid;
  }
  // SIGTERM and wait: the exit code (128 + signal when killed by it).
  std::optional<int> Stop(pid_t pid) {
    std::erase(pids_, pid);
    return neuron::testing::Stop(pid, 60s);
  }
  // The exit code if `pid` has ended (it is then reaped and forgotten), else nullopt.
  std::optional<int> Ended(pid_t pid) {
    const std::optional<int> code = WaitExit(pid, 0ms);
    if (code) std::erase(pids_, pid);
    return code;
  }

 private:
  std::vector<pid_t> pids_;
};

fs::path LogDir(const AgentNode& node) { return node.root().parent_path(); }

fs::path DeviceDir(const fs::path& root, int device) {
  return root / ("sys/devices/virtual/neuron_device/neuron" + std::to_string(device));
}

// A per-core counter of stats/other_info ("nc_time_in_use", "reset_req_count") for every core
// of `device`; a missing or malformed file reads as max (it never equals a real value).
std::vector<uint64_t> CoreCounters(const AgentNode& node, int device, const std::string& name) {
  std::vector<uint64_t> out;
  for (int c = 0; c < node.cores() / node.devices(); ++c) {
    const fs::path file = DeviceDir(node.root(), device) / ("neuron_core" + std::to_string(c)) /
                          "stats/other_info" / name / "total";
    out.push_back(ReadU64File(file).value_or(UINT64_MAX));
  }
  return out;
}

std::vector<uint64_t> BusyTimes(const AgentNode& node, int device) {
  return CoreCounters(node, device, "nc_time_in_use");
}

// Every core's counter is above where it was.
bool Grew(const std::vector<uint64_t>& now, const std::vector<uint64_t>& before) {
  if (now.size() != before.size()) return false;
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] == UINT64_MAX || now[i] <= before[i]) return false;
  }
  return true;
}

// `neuron-sim ctl --root ROOT status`: what the driver knows.
std::string CtlStatus(const AgentNode& node) {
  const fs::path out = LogDir(node) / "status.out", err = LogDir(node) / "status.err";
  const pid_t pid =
      Spawn({NEURON_SIM_BIN, "ctl", "--root", node.root().string(), "status"}, out, err);
  EXPECT_EQ(WaitExit(pid, 60s), 0) << ReadFile(err);
  return ReadFile(out);
}

// The rows of one table of the status, split on blanks: the lines after the header whose
// second column is `second` ("BDF": devices, "PID": runtime processes), up to a blank line.
std::vector<std::vector<std::string>> StatusRows(const std::string& status,
                                                 const std::string& second) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(status);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> row{std::istream_iterator<std::string>(words), {}};
    if (!inside) {
      inside = row.size() > 1 && row[0] == "DEVICE" && row[1] == second;
    } else if (row.empty()) {
      break;
    } else {
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// The processes the driver has attached to `device` (its OPEN BY column).
std::vector<pid_t> OpenBy(const std::string& status, int device) {
  std::vector<pid_t> pids;
  for (const std::vector<std::string>& row : StatusRows(status, "BDF")) {
    if (row[0] != std::to_string(device) || row.back() == "-") continue;
    std::istringstream list(row.back());
    for (std::string pid; std::getline(list, pid, ',');) pids.push_back(std::stoi(pid));
  }
  return pids;
}

// The CORES column ("8,9": the global cores whose locks it holds) of each runtime process with
// a datastore on `device`.
std::vector<std::string> RuntimeCores(const std::string& status, int device) {
  std::vector<std::string> cores;
  for (const std::vector<std::string>& row : StatusRows(status, "PID")) {
    if (row.size() >= 7 && row[0] == std::to_string(device)) cores.push_back(row[row.size() - 4]);
  }
  return cores;
}

// The host cores of `device` as the status lists them ("8,9").
std::string HostCores(const AgentNode& node, int device) {
  const int per_device = node.cores() / node.devices();
  std::string out;
  for (int c = 0; c < per_device; ++c) {
    out += (c == 0 ? "" : ",") + std::to_string(device * per_device + c);
  }
  return out;
}

// ---- pods ----

struct WorkloadPod {
  pid_t pid = -1;
  fs::path out, err;
  int host_device = -1;         // the plugin's choice, as `pod run` prints the allocation
  std::string seen_cores = {};  // NEURON_RT_VISIBLE_CORES as the workload's command saw it
  std::string seen_map = {};    // NEURON_SIM_DEVICE_MAP (container device = host device)
};

// `neuron-sim pod run NAME` asking for one whole device, its command matmul until SIGTERM
// (under the simulated driver, with the pod's environment); returns once the workload has
// executed its first step.
WorkloadPod StartWorkloadPod(const AgentNode& node, Children& children, const std::string& name) {
  WorkloadPod pod{.out = LogDir(node) / (name + ".out"), .err = LogDir(node) / (name + ".err")};
  const std::string command =
      "echo seen=$NEURON_RT_VISIBLE_CORES map=$NEURON_SIM_DEVICE_MAP; exec " +
      std::string(NEURON_SIM_BIN) + " run --workload matmul --steps 0";
  pod.pid = children.Add(
      Spawn({NEURON_SIM_BIN, "pod", "run", "--kubelet-dir", node.kubelet_dir().string(), "--name",
             name, "--request", kNeuron + "=1", "--", "sh", "-c", command},
            pod.out, pod.err));
  EXPECT_TRUE(
      WaitUntil([&] { return ReadFile(pod.out).find("step 1 ") != std::string::npos; }, 120s))
      << name << ":\n"
      << ReadFile(pod.out) << ReadFile(pod.err) << node.PluginLog();
  static const std::regex kDevice("aws\\.amazon\\.com/neuron ([0-9]+)\n");
  static const std::regex kSeen("seen=(\\S*) map=(\\S*)\n");
  std::smatch m;
  const std::string err = ReadFile(pod.err), out = ReadFile(pod.out);
  if (std::regex_search(err, m, kDevice)) pod.host_device = std::stoi(m[1]);
  if (std::regex_search(out, m, kSeen)) {
    pod.seen_cores = m[1];
    pod.seen_map = m[2];
  }
  return pod;
}

sim::PodSpec IdlePod(const std::string& name, int devices) {
  return {.name = name, .containers = {{.requests = {{kNeuron, devices}}}}};
}

// The devices the kubelet gave pod `name` (its PodResources view).
std::vector<int> KubeletDevices(AgentNode& node, const std::string& name) {
  for (const sim::AdmittedPod& p : node.kubelet().Pods()) {
    if (p.name == name) return Ids(p, kNeuron);
  }
  return {};
}

// The pod's view and the driver's agree: device 0 with cores from 0 in the container, the
// workload's process and core locks on its host device in the driver.
void ExpectRenumbered(AgentNode& node, const WorkloadPod& pod, const std::string& status,
                      const std::string& name) {
  EXPECT_EQ(pod.seen_cores, "0-1") << name;
  EXPECT_EQ(pod.seen_map, "0=" + std::to_string(pod.host_device)) << name;
  EXPECT_THAT(KubeletDevices(node, name), ElementsAre(pod.host_device)) << name;
  EXPECT_THAT(RuntimeCores(status, pod.host_device), ElementsAre(HostCores(node, pod.host_device)))
      << name << ":\n"
      << status;
}

// ---- 1. --device-numbering container ----

// Devices 0-3 are held by an idle pod, so the allocator must put the workload elsewhere: the
// pod sees /dev/neuron0 and cores 0-1; the driver runs it, and sysfs counts its busy time, on
// the host device the plugin chose.
TEST(ContainerNumberingTest, APodSeesDeviceZeroAndRunsOnItsHostDevice) {
  AgentNode node({.plugin_args = {"--device-numbering", "container"}});
  Children children;
  absl::StatusOr<sim::AdmittedPod> holder = node.kubelet().AdmitPod(IdlePod("holder", 4));
  ASSERT_TRUE(holder.ok()) << holder.status();
  const std::vector<int> held = Ids(*holder, kNeuron);
  const std::vector<uint64_t> device0 = BusyTimes(node, 0);

  WorkloadPod pod = StartWorkloadPod(node, children, "single");
  ASSERT_GE(pod.host_device, 0) << ReadFile(pod.err);
  EXPECT_NE(pod.host_device, 0);
  EXPECT_EQ(std::count(held.begin(), held.end(), pod.host_device), 0) << pod.host_device;
  const std::string status = CtlStatus(node);
  ExpectRenumbered(node, pod, status, "single");
  EXPECT_THAT(RuntimeCores(status, 0), ::testing::IsEmpty()) << status;

  // Busy time reaches sysfs when the runtime releases its datastore (D1,
  // driver-sim/README.md#deviations).
  const std::vector<uint64_t> before = BusyTimes(node, pod.host_device);
  EXPECT_EQ(children.Stop(pod.pid), 0) << ReadFile(pod.out) << ReadFile(pod.err);
  EXPECT_TRUE(WaitUntil([&] { return Grew(BusyTimes(node, pod.host_device), before); }, 60s))
      << "host device " << pod.host_device;
  EXPECT_EQ(BusyTimes(node, 0), device0);
}

// Two pods, both told cores 0-1 on /dev/neuron0, on two host devices at once: their runtimes
// reserve host cores, so both run, each on its own device, and each device counts its own.
TEST(ContainerNumberingTest, TwoPodsSeeTheSameCoresAndRunSideBySide) {
  AgentNode node({.plugin_args = {"--device-numbering", "container"}});
  Children children;
  // Device 0 is held, so neither pod's host device is the one its container numbering names.
  absl::StatusOr<sim::AdmittedPod> holder = node.kubelet().AdmitPod(IdlePod("holder", 1));
  ASSERT_TRUE(holder.ok()) << holder.status();
  const int held = Ids(*holder, kNeuron).at(0);
  const std::vector<uint64_t> held_busy = BusyTimes(node, held);

  WorkloadPod a = StartWorkloadPod(node, children, "pod-a");
  WorkloadPod b = StartWorkloadPod(node, children, "pod-b");
  ASSERT_GE(a.host_device, 0) << ReadFile(a.err);
  ASSERT_GE(b.host_device, 0) << ReadFile(b.err);
  EXPECT_NE(a.host_device, b.host_device);
  EXPECT_NE(a.host_device, held);
  EXPECT_NE(b.host_device, held);
  // Both are running now: a was running before b started, and neither has ended.
  EXPECT_EQ(children.Ended(a.pid), std::nullopt) << ReadFile(a.out) << ReadFile(a.err);
  const std::string status = CtlStatus(node);
  ExpectRenumbered(node, a, status, "pod-a");
  ExpectRenumbered(node, b, status, "pod-b");

  const std::vector<uint64_t> a_before = BusyTimes(node, a.host_device);
  const std::vector<uint64_t> b_before = BusyTimes(node, b.host_device);
  EXPECT_EQ(children.Stop(a.pid), 0) << ReadFile(a.out) << ReadFile(a.err);
  EXPECT_EQ(children.Stop(b.pid), 0) << ReadFile(b.out) << ReadFile(b.err);
  EXPECT_TRUE(WaitUntil([&] { return Grew(BusyTimes(node, a.host_device), a_before); }, 60s));
  EXPECT_TRUE(WaitUntil([&] { return Grew(BusyTimes(node, b.host_device), b_before); }, 60s));
  EXPECT_EQ(BusyTimes(node, held), held_busy);
}

// ---- the exporter on a node ----

struct Exporter {
  pid_t pid = -1;
  int port = 0;
};

// neuron-exporter under the simulated driver (as on a real node, with the device nodes);
// returns once it serves, its first sample taken.
Exporter StartExporter(const AgentNode& node, Children& children) {
  const fs::path out = LogDir(node) / "exporter.out", err = LogDir(node) / "exporter.err";
  Exporter e;
  e.pid = children.Add(
      Spawn(node.sim().UnderDriver({NEURON_EXPORTER_BIN, "--root", node.root().string(),
                                    "--no-pod-resources", "--web.listen-address", "127.0.0.1:0"}),
            out, err));
  EXPECT_TRUE(WaitUntil(
      [&] {
        e.port = neuron::testing::ListeningPort(ReadFile(err));
        return e.port > 0;
      },
      60s))
      << ReadFile(out) << ReadFile(err);
  return e;
}

std::string Scrape(const Exporter& e) { return HttpGet(e.port, "/metrics").body; }

// The value of the one sample `series` (name{labels} exactly as rendered), or nullopt.
std::optional<double> Value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

// Whether any sample of metric `name` is labelled with `device`.
bool HasDeviceSeries(const std::string& text, const std::string& name, int device) {
  return text.find(name + "{neuron_device=\"" + std::to_string(device) + "\"") != std::string::npos;
}

const std::string kDatastoreUp = "neuron_exporter_source_up{source=\"datastore\"}";

// ---- 2. an operator's sysfs reset while the exporter runs and no job does ----

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// `echo 1 > .../neuronD/reset`: a write in place, which the driver honours only while nobody
// holds the device. Succeeds when the reset ran: the driver logged it starting (state RESET, 0)
// and then completing (state READY, 1), exactly once, and counted one request on every core.
::testing::AssertionResult OperatorResets(const AgentNode& node, int device) {
  const fs::path kmsg = node.root() / "dev/kmsg";
  const std::string nd = "nr_reset_thread_fn: nd" + std::to_string(device) + ": ";
  const std::string started = nd + "initiating device reset request";
  const std::string completed = nd + "reset request 4294967295 completed";
  const std::string log = ReadFile(kmsg);
  const size_t started_before = Count(log, started), completed_before = Count(log, completed);
  const std::vector<uint64_t> requests = CoreCounters(node, device, "reset_req_count");
  std::ofstream(DeviceDir(node.root(), device) / "reset") << "1\n";
  if (!WaitUntil([&] { return Count(ReadFile(kmsg), completed) > completed_before; }, 60s)) {
    return ::testing::AssertionFailure() << "neuron" << device << ": the reset write was ignored";
  }
  const std::string after = ReadFile(kmsg);
  std::vector<uint64_t> expected = requests;
  for (uint64_t& r : expected) ++r;
  if (Count(after, started) != started_before + 1 ||
      Count(after, completed) != completed_before + 1 ||
      after.rfind(started) > after.rfind(completed) ||
      ReadFile(DeviceDir(node.root(), device) / "reset") != "1\n" ||
      CoreCounters(node, device, "reset_req_count") != expected) {
    return ::testing::AssertionFailure() << "neuron" << device << ": not one full reset:\n"
                                         << after;
  }
  return ::testing::AssertionSuccess();
}

// OPERATIONS.md's checklist: with no job on a device, a write to its sysfs reset takes effect
// while the exporter runs; the exporter holds no idle device.
TEST(RealNodeCostsTest, OperatorResetWithExporterAndNoJob) {
  AgentNode node({.sim_args = {"--reset-ms", "100"}, .start_plugin = false});
  Children children;
  const Exporter exporter = StartExporter(node, children);
  std::string text;
  ASSERT_TRUE(WaitUntil(
      [&] {
        text = Scrape(exporter);
        return Value(text, kDatastoreUp) == 1;
      },
      60s))
      << text;
  for (const int device : {0, 7, 15}) {
    EXPECT_THAT(OpenBy(CtlStatus(node), device), ::testing::IsEmpty()) << device;
    EXPECT_TRUE(OperatorResets(node, device));
    const std::string ready =
        "neuron_device_state{neuron_device=\"" + std::to_string(device) + "\",state=\"ready\"}";
    EXPECT_TRUE(WaitUntil([&] { return Value(Scrape(exporter), ready) == 1; }, 60s)) << ready;
  }
  EXPECT_EQ(children.Stop(exporter.pid), 0) << ReadFile(LogDir(node) / "exporter.err");
}

// ---- 3. the 16th process attaches while the exporter runs ----

// fd_holder on ROOT/dev/neuronD under the simulated driver: a raw opener (O_RDONLY, a normal
// open that attaches). True once it says it holds the device; false when it gave up.
bool RawOpener(const AgentNode& node, Children& children, int device, int n) {
  const fs::path out = LogDir(node) / ("holder" + std::to_string(n) + ".out");
  const fs::path err = LogDir(node) / ("holder" + std::to_string(n) + ".err");
  const fs::path dev = node.root() / ("dev/neuron" + std::to_string(device));
  const pid_t pid =
      children.Add(Spawn(node.sim().UnderDriver({NEURON_FD_HOLDER_BIN, dev.string()}), out, err));
  bool holding = false;
  WaitUntil(
      [&] {
        holding = ReadFile(out).find("holding") != std::string::npos;
        return holding || children.Ended(pid).has_value();
      },
      60s);
  EXPECT_TRUE(holding) << "raw opener " << n << ": " << ReadFile(err);
  return holding;
}

bool Contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

// The exporter holds device 3 while a runtime owns a datastore there. Fourteen raw openers fill
// the device's 16 process slots (runtime, exporter, 14); a scrape shows the exporter the crowd,
// so it gives its slot back and the device's live figures become unknown (absent, not 0); a
// 16th process then attaches.
TEST(RealNodeCostsTest, SixteenthOpenerAttachesWhileExporterRuns) {
  AgentNode node({.start_plugin = false});
  Children children;
  constexpr int kDevice = 3;
  const fs::path run_out = LogDir(node) / "run.out";
  children.Add(Spawn({NEURON_SIM_BIN, "run", "--root", node.root().string(), "--workload", "matmul",
                      "--steps", "0"},
                     run_out, LogDir(node) / "run.err", {"NEURON_RT_VISIBLE_CORES=6-7"}));
  ASSERT_TRUE(
      WaitUntil([&] { return ReadFile(run_out).find("step 1 ") != std::string::npos; }, 120s))
      << ReadFile(run_out) << ReadFile(LogDir(node) / "run.err");
  const Exporter exporter = StartExporter(node, children);
  const std::string util6 = "neuroncore_utilization_ratio{neuron_device=\"3\",neuroncore=\"6\"}";
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Value(Scrape(exporter), util6).value_or(0) > 0 &&
               Contains(OpenBy(CtlStatus(node), kDevice), exporter.pid);
      },
      60s))
      << CtlStatus(node) << Scrape(exporter);

  for (int n = 1; n <= 14; ++n) ASSERT_TRUE(RawOpener(node, children, kDevice, n));
  // The runtime and the 14 hold the device; the exporter too, unless its probe (every second,
  // listing the device's processes itself) already saw the crowd and let go.
  const std::vector<pid_t> crowd = OpenBy(CtlStatus(node), kDevice);
  EXPECT_EQ(crowd.size(), Contains(crowd, exporter.pid) ? 16u : 15u) << CtlStatus(node);
  // Prometheus scrapes: the device's live series go (unknown), and its slot is free.
  std::string text;
  ASSERT_TRUE(WaitUntil(
      [&] {
        text = Scrape(exporter);
        return !HasDeviceSeries(text, "neuroncore_utilization_ratio", kDevice) &&
               !Contains(OpenBy(CtlStatus(node), kDevice), exporter.pid);
      },
      60s))
      << CtlStatus(node) << text;

  EXPECT_TRUE(RawOpener(node, children, kDevice, 15));
  const std::string status = CtlStatus(node);
  EXPECT_EQ(OpenBy(status, kDevice).size(), 16u) << status;
  EXPECT_FALSE(Contains(OpenBy(status, kDevice), exporter.pid)) << status;
  // Unknown, not idle: the device's live series are absent; other devices' are still read. This
  // scrape usually shares the sample of the last one above (the exporter's 1 s share window).
  text = Scrape(exporter);
  EXPECT_FALSE(HasDeviceSeries(text, "neuroncore_utilization_ratio", kDevice)) << text;
  EXPECT_FALSE(HasDeviceSeries(text, "neuroncore_busy_seconds_total", kDevice)) << text;
  EXPECT_EQ(Value(text, "neuroncore_utilization_ratio{neuron_device=\"0\",neuroncore=\"0\"}"), 0)
      << text;
  EXPECT_EQ(Value(text, kDatastoreUp), 1) << text;
}

// ---- 4. the sanitizer's, umockdev's and the simulated driver's preloads in one process ----

// TMPDIR for a scope. umockdev's preload takes every path under /dev/ for a device node
// (tests/core/CMakeLists.txt), so a node it reads may not live in /dev/shm, the tests' TMPDIR.
class ScopedTmpdir {
 public:
  explicit ScopedTmpdir(const char* dir) {
    const char* old = std::getenv("TMPDIR");
    if (old != nullptr) old_ = old;
    ::setenv("TMPDIR", dir, 1);
  }
  ~ScopedTmpdir() {
    if (old_) {
      ::setenv("TMPDIR", old_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }

 private:
  std::optional<std::string> old_;
};

// LD_PRELOAD holding umockdev's preload, after the sanitizer's runtime in a sanitized build:
// GCC's ASan must come first in the process (docs/build.md#sanitizers).
std::string UmockdevPreload() {
  std::string preload = "libumockdev-preload.so.0";
  Dl_info info{};
  void* asan = ::dlsym(RTLD_DEFAULT, "__asan_init");
  if (asan != nullptr && ::dladdr(asan, &info) != 0 && info.dli_fname != nullptr &&
      std::string_view(info.dli_fname).find("libasan") != std::string_view::npos) {
    preload = std::string(info.dli_fname) + " " + preload;
  }
  return preload;
}

// The plugin with its udev discovery (libudev reads the simulated tree through umockdev) under
// `neuron-sim exec`, which adds the simulated driver to that LD_PRELOAD: it registers every
// resource, and the driver answers its DEVICE_BDF_EXT ioctls with each device's PCI address.
TEST(PreloadStackTest, PluginUnderUmockdevGetsPciAddressesFromTheDriver) {
  ScopedTmpdir tmpdir("/tmp");
  AgentNode node({.start_plugin = false});
  Children children;
  const fs::path out = LogDir(node) / "plugin.out", err = LogDir(node) / "plugin.err";
  const std::string preload = UmockdevPreload();
  const pid_t plugin =
      children.Add(Spawn(node.sim().UnderDriver({NEURON_PLUGIN_BIN, "--root", node.root().string(),
                                                 "--kubelet-dir", node.kubelet_dir().string(),
                                                 "--listen", "127.0.0.1:0", "--discovery", "udev"}),
                         out, err,
                         {"LD_PRELOAD=" + preload, "UMOCKDEV_DIR=" + node.root().string(),
                          "ASAN_OPTIONS=quarantine_size_mb=4:detect_leaks=1"}));
  // Only libudev under umockdev sees these devices: the host's /sys has none.
  for (const auto& [resource, count] :
       {std::pair{kNeuron, node.devices()}, {kCore, node.cores()}, {kEfa, node.efas()}}) {
    const auto want = count;  // a lambda cannot capture a structured binding before C++20
    ASSERT_TRUE(node.WaitForResource(
        resource, [&](const sim::ResourceState& r) { return r.capacity == want; }, 60s))
        << resource << ":\n"
        << ReadFile(err);
  }
  // The stack as the plugin runs it: a sanitizer's runtime first, then the simulated driver,
  // then umockdev's preload (which calls libc directly, past anything listed after it).
  const std::string env = ReadFile("/proc/" + std::to_string(plugin) + "/environ");
  const size_t driver = env.find("libneuron-sim-driver");
  const size_t umockdev = env.find("libumockdev-preload.so.0");
  EXPECT_NE(driver, std::string::npos) << env;
  EXPECT_LT(driver, umockdev) << "the simulated driver must come before umockdev: " << env;

  // The PCI addresses: the plugin says when the driver did not give them. (Topology hints are
  // no evidence: for a known instance type the plugin falls back to the catalog's NUMA nodes.)
  EXPECT_THAT(ReadFile(err), Not(HasSubstr("no PCI addresses")));
  EXPECT_EQ(children.Stop(plugin), 0) << ReadFile(err);
}

}  // namespace
}  // namespace neuron::e2e

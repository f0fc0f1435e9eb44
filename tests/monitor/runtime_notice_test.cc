// The two figures of docs/architecture.md#noticing-runtimes on a simulated trn1.32xlarge with
// the DaemonSet's mounts (the host's /proc under ROOT: the simulator links this machine's):
// an idle node gets no driver log line from the exporter (the bound is one a minute), and a
// runtime that starts is in a sample of the agent's datastore reader within 2 s of its first
// open (its npid_attach record). This test process runs under the interposer, as the reader in
// the exporter does; workloads are `neuron-sim run`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>

#include "core/sample/datastore.h"
#include "tests/support/driver_log.h"
#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/suite_node.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ::neuron::testing::ReadFile;
using ::neuron::testing::WaitUntil;
using ::testing::HasSubstr;

// Driver lines (npid_attach and npid_detach) of `pid`, and the CLOCK_MONOTONIC time of its first
// npid_attach record.
struct PidLines {
  int count = 0;
  std::optional<Clock::time_point> first_attach;
};

PidLines LinesOf(const fs::path& kmsg, pid_t pid) {
  PidLines out;
  for (const neuron::testing::KmsgRecord& r : neuron::testing::DriverLinesOf(kmsg, pid)) {
    ++out.count;
    if (!out.first_attach && r.text.find("npid_attach") != std::string::npos) {
      // steady_clock is CLOCK_MONOTONIC, the clock the kmsg records carry (usec).
      out.first_attach = Clock::time_point(std::chrono::microseconds(r.usec));
    }
  }
  return out;
}

class RuntimeNoticeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_ = new neuron::testing::SuiteNode("notice", "trn1.32xlarge", NEURON_SIM_BIN);
    node_ = &suite_->node();
    dir_ = &suite_->dir();
    ASSERT_TRUE(node_->ready()) << node_->Log();
    // The DaemonSet mounts the host's /proc at /host/proc, beside /host/sys and /host/dev; the
    // simulator links this machine's there.
    ASSERT_EQ(fs::read_symlink(node_->root() / "proc"), "/proc");
  }
  static void TearDownTestSuite() { delete suite_; }
  static fs::path Kmsg() { return node_->paths().Kmsg(); }

  static inline neuron::testing::SuiteNode* suite_ = nullptr;
  static inline neuron::testing::TempDir* dir_ = nullptr;
  static inline neuron::testing::SimNode* node_ = nullptr;
};

// 30 s of an idle node with the exporter scraped every second: not one driver line of its own.
TEST_F(RuntimeNoticeTest, AnIdleTrn1GetsNoDriverLinesFromTheExporter) {
  const fs::path kubelet = dir_->path() / "kubelet";
  fs::create_directories(kubelet);
  const pid_t exporter = node_->StartUnderDriver(
      {NEURON_EXPORTER_BIN, "--root", node_->root().string(), "--kubelet-dir", kubelet.string(),
       "--no-pod-resources", "--web.listen-address", "127.0.0.1:0"},
      "exporter");
  int port = 0;
  const fs::path log = node_->logs() / "exporter.err";
  ASSERT_TRUE(
      WaitUntil([&] { return (port = neuron::testing::ListeningPort(ReadFile(log))) > 0; }, 60s))
      << ReadFile(log);
  const auto until = Clock::now() + 30s;
  int scrapes = 0;
  while (Clock::now() < until) {
    scrapes += neuron::testing::HttpGet(port, "/metrics").status == 200 ? 1 : 0;
    std::this_thread::sleep_for(1s);
  }
  EXPECT_GE(scrapes, 25);
  const PidLines lines = LinesOf(Kmsg(), exporter);
  EXPECT_EQ(lines.count, 0) << "driver lines of the exporter (pid " << exporter << ") in 30 s";
  const std::string text = ReadFile(log);
  EXPECT_THAT(text, HasSubstr("idle devices are not opened"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("cannot see which processes hold")));
  RecordProperty("exporter_driver_lines_30s", lines.count);
}

// Three workloads, one after another on different devices: each is in a sample (ReadAll, as the
// exporter's sampler calls it) within 2 s of its first open, with the reader probing every
// second as the exporter's does.
TEST_F(RuntimeNoticeTest, ARuntimeIsSeenWithinTwoSeconds) {
  std::vector<int> devices(16);
  std::iota(devices.begin(), devices.end(), 0);
  auto reader = MakeDriverDatastoreReader(node_->paths(), {.devices = devices});
  ASSERT_TRUE(reader->AwaitFirstProbe(30s));
  std::mutex mu;
  std::map<int, Clock::time_point> seen;  // pid -> first sample that had its record
  std::atomic<bool> stop = false;
  std::thread sampler([&] {
    while (!stop) {
      const DatastoreScan scan = reader->ReadAll();
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(mu);
      for (const DatastoreRecord& r : scan.records) seen.try_emplace(r.pid, now);
      std::this_thread::sleep_for(20ms);
    }
  });
  std::vector<double> latencies;
  for (const char* cores : {"0", "10", "22"}) {  // devices 0, 5 and 11
    const pid_t workload = node_->StartWorkload(cores);
    ASSERT_GT(workload, 0) << cores;
    EXPECT_TRUE(WaitUntil(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return seen.contains(workload);
        },
        10s))
        << "workload " << workload << " not seen";
    const PidLines lines = LinesOf(Kmsg(), workload);
    ASSERT_TRUE(lines.first_attach.has_value());
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.contains(workload)) continue;
    const double latency =
        std::chrono::duration<double>(seen.at(workload) - *lines.first_attach).count();
    latencies.push_back(latency);
    EXPECT_LE(latency, 2.0) << "cores " << cores;
  }
  stop = true;
  sampler.join();
  ASSERT_EQ(latencies.size(), 3u);
  std::sort(latencies.begin(), latencies.end());
  std::printf("runtime seen after its first open: %.2f s median, %.2f s max\n", latencies[1],
              latencies[2]);
  RecordProperty("seen_median_ms", static_cast<int>(latencies[1] * 1000));
  RecordProperty("seen_max_ms", static_cast<int>(latencies[2] * 1000));
}

}  // namespace
}  // namespace neuron

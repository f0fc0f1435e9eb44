// neuron-exporter's exporter-toolkit flags, on the real binary against `neuron-sim up` (a
// trn1.32xlarge: it has EFA) with one workload running, the exporter under `neuron-sim exec` so
// that the live collectors have data: --collector.<name> / --no-collector.<name>,
// --web.telemetry-path, --web.disable-exporter-metrics (monitor/README.md#exporter-flags) and
// --log.format=json; and the split the DaemonSet runs: the collector on a Unix socket, the
// front (--front.upstream) on a port (docs/architecture.md#privilege-split).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "http/local_client.h"
#include "monitor/collector.h"
#include "tests/support/http_client.h"
#include "tests/support/json_logs.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::HttpGet;
using testing::ReadFile;
using testing::SimNode;
using testing::TempDir;
using testing::WaitUntil;

// The metric family names of an exposition (its # TYPE lines).
std::set<std::string> Families(const std::string& text) {
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    names.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// The `collector` label values of one self-metric family.
std::set<std::string> CollectorLabels(const std::string& text, const std::string& family) {
  static const std::regex kLabel("collector=\"([a-z]+)\"");
  std::set<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(family + "{", 0) != 0) continue;
    std::smatch m;
    if (std::regex_search(line, m, kLabel)) names.insert(m[1]);
  }
  return names;
}

std::set<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& s : a) {
    if (!b.contains(s)) out.insert(s);
  }
  return out;
}

// The families --web.disable-exporter-metrics leaves out, as monitor/README.md lists them.
const std::set<std::string> kExporterOwn = {"process_cpu_seconds_total", "process_open_fds",
                                            "process_resident_memory_bytes",
                                            "process_start_time_seconds"};

class ExporterFlagsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("exp_flags");
    sim_ = new SimNode(
        {.sim_bin = NEURON_SIM_BIN, .root = dir_->path() / "root", .logs = dir_->path()});
    // Power rolls up each 200 ms rather than when the wall-clock minute turns, and the suite
    // starts once it has: a scrape before the first rollup has no power ratios, so a reference
    // taken before a minute turned would miss families a later scrape has.
    ASSERT_TRUE(sim_->Up("trn1.32xlarge", {"--power-period-ms", "200"})) << sim_->Log();
    ASSERT_GT(sim_->StartWorkload("0"), 0) << ReadFile(dir_->path() / "run.0.out.err");
    const fs::path power =
        sim_->root() / "sys/devices/virtual/neuron_device/neuron0/stats/power/utilization";
    ASSERT_TRUE(WaitUntil([&] { return ReadFile(power).starts_with("POWER_STATUS_VALID"); }, 30s))
        << ReadFile(power);
  }
  static void TearDownTestSuite() {
    delete sim_;
    delete dir_;
  }

  struct Started {
    pid_t pid = -1;
    int port = 0;
    std::string out, err;  // log paths
  };
  // neuron-exporter under the simulated driver with `flags`, its port read from its log.
  Started Start(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {NEURON_EXPORTER_BIN,    "--root",
                                     sim_->root().string(),  "--no-pod-resources",
                                     "--web.listen-address", "127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    Started s;
    const std::string name = "exporter." + std::to_string(count_++);
    s.out = (dir_->path() / (name + ".out")).string();
    s.err = (dir_->path() / (name + ".err")).string();
    s.pid = testing::Spawn(sim_->UnderDriver(args), s.out, s.err);
    EXPECT_TRUE(WaitUntil(
        [&] {
          s.port = testing::ListeningPort(ReadFile(s.err));
          return s.port > 0;
        },
        60s))
        << ReadFile(s.out) << ReadFile(s.err);
    started_.push_back(s.pid);
    return s;
  }
  // One scrape of a freshly started exporter with `flags`, which is then stopped.
  std::string Scrape(const std::vector<std::string>& flags, const std::string& path = "/metrics") {
    const Started s = Start(flags);
    const testing::HttpResult r = HttpGet(s.port, path);
    EXPECT_EQ(r.status, 200) << r.body;
    testing::Stop(s.pid, 20s);
    return r.body;
  }
  void TearDown() override {
    for (pid_t p : started_) testing::Stop(p, 20s);
  }

  static inline TempDir* dir_ = nullptr;
  static inline SimNode* sim_ = nullptr;
  static inline int count_ = 0;
  std::vector<pid_t> started_;
};

// Each --no-collector.<name> removes that collector's families and its self-metrics (it is not
// run at all), and nothing else: every family of the full output disappears with exactly one
// collector, or is a self-metric that stays whatever is disabled.
TEST_F(ExporterFlagsTest, DisabledCollectorsFamiliesAreAbsentAndTheOthersPresent) {
  const std::string full = Scrape({});
  ASSERT_FALSE(full.empty());
  const std::set<std::string> all = Families(full);
  ASSERT_TRUE(all.contains("neuron_device_power_utilization_ratio"));  // rolled up before
  const std::set<std::string> names(monitor::CollectorNames().begin(),
                                    monitor::CollectorNames().end());
  ASSERT_EQ(names, (std::set<std::string>{"device", "memory", "core", "execution", "health",
                                          "power", "efa", "allocation", "ultraserver"}));
  ASSERT_EQ(CollectorLabels(full, "neuron_exporter_collector_success"), names);
  std::map<std::string, std::string> owner;  // family -> the collector whose removal drops it
  for (const std::string& name : names) {
    const std::string text = Scrape({"--no-collector." + name});
    ASSERT_FALSE(text.empty()) << name;  // the exporter did not start: the rest says nothing
    std::set<std::string> others = names;
    others.erase(name);
    EXPECT_EQ(CollectorLabels(text, "neuron_exporter_collector_success"), others) << name;
    EXPECT_EQ(CollectorLabels(text, "neuron_exporter_collector_duration_seconds"), others) << name;
    const std::set<std::string> dropped = Minus(all, Families(text));
    // Every collector but allocation (pods: none without a kubelet) and ultraserver (not an
    // UltraServer instance) has data on this node.
    if (name != "allocation" && name != "ultraserver") {
      EXPECT_FALSE(dropped.empty()) << name;
    }
    for (const std::string& family : Minus(Families(text), all)) {
      ADD_FAILURE() << family << " appears with " << name << " off but not in the full scrape";
    }
    for (const std::string& family : dropped) {
      EXPECT_FALSE(owner.contains(family))
          << family << " dropped by " << owner[family] << " and " << name;
      owner[family] = name;
    }
  }
  // And all of them off: only the self-metrics remain, which no collector owns (but the
  // per-collector ones, which have no series left and so are left out).
  std::vector<std::string> none;
  none.reserve(names.size());
  for (const std::string& name : names) none.push_back("--no-collector." + name);
  const std::set<std::string> bare = Families(Scrape(none));
  for (const std::string& family : all) {
    const bool per_collector = family == "neuron_exporter_collector_success" ||
                               family == "neuron_exporter_collector_duration_seconds";
    EXPECT_NE(owner.contains(family) || per_collector, bare.contains(family)) << family;
  }
  // --collector.<name> after --no-collector.<name> turns it back on (the last one wins).
  const std::string back = Scrape({"--no-collector.device", "--collector.device"});
  EXPECT_TRUE(CollectorLabels(back, "neuron_exporter_collector_success").contains("device"));
}

TEST_F(ExporterFlagsTest, TelemetryPathMovesTheMetricsAndTheLandingPageFollows) {
  const Started s = Start({"--web.telemetry-path=/x"});
  const testing::HttpResult metrics = HttpGet(s.port, "/x");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\nneuron_up 1\n"), std::string::npos) << metrics.body;
  EXPECT_EQ(HttpGet(s.port, "/metrics").status, 404);
  const testing::HttpResult landing = HttpGet(s.port, "/");
  EXPECT_EQ(landing.status, 200);
  EXPECT_NE(landing.body.find("href=\"/x\""), std::string::npos) << landing.body;
  EXPECT_EQ(landing.body.find("href=\"/metrics\""), std::string::npos) << landing.body;
  EXPECT_NE(landing.body.find("href=\"/healthz\""), std::string::npos) << landing.body;
  EXPECT_NE(landing.body.find("href=\"/readyz\""), std::string::npos) << landing.body;
  EXPECT_NE(landing.body.find("neuron-exporter, version " NEURON_PROJECT_VERSION),
            std::string::npos)
      << landing.body;
  for (const char* bad : {"metrics", "/", "/healthz", "/a b"}) {
    const testing::RunResult r =
        testing::RunCommand(dir_->path(), {NEURON_EXPORTER_BIN, "--root", sim_->root().string(),
                                           std::string("--web.telemetry-path=") + bad});
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("telemetry path"), std::string::npos) << r.err;
  }
}

TEST_F(ExporterFlagsTest, DisableExporterMetricsDropsExactlyTheProcessFamilies) {
  const std::set<std::string> with = Families(Scrape({}));
  const std::set<std::string> without = Families(Scrape({"--web.disable-exporter-metrics"}));
  EXPECT_EQ(Minus(with, without), kExporterOwn);
  EXPECT_TRUE(Minus(without, with).empty());
  EXPECT_TRUE(without.contains("neuron_exporter_build_info"));
  EXPECT_TRUE(without.contains("neuron_exporter_source_up"));
}

// The collector reads the node and serves a Unix socket only; the front reads nothing of the
// node (its --root is an empty directory) and serves the collector's metrics on a port.
TEST_F(ExporterFlagsTest, FrontServesTheCollectorsMetricsFromItsUnixSocket) {
  const fs::path sock = dir_->path() / "exporter.sock";
  const std::string collector_err = (dir_->path() / "collector.err").string();
  const pid_t collector = testing::Spawn(
      sim_->UnderDriver({NEURON_EXPORTER_BIN, "--root", sim_->root().string(), "--no-pod-resources",
                         "--web.listen-address", "unix:" + sock.string()}),
      "", collector_err);
  started_.push_back(collector);
  ASSERT_TRUE(WaitUntil(
      [&] { return ReadFile(collector_err).find("listening on unix:") != std::string::npos; }, 60s))
      << ReadFile(collector_err);
  const fs::path empty = dir_->path() / "front-root";
  fs::create_directories(empty);
  const std::string front_err = (dir_->path() / "front.err").string();
  const pid_t front =
      testing::Spawn({NEURON_EXPORTER_BIN, "--root", empty.string(), "--web.listen-address",
                      "127.0.0.1:0", "--front.upstream", "unix:" + sock.string()},
                     "", front_err);
  started_.push_back(front);
  int port = 0;
  ASSERT_TRUE(
      WaitUntil([&] { return (port = testing::ListeningPort(ReadFile(front_err))) > 0; }, 60s))
      << ReadFile(front_err);
  const absl::StatusOr<LocalResponse> direct = LocalGet("unix:" + sock.string(), "/metrics");
  ASSERT_TRUE(direct.ok()) << direct.status();
  const testing::HttpResult through = HttpGet(port, "/metrics");
  ASSERT_EQ(through.status, 200) << through.body;
  EXPECT_EQ(Families(through.body), Families(direct->body));
  EXPECT_TRUE(Families(through.body).contains("neuron_device_info"));
  EXPECT_EQ(HttpGet(port, "/readyz").status, 200);
  // The collector stops: the front stays alive and says why it cannot scrape.
  EXPECT_EQ(testing::Stop(collector, 20s), 0);
  EXPECT_EQ(HttpGet(port, "/metrics").status, 503);
  EXPECT_EQ(HttpGet(port, "/healthz").status, 200);
  EXPECT_EQ(testing::Stop(front, 20s), 0);
  EXPECT_NE(ReadFile(front_err).find("upstream unix:"), std::string::npos) << "logged";
}

// Every line the exporter logs with --log.format=json parses, including those whose message holds
// quotes, backslashes and a newline (a --root path that holds them and is not a node: the
// exporter serves, and says which sources are down and why, naming the path).
TEST_F(ExporterFlagsTest, JsonLogsParseLineByLine) {
  const fs::path odd = dir_->path() / "not \"a\" node\\\nreally";
  fs::create_directories(odd);
  const fs::path odd_out = dir_->path() / "odd.out", odd_err = dir_->path() / "odd.err";
  const pid_t odd_pid =
      testing::Spawn({NEURON_EXPORTER_BIN, "--root", odd.string(), "--no-pod-resources",
                      "--web.listen-address", "127.0.0.1:0", "--log.format=json"},
                     odd_out, odd_err);
  EXPECT_TRUE(WaitUntil([&] { return testing::ListeningPort(ReadFile(odd_err)) > 0; }, 60s))
      << ReadFile(odd_out) << ReadFile(odd_err);
  EXPECT_EQ(testing::Stop(odd_pid, 20s), 0);
  const Started s = Start({"--log.format", "json", "--log.level=debug"});
  EXPECT_EQ(HttpGet(s.port, "/metrics").status, 200);
  EXPECT_EQ(testing::Stop(s.pid, 20s), 0);
  size_t lines = 0;
  bool odd_seen = false;
  for (const std::string& text :
       {ReadFile(odd_out), ReadFile(odd_err), ReadFile(s.out), ReadFile(s.err)}) {
    const testing::JsonLogLines logs = testing::ParseJsonLogLines(text);
    ASSERT_TRUE(logs.ok()) << "not a JSON log record: " << logs.bad_line;
    lines += logs.records.size();
    for (const nlohmann::json& doc : logs.records) {
      const std::string msg = doc["msg"];
      if (msg.find(odd.string()) != std::string::npos) {
        odd_seen = true;
        EXPECT_EQ(doc["logger"], "exporter") << doc.dump();
      }
    }
  }
  EXPECT_TRUE(odd_seen) << ReadFile(odd_out) << ReadFile(odd_err);
  EXPECT_GE(lines, 4u);
}

}  // namespace
}  // namespace neuron

// The exporter in-process on simulated trees (driver-sim's tree; datastores in memory through
// FakeDatastores, since only a process under the simulated driver can read real ones): golden
// /metrics (native and compat) with NEURON_UPDATE_GOLDENS=1, malformed files (series absent,
// error counted, scrape 200), scrapes sharing one sample and one rendering, the snapshot history
// staying bounded, /readyz before and after the first sample, our text serializer against
// prometheus-cpp's, counters that never go down, live sources that cannot be read (their series
// absent, neuron_exporter_source_up 0). The fixture is exporter_fixture.h; pod attribution is
// tested in exporter_pods_test.cc.
#include "monitor/exporter.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/model/catalog.h"
#include "driver-sim/driver/datastore_writer.h"
#include "driver-sim/driver/sim_tree.h"
#include "http/http_server.h"
#include "monitor/json_stream.h"
#include "podresources/v1/api.grpc.pb.h"
#include "tests/monitor/exporter_fixture.h"
#include "tests/support/fake_datastores.h"
#include "tests/support/golden.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/sim_discovery.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::monitor {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using neuron::testing::ExpectGolden;
using neuron::testing::WriteFile;

// Lines whose values depend on time, on this process or on the build (its revision and
// compiler), dropped before comparing with goldens.
std::string Stable(const std::string& text) {
  static const std::regex kVolatile(
      "^(# (HELP|TYPE) )?(process_|neuron_exporter_collector_duration|neuron_exporter_build_info|"
      "neuron_exporter_samples_total|neuron_exporter_pod_resources|system_|"
      "neuron_runtime_vcpu).*$");
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (std::regex_match(line, kVolatile)) continue;
    out += line + "\n";
  }
  return out;
}

TEST_F(ExporterTest, GoldenNativeAndCompat) {
  BuildNode();
  Start(/*compat=*/false);
  const std::string native = exporter_->RenderMetrics();
  // The utilization gauge needs two samples; the first scrape already has them (Init sampled).
  EXPECT_TRUE(HasMetric(native, "neuroncore_busy_seconds_total{"));
  EXPECT_EQ(Value(native, "neuroncore_busy_seconds_total{neuron_device=\"0\",neuroncore=\"0\"}"),
            2.0 + 3.0);  // sysfs nc_time_in_use 2 s + the datastore's TIME_IN_USE 3 s
  ExpectGolden("monitor/trn1.2xlarge.native.prom", Stable(native));
  source_.reset();

  Start(/*compat=*/true);
  exporter_->RenderMetrics();
  const std::string compat = exporter_->RenderMetrics();
  ExpectGolden("monitor/trn1.2xlarge.compat.prom", Stable(compat));
  EXPECT_TRUE(HasMetric(compat, "instance_info{availability_zone=\"us-east-2b\""));
  EXPECT_TRUE(HasMetric(compat, "execution_status_total{"));
  EXPECT_TRUE(HasMetric(compat, "system_vcpu_count{"));
  EXPECT_NE(compat.find("runtime_tag=\"llama-train\""), std::string::npos);
  // docs/architecture.md#compat-mode: one neuroncore_utilization_ratio family, in the compat shape.
  EXPECT_EQ(compat.find("# TYPE neuroncore_utilization_ratio"),
            compat.rfind("# TYPE neuroncore_utilization_ratio"));
  // Never a PID or instance label outside compat mode.
  EXPECT_EQ(native.find("runtime_tag"), std::string::npos);
  EXPECT_EQ(native.find("instance_id"), std::string::npos);
}

TEST_F(ExporterTest, MalformedFilesDropTheirSeriesCountAnErrorAndStillAnswer200) {
  BuildNode();
  Start(false);
  const std::string before = exporter_->RenderMetrics();
  ASSERT_TRUE(Value(before,
                    "neuron_device_ecc_uncorrected_errors_total{neuron_device=\"0\","
                    "memory=\"hbm\"}"));
  EXPECT_EQ(Value(before, "neuron_exporter_read_errors_total"), 0);
  // A garbage ECC file. (Malformed datastores are core's: tests/core parses them.)
  WriteFile(root_ / "sys/devices/virtual/neuron_device/neuron0/stats/hardware/mem_ecc_uncorrected",
            "banana\n");

  HttpServer::Options ho;
  ho.handlers = exporter_->Handlers();
  auto server = HttpServer::Start(std::move(ho));
  ASSERT_TRUE(server.ok());
  const testing::HttpResult r = testing::HttpGet((*server)->port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(Value(r.body,
                     "neuron_device_ecc_uncorrected_errors_total{neuron_device=\"0\","
                     "memory=\"hbm\"}"))
      << "a malformed file's series must be absent";
  EXPECT_TRUE(Value(r.body,
                    "neuron_device_ecc_uncorrected_errors_total{neuron_device=\"0\","
                    "memory=\"sram\"}"))
      << "its neighbours stay";
  EXPECT_GE(Value(r.body, "neuron_exporter_read_errors_total").value_or(0), 1);
  EXPECT_EQ(Value(r.body, "neuron_up"), 1);
}

TEST_F(ExporterTest, ScrapesWithinTheWindowShareOneSampleAndOneRendering) {
  BuildNode();
  Start(false, false, /*share=*/3000ms);
  const uint64_t renders_before = exporter_->renders();
  const std::string first_text = exporter_->RenderMetrics();
  const double first = *Value(first_text, "neuron_exporter_samples_total");
  for (int i = 0; i < 5; ++i) exporter_->RenderMetrics();
  const std::string last_text = exporter_->RenderMetrics();
  const double after = *Value(last_text, "neuron_exporter_samples_total");
  EXPECT_LE(after - first, 1) << "scrapes inside the sharing window must reuse the sample";
  EXPECT_LE(exporter_->renders() - renders_before, 2u)
      << "scrapes of one snapshot must reuse its rendered text";
  EXPECT_EQ(Stable(last_text), Stable(exporter_->RenderMetrics()));
  // The counters in the cached text still move once the window passes: scrapes keep the cached
  // text until the first one after the window takes a new sample, which renders once.
  ASSERT_TRUE(writer_->SetCoreCounter(0, nds::kInferenceCount, 77).ok());
  const std::string series = "neuroncore_inferences_total{neuron_device=\"0\",neuroncore=\"0\"}";
  const uint64_t renders_mid = exporter_->renders();
  const uint64_t samples_mid = source_->samples();
  std::string later;
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] {
        later = exporter_->RenderMetrics();
        return Value(later, series) == 77;
      },
      30s))
      << "the new counter never showed after the 3 s window";
  EXPECT_GT(*Value(later, "neuron_exporter_samples_total"), after);
  EXPECT_EQ(exporter_->renders() - renders_mid, source_->samples() - samples_mid)
      << "one rendering per sample, however many scrapes";
}

TEST_F(ExporterTest, HistoryStaysBoundedWhateverTheScrapeRate) {
  BuildNode();
  ExporterStateOptions so = Options();
  so.utilization_window = 400ms;
  ExporterState source(so);
  ASSERT_TRUE(source.Init().ok());
  source.Start();
  const auto end = std::chrono::steady_clock::now() + 1500ms;
  int samples = 0;
  size_t most = 0;
  bool had_base = false;
  while (std::chrono::steady_clock::now() < end) {
    const ExporterView v = source.Get();
    ++samples;
    most = std::max(most, source.history_size());
    // Once the window has passed, the base is at least a window older than the latest.
    if (v.base != nullptr && v.current->steady - v.base->steady >= 400ms) had_base = true;
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_GT(samples, 50);
  // Kept snapshots are a quarter window apart: the window's four, the latest and the base.
  EXPECT_LE(most, 7u) << samples << " samples";
  EXPECT_TRUE(had_base);
}

TEST_F(ExporterTest, ReadyzAnswers503UntilTheFirstSampleThen200) {
  BuildNode();
  ExporterState source(Options());
  Exporter exporter(source, ExporterOptions{});
  HttpServer::Options ho;
  ho.handlers = exporter.Handlers();
  auto server = HttpServer::Start(std::move(ho));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  testing::HttpResult r = testing::HttpGet(port, "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("inventory"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find('\n'), r.body.size() - 1) << "one line: " << r.body;
  EXPECT_EQ(testing::HttpGet(port, "/metrics").status, 503);
  EXPECT_EQ(testing::HttpGet(port, "/healthz").status, 200) << "alive while not ready";
  ASSERT_TRUE(source.Init().ok());
  EXPECT_EQ(testing::HttpGet(port, "/readyz").status, 503);
  source.Start();
  r = testing::HttpGet(port, "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  r = testing::HttpGet(port, "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Value(r.body, "neuron_up"), 1);
}

// Our serializer writes what prometheus::TextSerializer writes (the goldens were made with it),
// numbers and label escapes included.
TEST(AppendTextTest, MatchesPrometheusCppSerializer) {
  Families families;
  FamilyBuilder g = Gauge("g", "a gauge with \"quotes\"");
  const double values[] = {0.0,
                           -0.0,
                           1,
                           0.1,
                           1.0 / 3,
                           1e6,
                           1e16,
                           1e17,
                           123456789012345678.0,
                           2.5e-7,
                           34359738368,
                           18446744073709551615.0,
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::denorm_min()};
  int i = 0;
  for (const double v : values) g.Add({L("i", Str(i++)), L("esc", "a\\b\"c\nd")}, v);
  g.Add({}, 42);
  g.Finish(families);
  FamilyBuilder c = Counter("c_total", "");
  c.Add({L("x", "")}, 7);
  c.Finish(families);
  FamilyBuilder h = Histogram("h_seconds", "latency");
  h.AddHistogram({L("d", "0")}, {{0.0005, 1}, {0.001, 3}, {2.5, 3}}, 4, 0.0123);
  h.AddHistogram({}, {}, 0, 0);
  h.Finish(families);
  std::string ours;
  AppendText(families, ours);
  EXPECT_EQ(ours, prometheus::TextSerializer().Serialize(families));
  // HELP text is escaped as the format requires (prometheus-cpp 1.0 writes it raw).
  Families help;
  FamilyBuilder e = Gauge("e", "line\nbreak \\ slash");
  e.Add({}, 1);
  e.Finish(help);
  std::string text;
  AppendText(help, text);
  EXPECT_EQ(text, "# HELP e line\\nbreak \\\\ slash\n# TYPE e gauge\ne 1\n");
}

TEST_F(ExporterTest, CountersNeverGoDownAndAbsentFilesLeaveSeriesOut) {
  BuildNode();
  // Every sample a full sweep, the only kind that reads stats/power/utilization; no sharing, so
  // every scrape is a new sample.
  ExporterStateOptions so = Options();
  so.full_sweep_interval = 0ms;
  StartWith(so, false);
  const std::string series = "neuroncore_inferences_total{neuron_device=\"0\",neuroncore=\"0\"}";
  ASSERT_TRUE(writer_->SetCoreCounter(0, nds::kInferenceCount, 50).ok());
  const double high = *Value(exporter_->RenderMetrics(), series);
  ASSERT_TRUE(writer_->SetCoreCounter(0, nds::kInferenceCount, 10).ok());  // a dip
  EXPECT_EQ(*Value(exporter_->RenderMetrics(), series), high);
  // No EFA on a trn1.2xlarge -> no series, never 0.
  const std::string text = exporter_->RenderMetrics();
  EXPECT_FALSE(HasMetric(text, "neuron_efa_"));
  // The power files read, then removed -> their series leave, never 0.
  const std::string power = "neuron_device_power_utilization_ratio{neuron_device=\"0\"}";
  const std::string valid = "neuron_device_power_data_valid{neuron_device=\"0\"}";
  EXPECT_EQ(Value(text, power), 0.255);  // avg 2550 basis points
  EXPECT_EQ(Value(text, valid), 1);
  const double samples_before = *Value(text, "neuron_exporter_samples_total");
  EXPECT_EQ(Value(text, "neuron_device_power_die_utilization_ratio{neuron_device=\"0\",die=\"0\"}"),
            0.255);
  ASSERT_TRUE(
      fs::remove(root_ / "sys/devices/virtual/neuron_device/neuron0/stats/power/utilization"));
  ASSERT_TRUE(
      fs::remove(root_ / "sys/devices/virtual/neuron_device/neuron0/stats/power/utilization_raw"));
  const std::string after = exporter_->RenderMetrics();
  // Evidence that this scrape sampled after the removal, so the absence below means something.
  ASSERT_GT(*Value(after, "neuron_exporter_samples_total"), samples_before);
  EXPECT_EQ(Value(after, power), std::nullopt) << after;
  EXPECT_EQ(Value(after, valid), std::nullopt) << after;
  EXPECT_FALSE(HasMetric(after, "neuron_device_power_")) << after;
  EXPECT_TRUE(Value(after, series)) << "the other series stay";
}

// Series that add the live datastores to a sysfs total, or come from them alone. Without the
// datastores a running job's counters would stand still and its cores read as idle.
constexpr std::string_view kLiveFamilies[] = {
    "neuroncore_busy_seconds_total",
    "neuroncore_utilization_ratio",
    "neuron_device_utilization_ratio",
    "neuroncore_flops_total",
    "neuroncore_model_loads_total",
    "neuroncore_inferences_total",
    "neuroncore_executions_total",
    "neuroncore_execution_failures_total",
    "neuron_device_execution_errors_total",
    "neuron_execution_latency_mean_seconds",
    "neuron_runtime_memory_used_bytes",
    "neuron_runtime_vcpu_usage_ratio",
    "neuroncore_memory_usage_tensors",
    "execution_errors_total",
    "execution_status_total",
};
// Complete from sysfs alone (the driver updates them live): they stay whatever the datastores.
constexpr std::string_view kSysfsFamilies[] = {
    "neuron_device_info",
    "neuron_device_state",
    "neuron_device_memory_used_bytes",
    "neuroncore_memory_used_bytes",
    "neuron_device_ecc_uncorrected_errors_total",
    "neuroncore_reset_requests_total",
    "neuron_device_power_utilization_ratio",
    "hardware_ecc_events_total",
};

const std::string kDatastoreUp = "neuron_exporter_source_up{source=\"datastore\"}";

// Latency from the public counters (docs/metrics.md#executions-errors-latency): the rise of
// LATENCY_TOTAL and LATENCY_DEVICE (µs) over the rise of INFER_COMPLETED within the utilization
// window; absent while nothing completes. No histogram, no percentiles, in either mode.
TEST_F(ExporterTest, LatencyIsTheMeanOverTheWindowFromTheCounters) {
  BuildNode();
  ExporterStateOptions so = Options();
  so.utilization_window = 200ms;
  StartWith(so, /*compat=*/true);
  std::string text = exporter_->RenderMetrics();
  const std::string total =
      "neuron_execution_latency_mean_seconds{neuron_device=\"0\",latency=\"total\"}";
  const std::string device =
      "neuron_execution_latency_mean_seconds{neuron_device=\"0\",latency=\"device\"}";
  EXPECT_FALSE(Value(text, total)) << "nothing completed since the exporter started";
  // Core 0: 4 executions of 2.5 ms (2 ms on the device); core 1: 1 of 5 ms (4 ms).
  ASSERT_TRUE(writer_->AddCoreCounter(0, nds::kInferCompleted, 4).ok());
  ASSERT_TRUE(writer_->AddCoreCounter(0, nds::kLatencyTotal, uint64_t{4} * 2500).ok());
  ASSERT_TRUE(writer_->AddCoreCounter(0, nds::kLatencyDevice, uint64_t{4} * 2000).ok());
  ASSERT_TRUE(writer_->AddCoreCounter(1, nds::kInferCompleted, 1).ok());
  ASSERT_TRUE(writer_->AddCoreCounter(1, nds::kLatencyTotal, 5000).ok());
  ASSERT_TRUE(writer_->AddCoreCounter(1, nds::kLatencyDevice, 4000).ok());
  ASSERT_TRUE(neuron::testing::WaitUntil(
      [&] { return Value(text = exporter_->RenderMetrics(), total).has_value(); }, 10s));
  EXPECT_DOUBLE_EQ(*Value(text, total), (4 * 2500 + 5000) / 5.0 / 1e6);
  EXPECT_DOUBLE_EQ(*Value(text, device), (4 * 2000 + 4000) / 5.0 / 1e6);
  EXPECT_FALSE(HasFamily(text, "neuron_execution_latency_seconds"));
  EXPECT_FALSE(HasFamily(text, "execution_latency_seconds"));
  // Once the window has moved past the executions, the mean is unknown again, not 0.
  ASSERT_TRUE(neuron::testing::WaitUntil(
      [&] { return !Value(exporter_->RenderMetrics(), total).has_value(); }, 10s));
}

// Records libnrt cannot give (no library, a format it does not read) are unknown: the runtime's
// tag falls back to its PID, source_up{runtime_records} is 0, and every counter stays.
TEST_F(ExporterTest, UnknownRuntimeRecordsLeaveTheCountersAlone) {
  BuildNode();
  datastores_->SetRecordsState({true, false, "cannot load libnrt (libnrt.so.1: not found)"});
  Start(/*compat=*/true);
  exporter_->RenderMetrics();
  const std::string text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, "neuron_exporter_source_up{source=\"runtime_records\"}"), 0);
  EXPECT_EQ(Value(text, kDatastoreUp), 1);
  EXPECT_EQ(Value(text, "neuroncore_busy_seconds_total{neuron_device=\"0\",neuroncore=\"0\"}"),
            2.0 + 3.0);
  EXPECT_TRUE(HasFamily(text, "execution_status_total"));
  datastores_->Remove(0, kPid);  // records and all: then re-add the datastore only
  writer_ = &datastores_->Add(0, kPid);
  const std::string without = exporter_->RenderMetrics();
  EXPECT_EQ(without.find("llama-train"), std::string::npos);
  EXPECT_NE(without.find("runtime_tag=\"" + std::to_string(kPid) + "\""), std::string::npos);
}

// The JSON stream's loaded_models come from the records; unknown records give no list and say why
// (docs/metrics.md#json-stream), and latency_stats stay null.
TEST_F(ExporterTest, JsonLoadedModelsOnlyWhenTheRecordsAreKnown) {
  BuildNode();
  Start(/*compat=*/false);
  nlohmann::json doc = nlohmann::json::parse(JsonStream(*source_, {}).Next());
  ASSERT_EQ(doc["neuron_runtime_data"].size(), 1u);
  nlohmann::json rt = doc["neuron_runtime_data"][0];
  EXPECT_EQ(rt["neuron_runtime_tag"], "llama-train");
  ASSERT_EQ(rt["report"]["memory_used"]["loaded_models"].size(), 1u);
  EXPECT_EQ(rt["report"]["memory_used"]["loaded_models"][0]["name"], "llama2-7b");
  EXPECT_EQ(rt["report"]["memory_used"]["error"], "");
  EXPECT_TRUE(rt["report"]["execution_stats"]["latency_stats"]["total_latency"].is_null());

  datastores_->SetRecordsState({true, false, "cannot load libnrt (libnrt.so.1: not found)"});
  datastores_->Remove(0, kPid);  // its records go with it; the datastore comes back alone
  writer_ = &datastores_->Add(0, kPid);
  doc = nlohmann::json::parse(JsonStream(*source_, {}).Next());
  rt = doc["neuron_runtime_data"][0];
  EXPECT_EQ(rt["neuron_runtime_tag"], std::to_string(kPid));
  EXPECT_FALSE(rt["report"]["memory_used"].contains("loaded_models"));
  EXPECT_EQ(rt["report"]["memory_used"]["error"],
            "loaded models unknown: cannot load libnrt (libnrt.so.1: not found)");
}

TEST_F(ExporterTest, DatastoresDownLeaveLiveSeriesOutAndSysfsSeriesIn) {
  BuildNode();
  datastores_->SetState({true, false, "/dev/neuron0: no Neuron driver answers its ioctls"});
  ExporterStateOptions so = Options();
  so.utilization_window = 300ms;
  StartWith(so, /*compat=*/true);
  std::string text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, kDatastoreUp), 0);
  EXPECT_EQ(Value(text, "neuron_exporter_source_up{source=\"sysfs\"}"), 1);
  EXPECT_EQ(Value(text, "neuron_exporter_source_up{source=\"kmsg\"}"), 1);
  // The fake still hands out its records: the exporter must not use them while the source
  // says it cannot be read.
  for (std::string_view f : kLiveFamilies) EXPECT_FALSE(HasFamily(text, f)) << f;
  for (std::string_view f : kSysfsFamilies) EXPECT_TRUE(HasFamily(text, f)) << f;

  datastores_->SetState({true, true, ""});
  text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, kDatastoreUp), 1);
  EXPECT_EQ(Value(text, "neuroncore_busy_seconds_total{neuron_device=\"0\",neuroncore=\"0\"}"),
            2.0 + 3.0);
  EXPECT_TRUE(HasFamily(text, "neuron_runtime_memory_used_bytes"));
  // A window that starts while the datastores were unreadable measures nothing: its base lacks
  // every running process's busy time.
  EXPECT_FALSE(HasFamily(text, "neuroncore_utilization_ratio"));
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] {
        EXPECT_TRUE(writer_->AddCoreCounter(0, nds::kTimeInUse, 100'000).ok());
        return HasFamily(exporter_->RenderMetrics(), "neuroncore_utilization_ratio");
      },
      10s));
  for (std::string_view f : kSysfsFamilies) EXPECT_TRUE(HasFamily(text, f)) << f;
}

TEST_F(ExporterTest, NativeUtilizationFollowsTheDatastoreSource) {
  BuildNode();
  datastores_->SetState({true, false, "no device node /dev/neuron0"});
  Start(/*compat=*/false);
  std::string text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, kDatastoreUp), 0);
  EXPECT_FALSE(HasMetric(text, "neuroncore_utilization_ratio{"));
  EXPECT_FALSE(HasMetric(text, "neuroncore_busy_seconds_total{"));
  EXPECT_TRUE(HasMetric(text, "neuroncore_memory_used_bytes{"));
  // Unknown (no probe answered yet): neither 0 nor 1, and still no live series.
  datastores_->SetState({false, false, ""});
  text = exporter_->RenderMetrics();
  EXPECT_FALSE(Value(text, kDatastoreUp));
  EXPECT_FALSE(HasMetric(text, "neuroncore_busy_seconds_total{"));
  datastores_->SetState({true, true, ""});
  text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, kDatastoreUp), 1);
  EXPECT_TRUE(HasMetric(text, "neuroncore_busy_seconds_total{"));
}

TEST_F(ExporterTest, UnreadableKernelLogLeavesHwErrorCountsOut) {
  BuildNode();
  fs::remove(root_ / "dev/kmsg");
  Start(/*compat=*/false);
  std::string text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, "neuron_exporter_source_up{source=\"kmsg\"}"), 0);
  EXPECT_FALSE(HasFamily(text, "neuron_device_hw_error_log_events_total"))
      << "0 would say no hardware error was logged";
  EXPECT_TRUE(HasFamily(text, "neuron_device_ecc_uncorrected_errors_total"));
  // The log appears (a driver loaded after us): its counts come back within the tail period.
  WriteFile(root_ / "dev/kmsg", "");
  EXPECT_TRUE(neuron::testing::WaitUntil(
      [&] {
        text = exporter_->RenderMetrics();
        return Value(text, "neuron_exporter_source_up{source=\"kmsg\"}") == 1;
      },
      10s));
  EXPECT_EQ(
      Value(text,
            "neuron_device_hw_error_log_events_total{neuron_device=\"0\",error=\"DMA_ERROR\"}"),
      0);
}

TEST_F(ExporterTest, SysfsSourceIsDownWhenDeviceStateCannotBeRead) {
  BuildNode();
  Start(/*compat=*/false);
  EXPECT_EQ(Value(exporter_->RenderMetrics(), "neuron_exporter_source_up{source=\"sysfs\"}"), 1);
  fs::remove(root_ / "sys/devices/virtual/neuron_device/neuron0/reset");
  const std::string text = exporter_->RenderMetrics();
  EXPECT_EQ(Value(text, "neuron_exporter_source_up{source=\"sysfs\"}"), 0);
  EXPECT_FALSE(HasFamily(text, "neuron_device_state"));
}

// A kubelet's PodResources service with one answer: one container holding `devices` (resource
// name, IDs).
}  // namespace
}  // namespace neuron::monitor

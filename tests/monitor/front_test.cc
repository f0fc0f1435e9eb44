// The exporter's unprivileged front (monitor/front.h) in front of a collector on a Unix socket:
// a scrape through it is the collector's answer byte for byte, basic auth applies at the front
// (the collector has none), a dead collector is a quick 503, a stuck one never blocks the
// front's /healthz, and the plugin's /metrics comes through /plugin/metrics. The collector here
// is the same HTTP server the exporter runs, on a Unix socket, with a fixed body, so that
// "equal" can be exact; tests/monitor/exporter_flags_test.cc runs the real binary in both modes.
#include "monitor/front.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "http/local_client.h"
#include "tests/support/basic_auth_user.h"
#include "tests/support/http_client.h"
#include "tests/support/temp_dir.h"

namespace neuron::monitor {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using neuron::testing::HttpGet;
using neuron::testing::TempDir;

constexpr char kType[] = "text/plain; version=0.0.4; charset=utf-8";

// An exposition-like body of ~300 KB (a trn2.48xlarge scrape is of that order), every line
// different so that a dropped or repeated chunk shows.
std::string BigBody() {
  std::string body;
  for (int i = 0; i < 6000; ++i) {
    body += "neuron_core_utilization_ratio{device=\"" + std::to_string(i / 8) + "\",core=\"" +
            std::to_string(i % 8) + "\"} 0." + std::to_string(i) + "\n";
  }
  return body;
}

HttpResponse Answer(std::string body) {
  HttpResponse r;
  r.content_type = kType;
  r.body = std::move(body);
  return r;
}

FrontOptions To(std::string upstream) {
  FrontOptions o;
  o.upstream = std::move(upstream);
  return o;
}

// A collector on unix:DIR/exporter.sock whose /metrics waits for `gate` when it is set.
struct Collector {
  explicit Collector(const TempDir& dir, const std::string& body)
      : address("unix:" + (dir.path() / "exporter.sock").string()) {
    HttpServer::Options o;
    o.listen_address = address;
    o.handlers["/metrics"] = [this, body](const HttpRequest&) {
      std::unique_lock<std::mutex> lock(mu);
      max_waiting = std::max(max_waiting, ++waiting);
      cv.wait(lock, [&] { return !hold; });
      --waiting;
      return Answer(body);
    };
    o.handlers["/readyz"] = [](const HttpRequest&) { return Answer("ok\n"); };
    server = *HttpServer::Start(std::move(o));
  }
  ~Collector() { Release(); }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    hold = false;
    cv.notify_all();
  }
  std::string address;
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  int waiting = 0, max_waiting = 0;  // requests at the handler at once (under mu)
  std::unique_ptr<HttpServer> server;
};

std::unique_ptr<HttpServer> StartFront(const FrontOptions& fo,
                                       std::optional<WebConfig> web_config = std::nullopt) {
  HttpServer::Options o;
  o.threads = fo.threads;
  o.handlers = FrontHandlers(fo);
  o.web_config = std::move(web_config);
  absl::StatusOr<std::unique_ptr<HttpServer>> s = HttpServer::Start(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(FrontTest, ScrapeThroughTheFrontIsTheCollectorsAnswer) {
  TempDir dir("front");
  const std::string body = BigBody();
  Collector collector(dir, body);
  struct stat st {};
  ASSERT_EQ(stat((dir.path() / "exporter.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u) << "owner and group only";

  const absl::StatusOr<LocalResponse> direct = LocalGet(collector.address, "/metrics");
  ASSERT_TRUE(direct.ok()) << direct.status();
  ASSERT_EQ(direct->body, body);
  auto front = StartFront(To(collector.address));
  ASSERT_NE(front, nullptr);
  for (int i = 0; i < 3; ++i) {
    const testing::HttpResult got = HttpGet(front->port(), "/metrics");
    EXPECT_EQ(got.status, 200);
    EXPECT_EQ(got.body, direct->body);
    EXPECT_NE(got.headers.find(kType), std::string::npos) << got.headers;
  }
  EXPECT_EQ(HttpGet(front->port(), "/readyz").status, 200);
  EXPECT_EQ(HttpGet(front->port(), "/plugin/metrics").status, 404) << "no plugin upstream given";
  // The collector's socket goes with it.
  collector.server.reset();
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "exporter.sock"));
}

TEST(FrontTest, BasicAuthAppliesAtTheFront) {
  TempDir dir("front");
  Collector collector(dir, "up 1\n");
  WebConfig config;
  config.basic_auth_users["alice"] = testing::alice::kHash;
  auto front = StartFront(To(collector.address), config);
  ASSERT_NE(front, nullptr);
  EXPECT_EQ(HttpGet(front->port(), "/metrics").status, 401);
  const testing::HttpResult ok = HttpGet(front->port(), "/metrics", testing::alice::kGoodAuth);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "up 1\n");
  EXPECT_EQ(HttpGet(front->port(), "/healthz").status, 200) << "probes need no credentials";
  EXPECT_EQ(HttpGet(front->port(), "/readyz").status, 200);
}

TEST(FrontTest, DeadCollectorIsAQuick503) {
  TempDir dir("front");
  auto front = StartFront(To("unix:" + (dir.path() / "gone.sock").string()));
  ASSERT_NE(front, nullptr);
  for (const char* path : {"/metrics", "/readyz"}) {
    const auto start = Clock::now();
    const testing::HttpResult got = HttpGet(front->port(), path);
    EXPECT_LT(Clock::now() - start, 500ms) << path;
    EXPECT_EQ(got.status, 503) << path;
    EXPECT_NE(got.body.find("upstream unavailable"), std::string::npos) << got.body;
  }
  EXPECT_EQ(HttpGet(front->port(), "/healthz").status, 200) << "the front itself is alive";
}

TEST(FrontTest, StuckCollectorNeverBlocksTheFrontsHealthz) {
  TempDir dir("front");
  Collector collector(dir, "up 1\n");
  collector.hold = true;
  FrontOptions fo = To(collector.address);
  fo.timeout = 800ms;
  fo.threads = 4;
  auto front = StartFront(fo);
  ASSERT_NE(front, nullptr);
  // More scrapes than workers, all stuck at the collector.
  std::vector<std::future<testing::HttpResult>> scrapes;
  scrapes.reserve(6);
  for (int i = 0; i < 6; ++i) {
    scrapes.push_back(
        std::async(std::launch::async, [&] { return HttpGet(front->port(), "/metrics"); }));
  }
  std::this_thread::sleep_for(150ms);
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    EXPECT_EQ(HttpGet(front->port(), "/healthz").status, 200);
    EXPECT_LT(Clock::now() - start, 500ms) << "/healthz waited behind the stuck scrapes";
  }
  int timed_out = 0, busy = 0;
  for (auto& f : scrapes) {
    const testing::HttpResult r = f.get();
    EXPECT_EQ(r.status, 503) << r.body;
    timed_out += r.body.find("no answer in time") != std::string::npos;
    busy += r.body.find("upstream busy") != std::string::npos;
  }
  EXPECT_EQ(timed_out + busy, 6);
  EXPECT_GE(timed_out, 3);
  EXPECT_GE(busy, 1);
  {
    std::lock_guard<std::mutex> lock(collector.mu);
    // Every forward that reached the collector is still held there; with all six scrapes at
    // once (the usual case) that is threads - 1 = 3, the rest answered busy at once.
    EXPECT_EQ(collector.max_waiting, timed_out);
  }
  collector.Release();
  EXPECT_EQ(HttpGet(front->port(), "/metrics").status, 200) << "back once the collector is";
}

TEST(FrontTest, PluginMetricsComeThroughTheFront) {
  TempDir dir("front");
  Collector collector(dir, "up 1\n");
  HttpServer::Options po;
  po.listen_address = "unix:" + (dir.path() / "plugin.sock").string();
  po.handlers["/metrics"] = [](const HttpRequest&) { return Answer("neuron_plugin_up 1\n"); };
  auto plugin = HttpServer::Start(std::move(po));
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  FrontOptions fo = To(collector.address);
  fo.plugin_upstream = "unix:" + (dir.path() / "plugin.sock").string();
  auto front = StartFront(fo);
  ASSERT_NE(front, nullptr);
  const testing::HttpResult got = HttpGet(front->port(), "/plugin/metrics");
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body, "neuron_plugin_up 1\n");
  EXPECT_EQ(HttpGet(front->port(), "/metrics").body, "up 1\n");
}

TEST(LocalClientTest, AnswersAndFailuresAreTold) {
  TempDir dir("front");
  EXPECT_EQ(LocalGet("unix:" + (dir.path() / "none.sock").string(), "/").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(LocalGet("nonsense", "/").status().code(), absl::StatusCode::kInvalidArgument);
  Collector collector(dir, std::string(2000, 'x'));
  LocalRequestOptions small;
  small.max_response_bytes = 1000;
  EXPECT_EQ(LocalGet(collector.address, "/metrics", small).status().code(),
            absl::StatusCode::kDataLoss);
  const absl::StatusOr<LocalResponse> missing = LocalGet(collector.address, "/nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
}

}  // namespace
}  // namespace neuron::monitor

// Basic auth fails closed and costs bounded CPU: a web config that is empty, gone,
// half written or invalid, or that would turn authentication or TLS off, is not applied and is
// warned about on every check until fixed (http/web_config_reloader.h); wrong passwords lock their
// address out and at most a few bcrypt checks run at once (http/login_limiter.h); /healthz and
// /readyz need no credentials; basic auth over plain HTTP is a warning at start.
#include <crypt.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "http/login_limiter.h"
#include "http/web_config.h"
#include "http/web_config_reloader.h"
#include "tests/http/captured_log.h"
#include "tests/support/basic_auth_user.h"
#include "tests/support/http_test_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::CapturedLog;
using testing::StatusFrom;
using testing::TempDir;

std::string Get(const std::string& path, const std::string& auth = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + auth + "\r\n";
}

HttpServer::Options WithUsers(const std::string& hash = testing::alice::kHash) {
  HttpServer::Options o;
  for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
    o.handlers[path] = [](const HttpRequest&) { return HttpResponse(); };
  }
  WebConfig config;
  config.basic_auth_users["alice"] = hash;
  o.web_config = config;
  return o;
}

TEST(HttpAuthTest, ProbesNeedNoCredentialsAndMetricsDoes) {
  CapturedLog log("auth-public");
  HttpServer::Options o = WithUsers();
  o.logger_name = "auth-public";
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/healthz")), 200);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/readyz")), 200);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics")), 401);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kGoodAuth)), 200);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/nope")), 401);  // other paths reveal nothing
  EXPECT_TRUE(log.Contains("basic auth over plain HTTP"));
}

TEST(HttpAuthTest, AnAddressThatKeepsFailingIsLockedOutWithoutChecks) {
  HttpServer::Options o = WithUsers();
  o.login_limits.first_lockout = 1s;
  o.login_limits.refusal_delay = 300ms;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  EXPECT_EQ(StatusFrom("127.0.0.2", port, Get("/metrics", testing::alice::kGoodAuth)),
            200);  // now cached
  // Five failures are free; the sixth locks 127.0.0.1 out.
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kWrongAuth)), 401);
  }
  std::string answer;
  const auto refused = Clock::now();
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kWrongAuth), &answer),
            429);
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  EXPECT_GE(Clock::now() - refused, 250ms) << "the refusal was not held back";
  // Locked out of checks only: credentials already proven pass, from there and elsewhere.
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kGoodAuth)), 200);
  EXPECT_EQ(StatusFrom("127.0.0.2", port, Get("/metrics", testing::alice::kGoodAuth)), 200);
  // After the lockout one more check is allowed; it fails and the lockout doubles.
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kWrongAuth)), 401);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kWrongAuth)), 429);
  std::this_thread::sleep_for(1100ms);
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kWrongAuth)),
            429);  // 2 s now
}

// A cost-12 hash takes hundreds of milliseconds per check: long enough for concurrent wrong
// passwords from many addresses to find the one check thread busy and its queue full.
TEST(HttpAuthTest, FewChecksRunAtOnceAndCachedClientsDoNotWait) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  ASSERT_NE(crypt_gensalt_rn("$2y$", 12, nullptr, 0, salt, sizeof salt), nullptr);
  auto data = std::make_unique<crypt_data>();
  const auto made = Clock::now();
  const std::string hash = crypt_rn("secret", salt, data.get(), sizeof(crypt_data));
  const double check_ms = std::chrono::duration<double, std::milli>(Clock::now() - made).count();
  HttpServer::Options o = WithUsers(hash);
  o.threads = 2;
  o.login_limits.concurrent_checks = 1;
  o.login_limits.queued_checks = 2;
  o.login_limits.refusal_delay = 0ms;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_EQ(StatusFrom("127.0.0.9", port, Get("/metrics", testing::alice::kGoodAuth)),
            200);  // cached from here on

  std::atomic<int> unauthorized{0};
  std::atomic<int> busy{0};
  std::vector<std::thread> attackers;
  attackers.reserve(6);
  for (int i = 0; i < 6; ++i) {
    attackers.emplace_back([&, i] {
      std::string answer;
      const int s = StatusFrom("127.0.0." + std::to_string(10 + i), port,
                               Get("/metrics", testing::alice::kWrongAuth), &answer);
      unauthorized += s == 401 ? 1 : 0;
      busy += s == 429 && answer.find("password checks busy") != std::string::npos ? 1 : 0;
    });
  }
  std::this_thread::sleep_for(50ms);
  const auto t0 = Clock::now();
  EXPECT_EQ(StatusFrom("127.0.0.9", port, Get("/metrics", testing::alice::kGoodAuth)), 200);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  for (std::thread& t : attackers) t.join();
  EXPECT_EQ(unauthorized + busy, 6);
  EXPECT_GE(busy.load(), 1) << "every check ran, none was refused";
  EXPECT_LE(unauthorized.load(), 3) << "more checks than one running and two queued";
  // Not a latency benchmark (bench/http_abuse_bench.cc is): only that it did not queue behind
  // a check, which takes as long as making the hash did.
  EXPECT_LT(ms, check_ms / 2) << "the cached client waited behind bcrypt (" << check_ms << " ms)";
}

TEST(LoginLimiterTest, LocksOutAfterFreeFailuresDoublingUpToTheCap) {
  LoginLimits limits;
  limits.free_failures = 2;
  limits.first_lockout = 1s;
  limits.max_lockout = 3s;
  LoginLimiter l(limits);
  const auto t = Clock::now();
  for (int i = 0; i < 2; ++i) {
    l.Record("a", false, t);
    EXPECT_EQ(l.LockedFor("a", t), Clock::duration::zero());
  }
  l.Record("a", false, t);
  EXPECT_EQ(l.LockedFor("a", t), Clock::duration(1s));
  EXPECT_EQ(l.LockedFor("b", t), Clock::duration::zero());  // per address
  l.Record("a", false, t + 1s);
  EXPECT_EQ(l.LockedFor("a", t + 1s), Clock::duration(2s));
  l.Record("a", false, t + 3s);
  EXPECT_EQ(l.LockedFor("a", t + 3s), Clock::duration(3s));  // capped
  l.Record("a", true, t + 6s);                               // a success clears the address
  EXPECT_EQ(l.LockedFor("a", t + 6s), Clock::duration::zero());
  // Failures long apart start counting afresh.
  l.Record("c", false, t);
  l.Record("c", false, t);
  l.Record("c", false, t + limits.forget_after + 1s);
  EXPECT_EQ(l.LockedFor("c", t + limits.forget_after + 1s), Clock::duration::zero());
}

TEST(LoginLimiterTest, RemembersABoundedNumberOfAddresses) {
  LoginLimits limits;
  limits.max_addresses = 3;
  limits.free_failures = 0;
  LoginLimiter l(limits);
  const auto t = Clock::now();
  l.Record("a", false, t);
  l.Record("b", false, t + 1ms);
  l.Record("c", false, t + 2ms);
  l.Record("d", false, t + 3ms);  // a fourth address: the stalest, "a", is forgotten
  EXPECT_EQ(l.LockedFor("a", t + 4ms), Clock::duration::zero());
  EXPECT_GT(l.LockedFor("b", t + 4ms), Clock::duration::zero());
  EXPECT_GT(l.LockedFor("d", t + 4ms), Clock::duration::zero());
}

// The reloader alone, checking on every call: each unusable version of the file keeps the users
// in force and is warned about on every check until a usable one replaces it.
TEST(WebConfigReloaderTest, NeverTurnsAuthOffAndWarnsUntilFixed) {
  TempDir dir;
  const fs::path file = dir.path() / "web.yml";
  const std::string alice =
      std::string("basic_auth_users:\n  alice: ") + testing::alice::kHash + "\n";
  testing::WriteFile(file, alice);
  CapturedLog log("reloader-closed");
  absl::StatusOr<WebConfig> initial = LoadWebConfig(file);
  ASSERT_TRUE(initial.ok()) << initial.status();
  WebConfigReloader r(file, *initial, log.logger, 0s);
  auto users = [&] {
    const auto auth = r.Current(Clock::now());
    return auth == nullptr ? 0 : static_cast<int>(auth->users());
  };
  ASSERT_EQ(users(), 1);

  struct Bad {
    std::string text;  // "" with `remove`: the file is gone
    bool remove;
    std::string why;
  };
  const std::vector<Bad> bad = {
      {"", false, "the file is empty"},
      {"basic_auth_users:\n", false, "it has no basic_auth_users"},
      {"basic_auth_users: {}\n", false, "it has no basic_auth_users"},
      {"basic_auth_users:\n  alice: $2y$04$0MZN", false, "is not a bcrypt hash"},
      {"basic_auth_users: [\n", false, "invalid YAML"},
      {alice + "tls_server_config:\n  cert_file: a\n  key_file: b\n", false, "takes a restart"},
      {"", true, "cannot open it"},
  };
  for (const Bad& b : bad) {
    if (b.remove) {
      fs::remove(file);
    } else {
      // In place, as a non-atomic writer leaves it at some moment.
      std::ofstream(file, std::ios::trunc) << b.text;
    }
    const int before = log.Count(b.why);
    EXPECT_EQ(users(), 1) << b.why;
    EXPECT_EQ(users(), 1) << b.why;
    EXPECT_EQ(log.Count(b.why), before + 2) << "not warned on every check: " << b.why;
    EXPECT_TRUE(log.Contains("not applied; still in force: 1 basic auth user(s)")) << b.why;
    std::this_thread::sleep_for(10ms);  // a new mtime for the next version
  }
  // Fixed: two users, applied, and the warnings stop.
  testing::WriteFile(file, alice + "  bob: " + testing::alice::kHash + "\n");
  EXPECT_EQ(users(), 2);
  const int warnings = log.Count("not applied");
  EXPECT_EQ(users(), 2);
  EXPECT_EQ(log.Count("not applied"), warnings);
  EXPECT_TRUE(log.Contains("reloaded: 2 basic auth user(s)"));
}

// docs/OPERATIONS.md#tls-rotation: basic auth over plain HTTP is one warning, in the same words
// whether the users were there at start or a reload added the first ones; with TLS there is none.
TEST(WebConfigReloaderTest, PlainHttpAuthIsWarnedOnceAtStartAndOnceWhenUsersAppear) {
  constexpr char kWarning[] =
      "basic auth over plain HTTP: passwords cross the network readable by anyone on the path; "
      "set tls_server_config in the web config (turning TLS on takes a restart)";
  {
    CapturedLog log("plain-start");
    HttpServer::Options o = WithUsers();
    o.logger_name = "plain-start";
    auto server = HttpServer::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_EQ(log.Count(kWarning), 1);
  }
  TempDir dir;
  const fs::path file = dir.path() / "web.yml";
  testing::WriteFile(file, "basic_auth_users: {}\n");
  CapturedLog log("plain-reload");
  absl::StatusOr<WebConfig> initial = LoadWebConfig(file);
  ASSERT_TRUE(initial.ok()) << initial.status();
  WebConfigReloader r(file, *initial, log.logger, 0s);
  EXPECT_EQ(r.Current(Clock::now()), nullptr);
  EXPECT_EQ(log.Count(kWarning), 0);
  std::this_thread::sleep_for(10ms);  // a new mtime
  testing::WriteFile(file,
                     std::string("basic_auth_users:\n  alice: ") + testing::alice::kHash + "\n");
  ASSERT_NE(r.Current(Clock::now()), nullptr);
  EXPECT_EQ(log.Count(kWarning), 1);
  EXPECT_NE(r.Current(Clock::now()), nullptr);
  EXPECT_EQ(log.Count(kWarning), 1) << "warned on every check";
}

// The first step of a non-atomic rewrite, end to end: the file truncated to 0 bytes must not open
// /metrics.
TEST(WebConfigReloaderTest, TruncatedFileKeepsMetricsClosedOnTheServer) {
  TempDir dir;
  const fs::path file = dir.path() / "web.yml";
  testing::WriteFile(file,
                     std::string("basic_auth_users:\n  alice: ") + testing::alice::kHash + "\n");
  CapturedLog log("reloader-server");
  HttpServer::Options o = WithUsers();
  o.logger_name = "reloader-server";
  o.web_config_file = file.string();
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::ofstream(file, std::ios::trunc).flush();
  // The server re-checks at most once a second, on requests that need credentials.
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics")), 401);
        return log.Contains("the file is empty");
      },
      20s));
  EXPECT_EQ(StatusFrom("127.0.0.1", port, Get("/metrics", testing::alice::kGoodAuth)), 200);
}

}  // namespace
}  // namespace neuron

// The shared HTTP server (http/http_server.h) and the exporter-toolkit web config: routing and
// error statuses a scraper sees, basic auth with bcrypt (and its cache), TLS with a real
// self-signed certificate made by `openssl req` and checked by `curl`, and config errors that name
// the field and line.
#include "http/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "http/web_config.h"
#include "tests/support/basic_auth_user.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;
using testing::HttpGet;
using testing::HttpRaw;
using testing::TempDir;

HttpServer::Options Basic() {
  HttpServer::Options o;
  o.handlers["/hello"] = [](const HttpRequest& r) {
    HttpResponse out;
    out.body = "hello " + r.query + " from " + r.remote_address;
    out.headers.emplace_back("X-Test", "1");
    return out;
  };
  return o;
}

TEST(HttpServerTest, RoutesAndErrorStatuses) {
  auto server = HttpServer::Start(Basic());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);

  testing::HttpResult ok = HttpGet(port, "/hello?a=1");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "hello a=1 from 127.0.0.1");
  EXPECT_NE(ok.headers.find("X-Test: 1"), std::string::npos);
  EXPECT_NE(ok.headers.find("Content-Length: 24"), std::string::npos);

  EXPECT_EQ(HttpGet(port, "/nope").status, 404);
  EXPECT_EQ(HttpGet(port, "/hello/").status, 404);  // exact paths only

  testing::HttpResult post = HttpRaw(port, "POST /hello HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.headers.find("Allow: GET, HEAD"), std::string::npos);

  testing::HttpResult head = HttpRaw(port, "HEAD /hello HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());

  // Headers beyond max_request_bytes (16 KiB by default) are refused with 431 (RFC 6585 5), which
  // reaches the client although it is still sending (the server drains before it closes), and the
  // server lives on. A body beyond the limit is content, 413.
  const std::string big(40000, 'x');
  const testing::HttpResult huge = HttpGet(port, "/hello", "X-Big: " + big + "\r\n");
  EXPECT_EQ(huge.status, 431);
  EXPECT_NE(huge.headers.find("431 Request Header Fields Too Large"), std::string::npos)
      << huge.headers;
  EXPECT_EQ(HttpRaw(port, "GET /hello HTTP/1.0\r\nContent-Length: 999999\r\n\r\n").status, 413);
  EXPECT_EQ(HttpGet(port, "/hello").status, 200);
}

TEST(HttpServerTest, HandlersRunConcurrently) {
  HttpServer::Options o;
  o.threads = 4;
  std::atomic<int> inside{0};
  std::atomic<int> peak{0};
  o.handlers["/slow"] = [&](const HttpRequest&) {
    const int now = ++inside;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(300ms);
    --inside;
    return HttpResponse{};
  };
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::thread> clients;
  clients.reserve(4);
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&] { ok += HttpGet((*server)->port(), "/slow").status == 200; });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_GE(peak.load(), 2);
}

TEST(HttpServerTest, BadListenAddressIsAnError) {
  HttpServer::Options o = Basic();
  o.listen_address = "127.0.0.1:notaport";
  EXPECT_EQ(HttpServer::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  auto first = HttpServer::Start(Basic());
  ASSERT_TRUE(first.ok());
  o.listen_address = "127.0.0.1:" + std::to_string((*first)->port());
  EXPECT_EQ(HttpServer::Start(o).status().code(), absl::StatusCode::kUnavailable);
}

TEST(HttpServerTest, BasicAuthRejectsWrongPasswordWith401) {
  HttpServer::Options o = Basic();
  WebConfig config;
  config.basic_auth_users["alice"] = testing::alice::kHash;
  o.web_config = config;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const testing::HttpResult none = HttpGet(port, "/hello");
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.headers.find("WWW-Authenticate: Basic"), std::string::npos);
  EXPECT_EQ(HttpGet(port, "/hello", testing::alice::kWrongAuth).status, 401);
  EXPECT_EQ(HttpGet(port, "/hello", "Authorization: Basic !!!\r\n").status, 401);
  EXPECT_EQ(HttpGet(port, "/hello", "Authorization: Basic Ym9iOnNlY3JldA==\r\n").status, 401);
  EXPECT_EQ(HttpGet(port, "/hello", testing::alice::kGoodAuth).status, 200);
  EXPECT_EQ(HttpGet(port, "/nope", testing::alice::kGoodAuth).status, 404);
}

TEST(BasicAuthenticatorTest, CachesSuccessOnlyForTheSamePasswordAndHash) {
  BasicAuthenticator auth(std::map<std::string, std::string>{{"alice", testing::alice::kHash}});
  EXPECT_TRUE(auth.Check("Basic YWxpY2U6c2VjcmV0"));
  EXPECT_EQ(auth.bcrypt_calls(), 1u);
  EXPECT_TRUE(auth.Check("basic YWxpY2U6c2VjcmV0"));  // cached
  EXPECT_EQ(auth.bcrypt_calls(), 1u);
  EXPECT_FALSE(auth.Check("Basic YWxpY2U6d3Jvbmc="));  // wrong password: never cached
  EXPECT_FALSE(auth.Check("Basic YWxpY2U6d3Jvbmc="));
  EXPECT_EQ(auth.bcrypt_calls(), 3u);
  EXPECT_FALSE(auth.Check("Basic Ym9iOnNlY3JldA=="));  // unknown user still pays one bcrypt
  EXPECT_EQ(auth.bcrypt_calls(), 4u);
  EXPECT_TRUE(VerifyBcrypt(testing::alice::kPassword, testing::alice::kHash));
  EXPECT_FALSE(VerifyBcrypt("secreT", testing::alice::kHash));
}

TEST(WebConfigTest, ErrorsNameFieldAndLine) {
  TempDir dir;
  auto parse = [&](const std::string& yaml) { return ParseWebConfig(yaml, dir.path(), "web.yml"); };
  absl::StatusOr<WebConfig> ok = parse(
      "tls_server_config:\n  cert_file: a.crt\n  key_file: /k/a.key\n  min_version: TLS13\n"
      "basic_auth_users:\n  alice: " +
      std::string(testing::alice::kHash) + "\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tls->cert_file, (dir.path() / "a.crt").string());
  EXPECT_EQ(ok->tls->key_file, "/k/a.key");
  EXPECT_EQ(ok->tls->min_version, TlsServerConfig::MinVersion::kTls13);
  EXPECT_EQ(ok->basic_auth_users.at("alice"), testing::alice::kHash);
  EXPECT_TRUE(parse("").ok());

  auto message = [&](const std::string& yaml) {
    absl::StatusOr<WebConfig> c = parse(yaml);
    EXPECT_FALSE(c.ok()) << yaml;
    return std::string{c.status().message()};
  };
  EXPECT_EQ(message("basic_auth_users:\n  alice: plaintext\n"),
            "web.yml:2: basic_auth_users.alice: is not a bcrypt hash ($2a$, $2b$ or $2y$, 60 "
            "characters)");
  EXPECT_EQ(message("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS11\n"),
            "web.yml:4: tls_server_config.min_version: TLS11 is refused: this server requires TLS "
            "1.2 or later");
  EXPECT_NE(message("tls_server_config:\n  cert_file: a\n").find("tls_server_config.key_file"),
            std::string::npos);
  EXPECT_EQ(message("tls_server_config:\n  cert_file: a\n  key_file: b\n  kee_file: c\n"),
            "web.yml:4: tls_server_config.kee_file: unknown field");
  EXPECT_NE(message("basic_auth_users: [\n").find("web.yml:"), std::string::npos);
  EXPECT_EQ(LoadWebConfig(dir.path() / "missing.yml").status().code(), absl::StatusCode::kNotFound);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const pid_t pid = testing::Spawn(
        {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout",
         (dir_.path() / "tls.key").string(), "-out", (dir_.path() / "tls.crt").string()},
        dir_.path() / "openssl.out", dir_.path() / "openssl.err");
    ASSERT_EQ(testing::WaitExit(pid, 60s), 0) << testing::ReadFile(dir_.path() / "openssl.err");
    testing::WriteFile(dir_.path() / "web.yml",
                       "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
                       "basic_auth_users:\n  alice: " +
                           std::string(testing::alice::kHash) + "\n");
  }

  // Runs curl and returns its stdout ("%{http_code}") or "exit N" when curl failed.
  std::string Curl(std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-sS",          "-o",         "/dev/null",
                                     "-w",   "%{http_code}", "--max-time", "20"};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = testing::Spawn(argv, dir_.path() / "curl.out", dir_.path() / "curl.err");
    const std::optional<int> rc = testing::WaitExit(pid, 60s);
    if (rc != 0) return "exit " + std::to_string(rc.value_or(-1));
    return testing::ReadFile(dir_.path() / "curl.out");
  }

  TempDir dir_;
};

TEST_F(TlsTest, ServesHttpsAndRefusesPlainHttpAndOldTls) {
  absl::StatusOr<WebConfig> config = LoadWebConfig(dir_.path() / "web.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  HttpServer::Options o = Basic();
  o.web_config = *config;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE((*server)->tls());
  const std::string url = "https://localhost:" + std::to_string((*server)->port()) + "/hello";
  const std::string ca = (dir_.path() / "tls.crt").string();

  EXPECT_EQ(Curl({"--cacert", ca, "-u", "alice:secret", url}), "200");
  EXPECT_EQ(Curl({"--cacert", ca, "-u", "alice:wrong", url}), "401");
  EXPECT_EQ(Curl({"--cacert", ca, url}), "401");
  // Plain HTTP to the TLS listener gets no HTTP answer.
  const testing::HttpResult plain = HttpGet((*server)->port(), "/hello", testing::alice::kGoodAuth);
  EXPECT_EQ(plain.status, -1);
  // TLS 1.1 is refused by the server (min_version defaults to TLS12): curl is let to speak it
  // (OpenSSL's client refuses it by default), so the failure is the server's alert.
  EXPECT_EQ(Curl({"--cacert", ca, "--tlsv1.1", "--tls-max", "1.1", "--ciphers",
                  "DEFAULT:@SECLEVEL=0", "-u", "alice:secret", url}),
            "exit 35");
  EXPECT_NE(testing::ReadFile(dir_.path() / "curl.err").find("alert protocol version"),
            std::string::npos)
      << testing::ReadFile(dir_.path() / "curl.err");
  // The certificate really is the one configured: curl without it refuses to trust it (exit 60,
  // CURLE_PEER_FAILED_VERIFICATION), not any other failure.
  EXPECT_EQ(Curl({"-u", "alice:secret", url}), "exit 60");
  EXPECT_NE(testing::ReadFile(dir_.path() / "curl.err").find("certificate"), std::string::npos)
      << testing::ReadFile(dir_.path() / "curl.err");
}

TEST_F(TlsTest, MissingKeyFileIsNamed) {
  HttpServer::Options o = Basic();
  WebConfig config;
  config.tls = TlsServerConfig{};
  config.tls->cert_file = (dir_.path() / "tls.crt").string();
  config.tls->key_file = (dir_.path() / "nope.key").string();
  o.web_config = config;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("tls_server_config.key_file"), std::string::npos)
      << server.status();
  EXPECT_NE(server.status().message().find("nope.key"), std::string::npos);
}

}  // namespace
}  // namespace neuron

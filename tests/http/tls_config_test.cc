// TLS like exporter-toolkit (http/web_config.h, http/tls_context.h): sessions resume with client
// certificates on TLS 1.2 and 1.3 (a session-id context), only forward-secret suites by default,
// and cipher_suites, curve_preferences, min_version and max_version with exporter-toolkit's names
// and meanings; a handshake trickled a byte at a time is closed at its deadline without holding a
// worker. The client is `openssl s_client`, so each case shows what the server answered (its
// alert, the suite, "Reused").
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

#include "http/http_server.h"
#include "http/web_config.h"
#include "tests/support/http_test_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class TlsConfigTest : public ::testing::Test {
 protected:
  // One set of certificates for every test: a CA and a client certificate it signed (P-256), and
  // a self-signed RSA server certificate, so that suites with RSA key exchange could be chosen
  // if the server offered them.
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir("tls_config_test");
    const std::string d = dir_->str();
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2";
    Run("openssl req -x509 " + ec + " -subj /CN=test-ca -keyout ca.key -out ca.crt");
    Run("openssl req " + ec + " -subj /CN=client -keyout client.key -out client.csr");
    Run("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
        "-out client.crt");
    Run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost "
        "-keyout server.key -out server.crt");
  }
  static void TearDownTestSuite() { delete dir_; }

  // `command` by the shell, in the certificates' directory.
  static void Run(const std::string& command) {
    const testing::RunResult r =
        testing::RunCommand(dir_->path(), {"sh", "-c", "cd '" + dir_->str() + "' && " + command});
    ASSERT_EQ(r.code, 0) << command << "\n" << r.err;
  }

  // A server with the web config's tls_server_config `tls_yaml` (cert and key added).
  void Serve(const std::string& tls_yaml, HttpServer::Options o = {}) {
    absl::StatusOr<WebConfig> config = ParseWebConfig(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n" + tls_yaml,
        dir_->path(), "web.yml");
    ASSERT_TRUE(config.ok()) << config.status();
    o.web_config = *config;
    o.handlers["/hello"] = [](const HttpRequest&) { return HttpResponse(); };
    auto server = HttpServer::Start(std::move(o));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // `openssl s_client` with `args`, sending one HTTP/1.0 request; its stdout and stderr.
  std::string SClient(const std::string& args) {
    const std::string command =
        "cd '" + dir_->str() + "' && printf 'GET /hello HTTP/1.0\\r\\n\\r\\n' | " +
        "openssl s_client -connect 127.0.0.1:" + std::to_string(server_->port()) + " -ign_eof " +
        args + " 2>&1";
    return testing::RunCommand(dir_->path(), {"sh", "-c", command}).out;
  }
  static bool Served(const std::string& out) {
    return out.find("HTTP/1.1 200 OK") != std::string::npos;
  }

  static testing::TempDir* dir_;
  std::unique_ptr<HttpServer> server_;
};

testing::TempDir* TlsConfigTest::dir_ = nullptr;

TEST_F(TlsConfigTest, SessionsResumeWithClientCertificatesOnTls12And13) {
  ASSERT_NO_FATAL_FAILURE(
      Serve("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"));
  const std::string cert = "-cert client.crt -key client.key ";
  for (const std::string version : {"-tls1_2", "-tls1_3"}) {
    std::string args = cert;
    args.append(version).append(" -sess_out sess").append(version);
    const std::string first = SClient(args);
    ASSERT_TRUE(Served(first)) << first;
    EXPECT_NE(first.find("New, TLSv1."), std::string::npos) << first;
    args = cert;
    args.append(version).append(" -sess_in sess").append(version);
    const std::string again = SClient(args);
    EXPECT_TRUE(Served(again)) << again;
    EXPECT_NE(again.find("Reused, TLSv1." + version.substr(6)), std::string::npos) << again;
  }
  // The certificate really is required.
  EXPECT_FALSE(Served(SClient("-tls1_3")));
  EXPECT_FALSE(Served(SClient("-tls1_2")));
}

TEST_F(TlsConfigTest, DefaultSuitesAreForwardSecretOnly) {
  ASSERT_NO_FATAL_FAILURE(Serve(""));
  // The suites the issue found accepted: RSA key exchange, no forward secrecy. The server's
  // alert shows it refused them (the client offered nothing else).
  for (const std::string suite : {"AES128-SHA", "AES256-SHA256", "AES128-GCM-SHA256"}) {
    const std::string out = SClient("-tls1_2 -cipher " + suite);
    EXPECT_FALSE(Served(out)) << suite;
    EXPECT_NE(out.find("alert handshake failure"), std::string::npos) << suite << "\n" << out;
  }
  const std::string fs = SClient("-tls1_2");
  EXPECT_TRUE(Served(fs)) << fs;
  EXPECT_NE(fs.find("Cipher is ECDHE-RSA-AES128-GCM-SHA256"), std::string::npos) << fs;
  EXPECT_TRUE(Served(SClient("-tls1_3")));
}

TEST_F(TlsConfigTest, CipherSuitesTakeExporterToolkitNamesInTheServersOrder) {
  ASSERT_NO_FATAL_FAILURE(
      Serve("  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256]\n"));
  // The client prefers CHACHA20; the server's order (prefer_server_cipher_suites: true) wins.
  std::string out = SClient(
      "-tls1_2 -cipher ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384:"
      "ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_NE(out.find("Cipher is ECDHE-RSA-AES256-GCM-SHA384"), std::string::npos) << out;
  EXPECT_FALSE(Served(SClient("-tls1_2 -cipher ECDHE-RSA-AES128-GCM-SHA256")));
  server_.reset();
  ASSERT_NO_FATAL_FAILURE(Serve(
      "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "
      "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256]\n  prefer_server_cipher_suites: false\n"));
  out = SClient("-tls1_2 -cipher ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384");
  EXPECT_NE(out.find("Cipher is ECDHE-RSA-CHACHA20-POLY1305"), std::string::npos) << out;
  // An explicit suite without forward secrecy is the operator's to choose.
  server_.reset();
  ASSERT_NO_FATAL_FAILURE(Serve("  cipher_suites: [TLS_RSA_WITH_AES_128_GCM_SHA256]\n"));
  EXPECT_TRUE(Served(SClient("-tls1_2 -cipher AES128-GCM-SHA256")));
}

TEST_F(TlsConfigTest, VersionsAndCurvesAreHonoured) {
  ASSERT_NO_FATAL_FAILURE(Serve("  max_version: TLS12\n  curve_preferences: [CurveP384]\n"));
  EXPECT_FALSE(Served(SClient("-tls1_3")));
  EXPECT_TRUE(Served(SClient("-tls1_2 -groups P-384")));
  const std::string p256 = SClient("-tls1_2 -groups P-256");
  EXPECT_FALSE(Served(p256));
  server_.reset();
  ASSERT_NO_FATAL_FAILURE(Serve("  min_version: TLS13\n"));
  EXPECT_TRUE(Served(SClient("-tls1_3")));
  EXPECT_NE(SClient("-tls1_2").find("alert protocol version"), std::string::npos);
  // TLS 1.1 is refused by the server itself: its alert, to a client willing to speak 1.1.
  server_.reset();
  ASSERT_NO_FATAL_FAILURE(Serve(""));
  const std::string old = SClient("-tls1_1 -cipher DEFAULT:@SECLEVEL=0");
  EXPECT_FALSE(Served(old));
  EXPECT_NE(old.find("alert protocol version"), std::string::npos) << old;
}

TEST(TlsConfigParseTest, NamesAreExporterToolkitsAndErrorsNameTheLine) {
  auto parse = [](const std::string& tls) {
    return ParseWebConfig("tls_server_config:\n  cert_file: a\n  key_file: b\n" + tls, "/etc",
                          "web.yml");
  };
  absl::StatusOr<WebConfig> ok = parse(
      "  min_version: TLS12\n  max_version: TLS13\n  prefer_server_cipher_suites: false\n"
      "  cipher_suites:\n    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n"
      "    - TLS_AES_128_GCM_SHA256\n  curve_preferences: [X25519, CurveP256, CurveP521]\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tls->cipher_suites.size(), 2u);
  EXPECT_EQ(ok->tls->curve_preferences,
            (std::vector<std::string>{"X25519", "CurveP256", "CurveP521"}));
  EXPECT_FALSE(ok->tls->prefer_server_cipher_suites);
  auto message = [&](const std::string& tls) {
    absl::StatusOr<WebConfig> c = parse(tls);
    EXPECT_FALSE(c.ok()) << tls;
    return std::string{c.status().message()};
  };
  EXPECT_EQ(message("  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n"),
            "web.yml:4: tls_server_config.cipher_suites: TLS_RSA_WITH_RC4_128_SHA is insecure "
            "and refused (as exporter-toolkit refuses it)");
  EXPECT_NE(message("  cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256]\n").find("unknown cipher"),
            std::string::npos);
  EXPECT_EQ(message("  curve_preferences: [P-256]\n"),
            "web.yml:4: tls_server_config.curve_preferences: unknown curve \"P-256\" (CurveP256, "
            "CurveP384, CurveP521, X25519)");
  EXPECT_EQ(message("  min_version: TLS13\n  max_version: TLS12\n"),
            "web.yml:4: tls_server_config.min_version: is above max_version");
  EXPECT_NE(message("  cipher_suites: [TLS_AES_128_GCM_SHA256]\n").find("no TLS 1.2 suite"),
            std::string::npos);
  EXPECT_TRUE(parse("  min_version: TLS13\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n").ok());
  EXPECT_NE(message("  prefer_server_cipher_suites: yes please\n").find("true or false"),
            std::string::npos);
  EXPECT_NE(message("  cipher_suites: TLS_AES_128_GCM_SHA256\n").find("must be a list"),
            std::string::npos);
}

// The bytes of a ClientHello, from OpenSSL's client over memory BIOs.
std::string ClientHello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, BIO_new(BIO_s_mem()), out);
  SSL_connect(ssl);
  char* data = nullptr;
  const int64_t n = BIO_get_mem_data(out, &data);
  std::string hello(data, static_cast<size_t>(std::max<int64_t>(0, n)));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

TEST_F(TlsConfigTest, TrickledHandshakeIsClosedAtItsDeadlineWithoutHoldingAWorker) {
  HttpServer::Options o;
  o.threads = 1;
  o.handshake_timeout_ms = 1000;
  ASSERT_NO_FATAL_FAILURE(Serve("", std::move(o)));
  const std::string hello = ClientHello();
  ASSERT_GT(hello.size(), 100u);
  const auto opened = Clock::now();
  UniqueFd slow = testing::ConnectFrom("127.0.0.1", server_->port());
  std::thread trickle([&] {
    for (size_t i = 0; i < 20; ++i) {
      if (!testing::SendAll(slow.get(), hello.substr(i, 1))) return;
      std::this_thread::sleep_for(100ms);
    }
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_TRUE(Served(SClient("-tls1_3")));  // while the handshake above is under way
  const testing::ReadResult r = testing::ReadUntilClosed(slow.get(), 10s);
  trickle.join();
  ASSERT_TRUE(r.closed);
  const double life = std::chrono::duration<double>(r.when - opened).count();
  EXPECT_GE(life, 0.9);
  EXPECT_LT(life, 2.5);
}

}  // namespace
}  // namespace neuron

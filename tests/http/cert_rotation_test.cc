// Certificates rotate without a restart (http/tls_context.h): a certificate swapped on disk the way
// kubelet swaps a secret volume (a new directory, then an atomic rename of the symlink to it) is
// served on new handshakes while a connection opened before keeps working; a truncated certificate
// or a key that does not match is logged, naming the file, and never replaces the working pair.
// Certificates are made at test time by `openssl req`; the client is OpenSSL's, so the test reads
// the certificate each handshake really presented.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "core/base/unique_fd.h"
#include "fmt/format.h"
#include "http/http_server.h"
#include "http/tls_context.h"
#include "http/web_config.h"
#include "tests/http/captured_log.h"
#include "tests/support/basic_auth_user.h"
#include "tests/support/http_client.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::CapturedLog;
using testing::TempDir;

// Generous: handshakes on a loaded 2-core machine (docs/architecture.md#timing-in-tests); the
// server itself re-checks the files once a second.
constexpr std::chrono::milliseconds kCeiling = 20s;

// A self-signed certificate and its key, tls.crt and tls.key in `dir`. P-256 keys: generating an
// RSA key for every version would cost seconds.
void MakeCertificate(const fs::path& dir, const std::string& cn) {
  fs::create_directories(dir);
  const testing::RunResult r = testing::RunCommand(
      dir, {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "2", "-subj", "/CN=" + cn, "-keyout", (dir / "tls.key").string(),
            "-out", (dir / "tls.crt").string()});
  ASSERT_EQ(r.code, 0) << r.err;
}

std::string Fingerprint(const X509* cert) {
  if (cert == nullptr) return "(no certificate)";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert, EVP_sha256(), md, &n) != 1) return "(digest failed)";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

// The SHA-256 fingerprint of the PEM certificate in `file`.
std::string FileFingerprint(const fs::path& file) {
  FILE* f = std::fopen(file.c_str(), "r");
  if (f == nullptr) return "(cannot open " + file.string() + ")";
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  std::string out = Fingerprint(cert);
  X509_free(cert);
  return out;
}

// Replaces `to` with `from`'s bytes through a rename, as an atomic writer does.
void RenameCopy(const fs::path& from, const fs::path& to) {
  const fs::path tmp = to.string() + ".tmp";
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, to);
}

// One TLS connection to 127.0.0.1:port. It trusts any certificate: the test compares fingerprints.
class TlsClient {
 public:
  TlsClient() : ctx_(SSL_CTX_new(TLS_client_method())) {}
  ~TlsClient() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // Connects and completes the handshake; "" on success, else what failed.
  std::string Connect(int port) {
    fd_.Reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const timeval tv{10, 0};  // a wedged server fails the test instead of hanging it
    setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return "connect failed";
    }
    ssl_ = SSL_new(ctx_.get());
    SSL_set_fd(ssl_, fd_.get());
    if (SSL_connect(ssl_) != 1) return "handshake failed: " + OpenSslError();
    return "";
  }

  std::string PeerFingerprint() const {
    X509* cert = SSL_get1_peer_certificate(ssl_);
    std::string out = Fingerprint(cert);
    X509_free(cert);
    return out;
  }

  // One keep-alive GET; the status, or -1 when the connection failed.
  int Get(const std::string& path) {
    const std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    if (SSL_write(ssl_, request.data(), static_cast<int>(request.size())) <= 0) return -1;
    std::string in;
    char buf[4096];
    size_t head_end = std::string::npos;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n <= 0) return -1;
      in.append(buf, static_cast<size_t>(n));
    }
    const size_t cl = in.find("Content-Length: ");
    if (cl == std::string::npos || cl > head_end) return -1;
    const size_t body = std::stoul(in.substr(cl + 16));
    while (in.size() < head_end + 4 + body) {
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n <= 0) return -1;
      in.append(buf, static_cast<size_t>(n));
    }
    if (in.size() < 12 || !in.starts_with("HTTP/1.1 ")) return -1;
    return std::stoi(in.substr(9, 3));
  }

 private:
  SslCtxPtr ctx_;
  UniqueFd fd_;
  SSL* ssl_ = nullptr;
};

TEST(CertRotationTest, NewHandshakesGetTheNewCertificateWhileOpenConnectionsKeepWorking) {
  TempDir dir;
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_NO_FATAL_FAILURE(MakeCertificate(dir.path() / name, std::string("cert-") + name));
  }
  // Half a certificate, as a reader could catch a writer that rewrites in place.
  const std::string b_pem = testing::ReadFile(dir.path() / "b" / "tls.crt");
  fs::create_directories(dir.path() / "broken");
  testing::WriteFile(dir.path() / "broken" / "tls.crt", b_pem.substr(0, b_pem.size() / 2));
  fs::copy_file(dir.path() / "b" / "tls.key", dir.path() / "broken" / "tls.key");
  // kubelet's secret volume: `live` is a symlink to the current version, replaced by a rename.
  auto swap_to = [&](const std::string& version) {
    fs::create_symlink(version, dir.path() / "live.tmp");
    fs::rename(dir.path() / "live.tmp", dir.path() / "live");
  };
  swap_to("a");

  CapturedLog log("cert-rotation-server");
  HttpServer::Options o;
  o.logger_name = "cert-rotation-server";
  o.handlers["/hello"] = [](const HttpRequest&) {
    HttpResponse r;
    r.body = "hello\n";
    return r;
  };
  WebConfig config;
  config.tls = TlsServerConfig{};
  config.tls->cert_file = (dir.path() / "live" / "tls.crt").string();
  config.tls->key_file = (dir.path() / "live" / "tls.key").string();
  o.web_config = config;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  const std::string fp_a = FileFingerprint(dir.path() / "a" / "tls.crt");
  const std::string fp_b = FileFingerprint(dir.path() / "b" / "tls.crt");
  const std::string fp_c = FileFingerprint(dir.path() / "c" / "tls.crt");
  ASSERT_NE(fp_a, fp_b);
  ASSERT_NE(fp_b, fp_c);

  TlsClient old;
  ASSERT_EQ(old.Connect(port), "");
  EXPECT_EQ(old.PeerFingerprint(), fp_a);
  EXPECT_EQ(old.Get("/hello"), 200);

  // A fresh connection each time: a handshake presents the certificate and completes a request.
  std::string last_seen;
  auto new_handshake_gets = [&](const std::string& fingerprint) {
    TlsClient c;
    if (!c.Connect(port).empty()) return false;
    last_seen = c.PeerFingerprint();
    return last_seen == fingerprint && c.Get("/hello") == 200;
  };

  swap_to("b");
  EXPECT_TRUE(testing::WaitUntil([&] { return new_handshake_gets(fp_b); }, kCeiling))
      << "still served " << last_seen;
  EXPECT_EQ(old.Get("/hello"), 200);  // the connection made with A lives on
  EXPECT_EQ(old.PeerFingerprint(), fp_a);

  swap_to("broken");
  const std::string cert_error = "tls_server_config.cert_file " + config.tls->cert_file;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        TlsClient c;  // the server re-checks on accept
        c.Connect(port);
        return log.Contains(cert_error);
      },
      kCeiling))
      << "no error naming " << config.tls->cert_file;
  EXPECT_TRUE(new_handshake_gets(fp_b)) << "served " << last_seen << " after a broken cert";
  EXPECT_EQ(old.Get("/hello"), 200);

  swap_to("c");
  EXPECT_TRUE(testing::WaitUntil([&] { return new_handshake_gets(fp_c); }, kCeiling))
      << "still served " << last_seen;
  EXPECT_TRUE(log.Contains("TLS certificate reloaded from " + config.tls->cert_file));
  EXPECT_EQ(old.Get("/hello"), 200);
}

// The reloader alone, with the time of each check given: which version wins, how often a failure
// is logged, and that the interval bounds how often the files are looked at.
class TlsContextReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"a", "b", "c"}) {
      ASSERT_NO_FATAL_FAILURE(MakeCertificate(dir_.path() / name, std::string("cert-") + name));
    }
    fs::create_directories(dir_.path() / "live");
    fs::copy_file(Path("a", "tls.crt"), Path("live", "tls.crt"));
    fs::copy_file(Path("a", "tls.key"), Path("live", "tls.key"));
    tls_.cert_file = Path("live", "tls.crt").string();
    tls_.key_file = Path("live", "tls.key").string();
  }

  fs::path Path(const std::string& version, const std::string& file) const {
    return dir_.path() / version / file;
  }
  std::string Served(TlsContextReloader& r, TlsContextReloader::Clock::time_point now) {
    return Fingerprint(SSL_CTX_get0_certificate(r.ForNewConnection(now)));
  }

  TempDir dir_;
  TlsServerConfig tls_;
  CapturedLog log_{"cert-rotation-reloader"};
};

TEST_F(TlsContextReloaderTest, AMismatchedOrTruncatedPairNeverReplacesTheWorkingOne) {
  auto r = TlsContextReloader::Create(tls_, log_.logger, 0s);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto now = TlsContextReloader::Clock::now();
  const std::string fp_a = FileFingerprint(Path("a", "tls.crt"));
  const std::string fp_b = FileFingerprint(Path("b", "tls.crt"));
  EXPECT_EQ(Served(**r, now), fp_a);
  EXPECT_EQ((*r)->reloads(), 0u);

  // Certificate B lands before its key: the pair does not match, A stays.
  RenameCopy(Path("b", "tls.crt"), Path("live", "tls.crt"));
  EXPECT_EQ(Served(**r, now), fp_a);
  EXPECT_EQ((*r)->failures(), 1u);
  EXPECT_TRUE(log_.Contains("does not match cert_file " + tls_.cert_file));
  // Unchanged files are not tried (nor logged) again.
  EXPECT_EQ(Served(**r, now), fp_a);
  EXPECT_EQ((*r)->failures(), 1u);
  // The key lands: B.
  RenameCopy(Path("b", "tls.key"), Path("live", "tls.key"));
  EXPECT_EQ(Served(**r, now), fp_b);
  EXPECT_EQ((*r)->reloads(), 1u);

  // Rewritten in place (same inode), stopped half way: B stays, the error names the file.
  const std::string c_pem = testing::ReadFile(Path("c", "tls.crt"));
  std::ofstream(Path("live", "tls.crt"), std::ios::trunc) << c_pem.substr(0, c_pem.size() / 2);
  EXPECT_EQ(Served(**r, now), fp_b);
  EXPECT_EQ((*r)->failures(), 2u);
  EXPECT_TRUE(log_.Contains("tls_server_config.cert_file " + tls_.cert_file));
  // The key goes missing: still B.
  fs::remove(Path("live", "tls.key"));
  EXPECT_EQ(Served(**r, now), fp_b);
  EXPECT_EQ((*r)->failures(), 3u);
  // A good pair C: it is served.
  std::ofstream(Path("live", "tls.crt"), std::ios::trunc) << c_pem;
  RenameCopy(Path("c", "tls.key"), Path("live", "tls.key"));
  EXPECT_EQ(Served(**r, now), FileFingerprint(Path("c", "tls.crt")));
  EXPECT_EQ((*r)->reloads(), 2u);
}

TEST_F(TlsContextReloaderTest, FilesAreCheckedAtMostOncePerInterval) {
  const auto start = TlsContextReloader::Clock::now();
  auto r = TlsContextReloader::Create(tls_, log_.logger, 1h);
  ASSERT_TRUE(r.ok()) << r.status();
  RenameCopy(Path("b", "tls.key"), Path("live", "tls.key"));
  RenameCopy(Path("b", "tls.crt"), Path("live", "tls.crt"));
  EXPECT_EQ(Served(**r, start + 30min), FileFingerprint(Path("a", "tls.crt")));
  EXPECT_EQ((*r)->reloads(), 0u);
  EXPECT_EQ(Served(**r, start + 2h), FileFingerprint(Path("b", "tls.crt")));
  EXPECT_EQ((*r)->reloads(), 1u);
}

TEST_F(TlsContextReloaderTest, StartsOnlyWithAWorkingPair) {
  fs::remove(Path("live", "tls.key"));
  auto r = TlsContextReloader::Create(tls_, log_.logger);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("tls_server_config.key_file " + tls_.key_file),
            std::string::npos)
      << r.status();
}

// "bob:secret" in base64: bob is given alice's hash below, the same password.
constexpr char kBob[] = "Authorization: Basic Ym9iOnNlY3JldA==\r\n";

TEST(WebConfigReloadTest, UsersChangeWithoutARestartAndABadFileChangesNothing) {
  TempDir dir;
  const fs::path file = dir.path() / "web.yml";
  testing::WriteFile(file,
                     std::string("basic_auth_users:\n  alice: ") + testing::alice::kHash + "\n");
  CapturedLog log("web-config-reload-server");
  HttpServer::Options o;
  o.logger_name = "web-config-reload-server";
  o.handlers["/hello"] = [](const HttpRequest&) { return HttpResponse(); };
  absl::StatusOr<WebConfig> config = LoadWebConfig(file);
  ASSERT_TRUE(config.ok()) << config.status();
  o.web_config = *config;
  o.web_config_file = file.string();
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto status_for = [&](const char* auth) { return testing::HttpGet(port, "/hello", auth).status; };
  EXPECT_EQ(status_for(testing::alice::kGoodAuth), 200);
  EXPECT_EQ(status_for(kBob), 401);

  // Bob replaces Alice (written whole and renamed into place).
  testing::WriteFile(file,
                     std::string("basic_auth_users:\n  bob: ") + testing::alice::kHash + "\n");
  EXPECT_TRUE(testing::WaitUntil([&] { return status_for(kBob) == 200; }, kCeiling));
  EXPECT_EQ(status_for(testing::alice::kGoodAuth), 401);

  // A file cut short: logged with file and line, Bob keeps his access and Alice stays out.
  testing::WriteFile(file, "basic_auth_users:\n  alice: $2y$04$0MZNcw7r\n");
  const std::string error = file.string() + ":2: basic_auth_users.alice: is not a bcrypt hash";
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        status_for(kBob);  // requests trigger the check
        return log.Contains(error);
      },
      kCeiling))
      << "no error naming " << file;
  EXPECT_EQ(status_for(kBob), 200);
  EXPECT_EQ(status_for(testing::alice::kGoodAuth), 401);

  // Fixed: Alice is back, Bob is gone.
  testing::WriteFile(file,
                     std::string("basic_auth_users:\n  alice: ") + testing::alice::kHash + "\n");
  EXPECT_TRUE(
      testing::WaitUntil([&] { return status_for(testing::alice::kGoodAuth) == 200; }, kCeiling));
  EXPECT_EQ(status_for(kBob), 401);
}

}  // namespace
}  // namespace neuron

#pragma once
// The Prometheus exporter-toolkit web configuration file (`--web.config.file`): TLS and HTTP basic
// auth for the agent's HTTP endpoints (docs/metrics.md#dcgm-exporter; the format is
// prometheus/exporter-toolkit's web configuration page, the names its web/tls_config.go reads).
//
//   tls_server_config:
//     cert_file: server.crt          # relative paths are relative to the config file
//     key_file: server.key
//     min_version: TLS12             # TLS12 (default) or TLS13; older versions are refused
//     max_version: TLS13             # TLS12 or TLS13 (default)
//     cipher_suites:                 # TLS 1.2 suites, Go's names (http/tls_names.h); default:
//       - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256   # the forward-secret AEAD ones only
//     prefer_server_cipher_suites: true  # the server's order of cipher_suites wins (default)
//     curve_preferences: [X25519, CurveP256]  # key-exchange groups in order; default OpenSSL's
//     client_auth_type: NoClientCert # or RequireAndVerifyClientCert / VerifyClientCertIfGiven
//     client_ca_file: ca.crt         # required when client certificates are verified
//   basic_auth_users:
//     alice: $2y$10$...              # bcrypt hashes ($2a$, $2b$, $2y$)
//
// As in exporter-toolkit, cipher_suites takes the names of Go's tls.CipherSuites() (its
// InsecureCipherSuites(), RC4 and CBC-SHA256, are refused); TLS 1.3 suites may be listed but, as
// in Go, TLS 1.3 always offers its three. Unknown keys are errors (a typo must not silently
// disable TLS or auth); every error names the field and its line.

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace neuron {

struct TlsServerConfig {
  std::string cert_file;  // absolute after loading
  std::string key_file;
  enum class Version { kTls12, kTls13 };
  using MinVersion = Version;  // the name this field had first
  Version min_version = Version::kTls12;
  Version max_version = Version::kTls13;
  std::vector<std::string> cipher_suites;      // Go's names, in preference order; empty: defaults
  bool prefer_server_cipher_suites = true;     // the server's order wins over the client's
  std::vector<std::string> curve_preferences;  // Go's names, in preference order; empty: defaults
  enum class ClientAuth { kNone, kVerifyIfGiven, kRequireAndVerify };
  ClientAuth client_auth = ClientAuth::kNone;
  std::string client_ca_file;
  bool operator==(const TlsServerConfig&) const = default;
};

struct WebConfig {
  std::optional<TlsServerConfig> tls;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash
};

// Parses the YAML text; `base_dir` resolves relative file names, `source` names the file in
// errors. Does not open the certificate files (the TLS set-up does, and reports them).
absl::StatusOr<WebConfig> ParseWebConfig(std::string_view yaml,
                                         const std::filesystem::path& base_dir,
                                         std::string_view source);
absl::StatusOr<WebConfig> LoadWebConfig(const std::filesystem::path& file);

struct BasicCredentials;

// Checks `Authorization: Basic ...` headers against bcrypt hashes. bcrypt costs tens of
// milliseconds by design, so successful verifications are cached, keyed by a SHA-256 digest of
// (user, stored hash, password): a cached entry never outlives a change of the stored hash and the
// cache holds no password. Unknown users still pay one bcrypt so timing does not reveal them.
// How many bcrypt checks run at once, and how often an address may fail, is the server's to
// bound (http/login_limiter.h): CheckCached never runs one, Check may. Thread-safe.
class BasicAuthenticator {
 public:
  explicit BasicAuthenticator(std::map<std::string, std::string> users,
                              size_t max_cache_entries = 1024);
  ~BasicAuthenticator();
  BasicAuthenticator(const BasicAuthenticator&) = delete;
  BasicAuthenticator& operator=(const BasicAuthenticator&) = delete;

  // True when the header value ("Basic base64(user:password)") names a user whose password
  // matches. Empty or malformed headers are false, without a bcrypt.
  bool Check(std::string_view authorization_header) const;
  // The same for credentials already parsed (http/request_parser.h).
  bool Check(const BasicCredentials& credentials) const;
  // True when these credentials succeeded before and are still cached: no bcrypt. False says
  // nothing about them.
  bool CheckCached(const BasicCredentials& credentials) const;
  size_t users() const;
  // For tests and self-metrics: bcrypt computations performed so far.
  uint64_t bcrypt_calls() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// bcrypt verification through libxcrypt, constant-time comparison of the result.
bool VerifyBcrypt(std::string_view password, const std::string& hash);

}  // namespace neuron

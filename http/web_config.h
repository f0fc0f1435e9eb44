#pragma once
// The Prometheus exporter-toolkit web configuration file (`--web.config.file`): TLS and HTTP basic
// auth for the agent's HTTP endpoints (docs/metrics.md#dcgm-exporter; the format is
// exporter-toolkit's web-configuration.md).
//
//   tls_server_config:
//     cert_file: server.crt          # relative paths are relative to the config file
//     key_file: server.key
//     min_version: TLS12             # TLS12 (default) or TLS13; older versions are refused
//     client_auth_type: NoClientCert # or RequireAndVerifyClientCert / VerifyClientCertIfGiven
//     client_ca_file: ca.crt         # required when client certificates are verified
//   basic_auth_users:
//     alice: $2y$10$...              # bcrypt hashes ($2a$, $2b$, $2y$)
//
// Unknown keys are errors (a typo must not silently disable TLS or auth); every error names the
// field and its line.

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace neuron {

struct TlsServerConfig {
  std::string cert_file;  // absolute after loading
  std::string key_file;
  enum class MinVersion { kTls12, kTls13 };
  MinVersion min_version = MinVersion::kTls12;
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

// Checks `Authorization: Basic ...` headers against bcrypt hashes. bcrypt costs tens of
// milliseconds by design, so successful verifications are cached, keyed by a SHA-256 digest of
// (user, stored hash, password): a cached entry never outlives a change of the stored hash and the
// cache holds no password. Unknown users still pay one bcrypt so timing does not reveal them.
// Thread-safe.
class BasicAuthenticator {
 public:
  explicit BasicAuthenticator(std::map<std::string, std::string> users,
                              size_t max_cache_entries = 1024);
  ~BasicAuthenticator();
  BasicAuthenticator(const BasicAuthenticator&) = delete;
  BasicAuthenticator& operator=(const BasicAuthenticator&) = delete;

  // True when the header value ("Basic base64(user:password)") names a user whose password
  // matches. Empty or malformed headers are false.
  bool Check(std::string_view authorization_header) const;
  // For tests and self-metrics: bcrypt computations performed so far.
  uint64_t bcrypt_calls() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// bcrypt verification through libxcrypt, constant-time comparison of the result.
bool VerifyBcrypt(std::string_view password, const std::string& hash);

}  // namespace neuron

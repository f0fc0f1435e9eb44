#include "http/web_config.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "http/request_parser.h"

namespace neuron {
namespace {

absl::Status FieldError(std::string_view source, const YAML::Node& node, std::string_view field,
                        std::string_view what) {
  const YAML::Mark mark = node.Mark();
  if (mark.line >= 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: {}: {}", source, mark.line + 1, field, what));
  }
  return absl::InvalidArgumentError(fmt::format("{}: {}: {}", source, field, what));
}

absl::StatusOr<std::string> ScalarField(std::string_view source, const YAML::Node& node,
                                        std::string_view field) {
  if (!node.IsScalar()) return FieldError(source, node, field, "must be a string");
  return node.as<std::string>();
}

std::string Resolve(const std::filesystem::path& base_dir, const std::string& file) {
  if (file.empty()) return file;
  const std::filesystem::path p(file);
  return p.is_absolute() ? file : (base_dir / p).lexically_normal().string();
}

absl::StatusOr<TlsServerConfig> ParseTls(std::string_view source, const YAML::Node& node,
                                         const std::filesystem::path& base_dir) {
  if (!node.IsMap()) return FieldError(source, node, "tls_server_config", "must be a mapping");
  TlsServerConfig tls;
  std::string client_auth = "NoClientCert";
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string field = "tls_server_config." + key;
    absl::StatusOr<std::string> value = ScalarField(source, kv.second, field);
    if (!value.ok()) return value.status();
    if (key == "cert_file") {
      tls.cert_file = Resolve(base_dir, *value);
    } else if (key == "key_file") {
      tls.key_file = Resolve(base_dir, *value);
    } else if (key == "client_ca_file") {
      tls.client_ca_file = Resolve(base_dir, *value);
    } else if (key == "client_auth_type") {
      client_auth = *value;
    } else if (key == "min_version") {
      if (*value == "TLS12") {
        tls.min_version = TlsServerConfig::MinVersion::kTls12;
      } else if (*value == "TLS13") {
        tls.min_version = TlsServerConfig::MinVersion::kTls13;
      } else if (*value == "TLS10" || *value == "TLS11") {
        return FieldError(
            source, kv.second, field,
            fmt::format("{} is refused: this server requires TLS 1.2 or later", *value));
      } else {
        return FieldError(source, kv.second, field,
                          fmt::format("unknown version \"{}\" (TLS12 or TLS13)", *value));
      }
    } else if (key == "cipher_suites" || key == "curve_preferences" ||
               key == "prefer_server_cipher_suites" || key == "max_version" ||
               key == "client_allowed_sans") {
      return FieldError(source, kv.first, field, "not supported by this exporter");
    } else {
      return FieldError(source, kv.first, field, "unknown field");
    }
  }
  if (client_auth == "NoClientCert") {
    tls.client_auth = TlsServerConfig::ClientAuth::kNone;
  } else if (client_auth == "VerifyClientCertIfGiven") {
    tls.client_auth = TlsServerConfig::ClientAuth::kVerifyIfGiven;
  } else if (client_auth == "RequireAndVerifyClientCert") {
    tls.client_auth = TlsServerConfig::ClientAuth::kRequireAndVerify;
  } else {
    return FieldError(source, node["client_auth_type"], "tls_server_config.client_auth_type",
                      fmt::format("unsupported value \"{}\" (NoClientCert, "
                                  "VerifyClientCertIfGiven, RequireAndVerifyClientCert)",
                                  client_auth));
  }
  if (tls.cert_file.empty()) {
    return FieldError(source, node, "tls_server_config.cert_file", "is required");
  }
  if (tls.key_file.empty()) {
    return FieldError(source, node, "tls_server_config.key_file", "is required");
  }
  if (tls.client_auth != TlsServerConfig::ClientAuth::kNone && tls.client_ca_file.empty()) {
    return FieldError(source, node, "tls_server_config.client_ca_file",
                      "is required when client certificates are verified");
  }
  return tls;
}

bool IsBcryptHash(const std::string& h) {
  return h.size() == 60 && h[0] == '$' && h[1] == '2' &&
         (h[2] == 'a' || h[2] == 'b' || h[2] == 'y') && h[3] == '$';
}

std::array<unsigned char, 32> Sha256(std::string_view a, std::string_view b, std::string_view c) {
  std::array<unsigned char, 32> digest{};
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  const char sep = '\0';
  for (std::string_view part : {a, b, c}) {
    // Length-prefixed parts: ("ab","c") and ("a","bc") must not collide.
    const uint64_t n = part.size();
    EVP_DigestUpdate(ctx, &n, sizeof n);
    EVP_DigestUpdate(ctx, part.data(), part.size());
    EVP_DigestUpdate(ctx, &sep, 1);
  }
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, digest.data(), &len);
  EVP_MD_CTX_free(ctx);
  return digest;
}

// A valid cost-10 bcrypt hash of a random string: unknown users are checked against it so that a
// failed login costs the same whether or not the user exists.
constexpr char kDummyHash[] = "$2y$10$AbzVWRasANDlyYLrCogIKuFL.V7Dciz46rU8qAT1CjUJRMc00LYVu";

}  // namespace

absl::StatusOr<WebConfig> ParseWebConfig(std::string_view yaml,
                                         const std::filesystem::path& base_dir,
                                         std::string_view source) {
  // yaml-cpp reports syntax errors by exception; they stop here
  // (docs/style.md#status-across-modules).
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}:{}: invalid YAML: {}", source, e.mark.line + 1, e.msg));
  }
  WebConfig config;
  if (root.IsNull()) return config;  // an empty file: plain HTTP, no auth
  if (!root.IsMap()) return FieldError(source, root, "(top level)", "must be a mapping");
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key == "tls_server_config") {
        if (kv.second.IsNull()) continue;
        absl::StatusOr<TlsServerConfig> tls = ParseTls(source, kv.second, base_dir);
        if (!tls.ok()) return tls.status();
        config.tls = *std::move(tls);
      } else if (key == "basic_auth_users") {
        if (kv.second.IsNull()) continue;
        if (!kv.second.IsMap()) {
          return FieldError(source, kv.second, "basic_auth_users", "must be a mapping");
        }
        for (const auto& user : kv.second) {
          const std::string name = user.first.as<std::string>();
          const std::string field = "basic_auth_users." + name;
          absl::StatusOr<std::string> hash = ScalarField(source, user.second, field);
          if (!hash.ok()) return hash.status();
          if (!IsBcryptHash(*hash)) {
            return FieldError(source, user.second, field,
                              "is not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)");
          }
          if (name.find(':') != std::string::npos) {
            return FieldError(source, user.first, field, "user names cannot contain ':'");
          }
          config.basic_auth_users[name] = *hash;
        }
      } else if (key == "http_server_config") {
        return FieldError(source, kv.first, key, "not supported by this exporter");
      } else {
        return FieldError(source, kv.first, key, "unknown field");
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  return config;
}

absl::StatusOr<WebConfig> LoadWebConfig(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    return absl::NotFoundError(
        fmt::format("{}: cannot open web config: {}", file.string(), std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseWebConfig(ss.str(), file.parent_path(), file.string());
}

bool VerifyBcrypt(std::string_view password, const std::string& hash) {
  if (password.find('\0') != std::string_view::npos) return false;
  // crypt_data is ~32 KiB: keep it off the HTTP worker thread's stack.
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const std::string pw(password);
  const char* out = crypt_r(pw.c_str(), hash.c_str(), data.get());
  // libxcrypt returns a string starting with '*' on failure, never the hash.
  if (out == nullptr || out[0] == '*') return false;
  const size_t n = std::strlen(out);
  return n == hash.size() && CRYPTO_memcmp(out, hash.data(), n) == 0;
}

class BasicAuthenticator::Impl {
 public:
  Impl(std::map<std::string, std::string> users, size_t max_cache)
      : users_(std::move(users)), max_cache_(max_cache) {}

  bool Check(std::string_view header) const {
    std::optional<BasicCredentials> credentials = ParseBasicAuthorization(header);
    if (!credentials) return false;
    const std::string& user = credentials->user;
    const std::string_view password = credentials->password;
    const auto it = users_.find(user);
    const std::string& hash = it != users_.end() ? it->second : dummy_;
    const std::array<unsigned char, 32> key = Sha256(user, hash, password);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (it != users_.end() && cache_.count(key) > 0) return true;
    }
    bcrypt_calls_.fetch_add(1, std::memory_order_relaxed);
    const bool ok = VerifyBcrypt(password, hash) && it != users_.end();
    if (ok) {
      std::lock_guard<std::mutex> lock(mu_);
      // Bounded: an attacker with valid credentials could otherwise grow it; clearing is cheap
      // and only costs legitimate users one more bcrypt each.
      if (cache_.size() >= max_cache_) cache_.clear();
      cache_.insert(key);
    }
    return ok;
  }

  uint64_t calls() const { return bcrypt_calls_.load(); }

 private:
  const std::map<std::string, std::string> users_;
  const std::string dummy_ = kDummyHash;
  const size_t max_cache_;
  mutable std::mutex mu_;
  mutable std::set<std::array<unsigned char, 32>> cache_;
  mutable std::atomic<uint64_t> bcrypt_calls_{0};
};

BasicAuthenticator::BasicAuthenticator(std::map<std::string, std::string> users,
                                       size_t max_cache_entries)
    : impl_(std::make_unique<Impl>(std::move(users), max_cache_entries)) {}
BasicAuthenticator::~BasicAuthenticator() = default;
bool BasicAuthenticator::Check(std::string_view header) const { return impl_->Check(header); }
uint64_t BasicAuthenticator::bcrypt_calls() const { return impl_->calls(); }

}  // namespace neuron

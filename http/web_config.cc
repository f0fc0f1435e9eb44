#include "http/web_config.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "http/request_parser.h"
#include "http/tls_names.h"

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

absl::StatusOr<TlsServerConfig::Version> ParseVersion(std::string_view source,
                                                      const YAML::Node& node,
                                                      const std::string& field,
                                                      const std::string& value) {
  if (value == "TLS12") return TlsServerConfig::Version::kTls12;
  if (value == "TLS13") return TlsServerConfig::Version::kTls13;
  if (value == "TLS10" || value == "TLS11") {
    return FieldError(source, node, field,
                      fmt::format("{} is refused: this server requires TLS 1.2 or later", value));
  }
  return FieldError(source, node, field,
                    fmt::format("unknown version \"{}\" (TLS12 or TLS13)", value));
}

// A YAML sequence of strings, each checked by `check` (an error message, or "" when good).
absl::StatusOr<std::vector<std::string>> NameList(
    std::string_view source, const YAML::Node& node, const std::string& field,
    const std::function<std::string(const std::string&)>& check) {
  if (!node.IsSequence()) return FieldError(source, node, field, "must be a list");
  std::vector<std::string> out;
  for (const YAML::Node& item : node) {
    absl::StatusOr<std::string> name = ScalarField(source, item, field);
    if (!name.ok()) return name.status();
    if (std::string why = check(*name); !why.empty()) return FieldError(source, item, field, why);
    out.push_back(*std::move(name));
  }
  return out;
}

std::string CheckCipherSuite(const std::string& name) {
  if (FindCipherSuite(name)) return "";
  if (IsInsecureCipherSuite(name)) {
    return fmt::format("{} is insecure and refused (as exporter-toolkit refuses it)", name);
  }
  return fmt::format(
      "unknown cipher suite \"{}\" (Go's crypto/tls names, e.g. "
      "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
      name);
}

std::string CheckCurve(const std::string& name) {
  if (FindCurve(name)) return "";
  return fmt::format("unknown curve \"{}\" (CurveP256, CurveP384, CurveP521, X25519)", name);
}

// One key of tls_server_config into `tls` (client_auth_type into `client_auth`).
// Errors about the key itself (unknown, unsupported) point at `key_node`, the others at `value`.
absl::Status ParseTlsField(std::string_view source, const std::filesystem::path& base_dir,
                           const YAML::Node& key_node, const YAML::Node& value,
                           TlsServerConfig* tls, std::string* client_auth) {
  const std::string key = key_node.as<std::string>();
  const std::string field = "tls_server_config." + key;
  if (key == "cipher_suites" || key == "curve_preferences") {
    const bool suites = key == "cipher_suites";
    absl::StatusOr<std::vector<std::string>> names =
        NameList(source, value, field, suites ? CheckCipherSuite : CheckCurve);
    if (!names.ok()) return names.status();
    (suites ? tls->cipher_suites : tls->curve_preferences) = *std::move(names);
    return absl::OkStatus();
  }
  static constexpr std::string_view kScalars[] = {"cert_file",
                                                  "key_file",
                                                  "client_ca_file",
                                                  "client_auth_type",
                                                  "min_version",
                                                  "max_version",
                                                  "prefer_server_cipher_suites"};
  if (key == "client_allowed_sans") {
    return FieldError(source, key_node, field, "not supported by this exporter");
  }
  if (std::find(std::begin(kScalars), std::end(kScalars), key) == std::end(kScalars)) {
    return FieldError(source, key_node, field, "unknown field");
  }
  absl::StatusOr<std::string> text = ScalarField(source, value, field);
  if (!text.ok()) return text.status();
  if (key == "cert_file" || key == "key_file" || key == "client_ca_file") {
    std::string& file = key == "cert_file"  ? tls->cert_file
                        : key == "key_file" ? tls->key_file
                                            : tls->client_ca_file;
    file = Resolve(base_dir, *text);
  } else if (key == "client_auth_type") {
    *client_auth = *text;
  } else if (key == "min_version" || key == "max_version") {
    absl::StatusOr<TlsServerConfig::Version> v = ParseVersion(source, value, field, *text);
    if (!v.ok()) return v.status();
    (key == "min_version" ? tls->min_version : tls->max_version) = *v;
  } else {  // prefer_server_cipher_suites
    if (*text != "true" && *text != "false") {
      return FieldError(source, value, field, "must be true or false");
    }
    tls->prefer_server_cipher_suites = *text == "true";
  }
  return absl::OkStatus();
}

// What the fields say together: a client auth type we know, the files it needs, and a TLS 1.2
// suite whenever TLS 1.2 may be negotiated.
absl::Status CheckTls(std::string_view source, const YAML::Node& node,
                      const std::string& client_auth, TlsServerConfig* tls) {
  if (client_auth == "NoClientCert") {
    tls->client_auth = TlsServerConfig::ClientAuth::kNone;
  } else if (client_auth == "VerifyClientCertIfGiven") {
    tls->client_auth = TlsServerConfig::ClientAuth::kVerifyIfGiven;
  } else if (client_auth == "RequireAndVerifyClientCert") {
    tls->client_auth = TlsServerConfig::ClientAuth::kRequireAndVerify;
  } else {
    return FieldError(source, node["client_auth_type"], "tls_server_config.client_auth_type",
                      fmt::format("unsupported value \"{}\" (NoClientCert, "
                                  "VerifyClientCertIfGiven, RequireAndVerifyClientCert)",
                                  client_auth));
  }
  const auto required = [&](const std::string& f, const std::string& what) {
    return FieldError(source, node, "tls_server_config." + f, what);
  };
  if (tls->cert_file.empty()) return required("cert_file", "is required");
  if (tls->key_file.empty()) return required("key_file", "is required");
  if (tls->client_auth != TlsServerConfig::ClientAuth::kNone && tls->client_ca_file.empty()) {
    return required("client_ca_file", "is required when client certificates are verified");
  }
  if (tls->min_version > tls->max_version) {
    return FieldError(source, node["min_version"], "tls_server_config.min_version",
                      "is above max_version");
  }
  const bool tls12 = tls->min_version == TlsServerConfig::Version::kTls12;
  const bool has12 =
      std::any_of(tls->cipher_suites.begin(), tls->cipher_suites.end(),
                  [](const std::string& n) { return !FindCipherSuite(n)->openssl.empty(); });
  if (tls12 && !tls->cipher_suites.empty() && !has12) {
    return FieldError(source, node["cipher_suites"], "tls_server_config.cipher_suites",
                      "lists no TLS 1.2 suite (TLS 1.3's cannot be chosen); set min_version: "
                      "TLS13 to serve TLS 1.3 only");
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsServerConfig> ParseTls(std::string_view source, const YAML::Node& node,
                                         const std::filesystem::path& base_dir) {
  if (!node.IsMap()) return FieldError(source, node, "tls_server_config", "must be a mapping");
  TlsServerConfig tls;
  std::string client_auth = "NoClientCert";
  for (const auto& kv : node) {
    if (absl::Status s = ParseTlsField(source, base_dir, kv.first, kv.second, &tls, &client_auth);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CheckTls(source, node, client_auth, &tls); !s.ok()) return s;
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

  bool CheckCached(const BasicCredentials& credentials) const {
    const auto it = users_.find(credentials.user);
    if (it == users_.end()) return false;
    const std::array<unsigned char, 32> key =
        Sha256(credentials.user, it->second, credentials.password);
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.count(key) > 0;
  }

  bool Check(const BasicCredentials& credentials) const {
    if (CheckCached(credentials)) return true;
    const auto it = users_.find(credentials.user);
    const std::string& hash = it != users_.end() ? it->second : dummy_;
    bcrypt_calls_.fetch_add(1, std::memory_order_relaxed);
    const bool ok = VerifyBcrypt(credentials.password, hash) && it != users_.end();
    if (ok) {
      const std::array<unsigned char, 32> key =
          Sha256(credentials.user, hash, credentials.password);
      std::lock_guard<std::mutex> lock(mu_);
      // Bounded: an attacker with valid credentials could otherwise grow it; clearing is cheap
      // and only costs legitimate users one more bcrypt each.
      if (cache_.size() >= max_cache_) cache_.clear();
      cache_.insert(key);
    }
    return ok;
  }

  size_t users() const { return users_.size(); }
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
bool BasicAuthenticator::Check(std::string_view authorization_header) const {
  const std::optional<BasicCredentials> credentials = ParseBasicAuthorization(authorization_header);
  return credentials.has_value() && impl_->Check(*credentials);
}
bool BasicAuthenticator::Check(const BasicCredentials& credentials) const {
  return impl_->Check(credentials);
}
bool BasicAuthenticator::CheckCached(const BasicCredentials& credentials) const {
  return impl_->CheckCached(credentials);
}
size_t BasicAuthenticator::users() const { return impl_->users(); }
uint64_t BasicAuthenticator::bcrypt_calls() const { return impl_->calls(); }

}  // namespace neuron

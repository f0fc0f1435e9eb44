#include "http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509err.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "http/tls_names.h"

namespace neuron {

void SslCtxFree::operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }

std::string OpenSslError() {
  std::string out;
  while (const uint64_t e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

namespace {

int OpenSslVersion(TlsServerConfig::Version v) {
  return v == TlsServerConfig::Version::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

// Versions, TLS 1.2 suites, key-exchange groups and the options every context gets: no
// renegotiation, the server's suite order when asked, partial writes for the non-blocking loop.
absl::Status ApplyProtocol(SSL_CTX* ctx, const TlsServerConfig& tls) {
  auto fail = [](const std::string& msg) { return absl::FailedPreconditionError(msg); };
  SSL_CTX_set_min_proto_version(ctx, OpenSslVersion(tls.min_version));
  SSL_CTX_set_max_proto_version(ctx, OpenSslVersion(tls.max_version));
  std::string suites;
  for (const std::string& name : tls.cipher_suites) {
    const std::optional<CipherSuiteNames> s = FindCipherSuite(name);
    if (!s || s->openssl.empty()) continue;  // TLS 1.3 suites are not chosen (as in Go)
    if (!suites.empty()) suites += ':';
    suites += s->openssl;
  }
  if (suites.empty()) suites = kDefaultTls12Suites;
  if (SSL_CTX_set_cipher_list(ctx, suites.c_str()) != 1) {
    return fail("tls_server_config.cipher_suites: none is available in this OpenSSL: " +
                OpenSslError());
  }
  // OpenSSL drops the names it does not know from a list silently; a suite the operator asked for
  // must not vanish unsaid.
  const STACK_OF(SSL_CIPHER)* offered = SSL_CTX_get_ciphers(ctx);
  for (const std::string& name : tls.cipher_suites) {
    const std::optional<CipherSuiteNames> s = FindCipherSuite(name);
    if (!s || s->openssl.empty()) continue;
    bool found = false;
    for (int i = 0; i < sk_SSL_CIPHER_num(offered) && !found; ++i) {
      found = s->openssl == SSL_CIPHER_get_name(sk_SSL_CIPHER_value(offered, i));
    }
    if (!found) {
      return fail(
          fmt::format("tls_server_config.cipher_suites: {} is not available in this "
                      "OpenSSL",
                      name));
    }
  }
  if (!tls.curve_preferences.empty()) {
    std::string groups;
    for (const std::string& name : tls.curve_preferences) {
      if (!groups.empty()) groups += ':';
      groups += FindCurve(name).value_or(name);
    }
    if (SSL_CTX_set1_groups_list(ctx, groups.c_str()) != 1) {
      return fail("tls_server_config.curve_preferences: " + OpenSslError());
    }
  }
  uint64_t options = SSL_OP_NO_RENEGOTIATION;
  if (tls.prefer_server_cipher_suites) options |= SSL_OP_CIPHER_SERVER_PREFERENCE;
  SSL_CTX_set_options(ctx, options);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SslCtxPtr> BuildServerContext(const TlsServerConfig& tls) {
  // Whatever an earlier failure left in this thread's queue must not be blamed on these files.
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (ctx == nullptr) return absl::InternalError("SSL_CTX_new: " + OpenSslError());
  auto fail = [](const std::string& msg) { return absl::FailedPreconditionError(msg); };
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str()) != 1) {
    return fail(fmt::format("tls_server_config.cert_file {}: {}", tls.cert_file, OpenSslError()));
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL refuses a key that does not belong to the certificate already here; in the middle
    // of a rotation that is the likely case, so say it in words.
    const uint64_t last = ERR_peek_last_error();
    const bool mismatch =
        ERR_GET_LIB(last) == ERR_LIB_X509 && ERR_GET_REASON(last) == X509_R_KEY_VALUES_MISMATCH;
    return fail(fmt::format("tls_server_config.key_file {}{}: {}", tls.key_file,
                            mismatch ? " does not match cert_file " + tls.cert_file : "",
                            OpenSslError()));
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return fail(fmt::format("tls_server_config.key_file {} does not match cert_file {}: {}",
                            tls.key_file, tls.cert_file, OpenSslError()));
  }
  if (absl::Status s = ApplyProtocol(ctx.get(), tls); !s.ok()) return s;
  if (tls.client_auth != TlsServerConfig::ClientAuth::kNone) {
    if (SSL_CTX_load_verify_locations(ctx.get(), tls.client_ca_file.c_str(), nullptr) != 1) {
      return fail(fmt::format("tls_server_config.client_ca_file {}: {}", tls.client_ca_file,
                              OpenSslError()));
    }
    int mode = SSL_VERIFY_PEER;
    if (tls.client_auth == TlsServerConfig::ClientAuth::kRequireAndVerify) {
      mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    }
    SSL_CTX_set_verify(ctx.get(), mode, nullptr);
  }
  // Sessions are resumed only within this context (a session made under another CA or verify
  // mode is not); without an id context OpenSSL refuses every resumption once client
  // certificates are verified, with an internal-error alert.
  static constexpr unsigned char kSessionContext[] = "neuron-http";
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  return ctx;
}

TlsContextReloader::TlsContextReloader(TlsServerConfig tls, std::shared_ptr<spdlog::logger> log,
                                       Clock::duration check_interval)
    : tls_(std::move(tls)), log_(std::move(log)), check_interval_(check_interval) {}

TlsContextReloader::~TlsContextReloader() = default;

absl::StatusOr<std::unique_ptr<TlsContextReloader>> TlsContextReloader::Create(
    TlsServerConfig tls, std::shared_ptr<spdlog::logger> log, Clock::duration check_interval) {
  std::unique_ptr<TlsContextReloader> r(
      new TlsContextReloader(std::move(tls), std::move(log), check_interval));
  // Stat before loading: a change that lands between the two is seen by the next check (and
  // costs one needless reload at worst) instead of being missed.
  r->attempted_ = r->StatFiles();
  absl::StatusOr<SslCtxPtr> ctx = BuildServerContext(r->tls_);
  if (!ctx.ok()) return ctx.status();
  r->current_ = *std::move(ctx);
  r->last_check_ = Clock::now();
  return r;
}

std::vector<FileIdentity> TlsContextReloader::StatFiles() const {
  std::vector<FileIdentity> out = {StatFile(tls_.cert_file), StatFile(tls_.key_file)};
  if (tls_.client_auth != TlsServerConfig::ClientAuth::kNone) {
    out.push_back(StatFile(tls_.client_ca_file));
  }
  return out;
}

void TlsContextReloader::ReloadIfChanged() {
  std::vector<FileIdentity> now = StatFiles();
  if (now == attempted_) return;
  attempted_ = std::move(now);
  absl::StatusOr<SslCtxPtr> next = BuildServerContext(tls_);
  if (!next.ok()) {
    ++failures_;
    const std::string why(next.status().message());
    log_->error("TLS files changed but cannot be used; still serving the previous certificate: {}",
                why);
    return;
  }
  current_ = *std::move(next);
  ++reloads_;
  log_->info("TLS certificate reloaded from {} (key {}); new connections use it", tls_.cert_file,
             tls_.key_file);
}

SSL_CTX* TlsContextReloader::ForNewConnection(Clock::time_point now) {
  if (now - last_check_ >= check_interval_) {
    last_check_ = now;
    ReloadIfChanged();
  }
  return current_.get();
}

}  // namespace neuron

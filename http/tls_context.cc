#include "http/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509err.h>
#include <spdlog/spdlog.h>

#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

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
  SSL_CTX_set_min_proto_version(ctx.get(), tls.min_version == TlsServerConfig::MinVersion::kTls13
                                               ? TLS1_3_VERSION
                                               : TLS1_2_VERSION);
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

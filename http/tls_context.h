#pragma once
// The HTTPS server's OpenSSL context, rebuilt when the certificate, key or client CA change on
// disk, so that a rotated certificate is served without a restart (as exporter-toolkit does, which
// reads them on every handshake).
//
// Why this design: on accept, at most once per `check_interval` (1 s in the server), stat(2) the
// files and compare what it says with the last attempt (http/file_identity.h). A change builds a
// whole new SSL_CTX beside the old one; only a context that loaded and whose key matches its
// certificate replaces it. New connections get the new context; live ones keep theirs, because
// SSL_new takes a reference on its SSL_CTX and dropping ours frees nothing they use. A stat per
// second costs nothing measurable, where reading and parsing the PEM files on every handshake
// would; the price is that a change is served up to a second late. inotify would see it sooner,
// but a watch on the file misses kubelet's swap of the symlink above it, and it needs a thread.
//
// A pair that fails to load (half written during rotation, a key that does not match, a missing
// file) is logged once as an error naming the field and file, the previous context stays in use,
// and the next change of any of the files is tried again.

#include <openssl/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "http/file_identity.h"
#include "http/web_config.h"

namespace spdlog {
class logger;
}

namespace neuron {

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const;
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// A server context from `tls`: certificate chain, private key (checked against the certificate),
// versions, TLS 1.2 suites (forward-secret AEAD ones unless `cipher_suites` says otherwise),
// groups, client verification with a session-id context (so sessions resume), no renegotiation, and
// partial writes (the connection loop writes without blocking). FailedPrecondition naming the field
// and the file when one of them cannot be used.
absl::StatusOr<SslCtxPtr> BuildServerContext(const TlsServerConfig& tls);

// Drains OpenSSL's error queue of this thread into one line.
std::string OpenSslError();

// Thread-safety: not thread-safe; one owner (the server's poller thread, which accepts), per
// docs/style.md#one-owner. Contexts it handed out stay valid for the SSL objects made from them.
class TlsContextReloader {
 public:
  using Clock = std::chrono::steady_clock;

  // Loads the files once; errors as BuildServerContext's (the server does not start without a
  // working certificate).
  static absl::StatusOr<std::unique_ptr<TlsContextReloader>> Create(
      TlsServerConfig tls, std::shared_ptr<spdlog::logger> log,
      Clock::duration check_interval = std::chrono::seconds(1));
  ~TlsContextReloader();
  TlsContextReloader(const TlsContextReloader&) = delete;
  TlsContextReloader& operator=(const TlsContextReloader&) = delete;

  // The context for a connection accepted at `now`, after re-checking the files when
  // `check_interval` has passed since the last check. Never null; valid until the next call, so
  // SSL_new it at once (that takes the reference that keeps it alive).
  SSL_CTX* ForNewConnection(Clock::time_point now);

  uint64_t reloads() const { return reloads_; }    // contexts replaced since Create
  uint64_t failures() const { return failures_; }  // changes that failed to load

 private:
  TlsContextReloader(TlsServerConfig tls, std::shared_ptr<spdlog::logger> log,
                     Clock::duration check_interval);
  std::vector<FileIdentity> StatFiles() const;
  void ReloadIfChanged();

  const TlsServerConfig tls_;
  const std::shared_ptr<spdlog::logger> log_;
  const Clock::duration check_interval_;
  SslCtxPtr current_;
  // The files as they were before the last load attempted, good or bad: a failed version is not
  // retried (nor logged again) until one of them changes.
  std::vector<FileIdentity> attempted_;
  Clock::time_point last_check_;
  uint64_t reloads_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace neuron

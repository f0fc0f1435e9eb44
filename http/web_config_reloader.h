#pragma once
// The basic-auth users of a web config file (`--web.config.file`), re-read when the file changes,
// so that adding, removing or re-keying a user needs no restart (exporter-toolkit re-reads the
// file on every request).
//
// Checked on requests, not on accepts: Prometheus keeps its connection open for hours, and a user
// removed from the file must lose access on that connection too. At most once per
// `check_interval` (1 s in the server) a request stats the file (http/file_identity.h); a change
// re-parses it. A file that does not parse (half written, a bad hash, gone) is logged once with
// the error naming file and line, the users from before stay in force, and the next change is
// tried again. A change to `tls_server_config` in the file is reported and not applied: the
// listener would have to change; the certificate files it names are re-read on their own
// (http/tls_context.h).

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "http/file_identity.h"
#include "http/web_config.h"

namespace spdlog {
class logger;
}

namespace neuron {

// Thread-safe: every worker calls Current; one mutex guards the check and the published
// authenticator, which is immutable and shared (docs/style.md#one-owner).
class WebConfigReloader {
 public:
  using Clock = std::chrono::steady_clock;

  // `initial` is what `file` said when the server started (its TLS part is the one in use).
  WebConfigReloader(std::filesystem::path file, const WebConfig& initial,
                    std::shared_ptr<spdlog::logger> log,
                    Clock::duration check_interval = std::chrono::seconds(1));

  // The authenticator for a request arriving at `now`, after re-reading the file when it changed
  // and `check_interval` has passed since the last check; null when no users are configured
  // (basic auth off).
  std::shared_ptr<const BasicAuthenticator> Current(Clock::time_point now);

 private:
  void ReloadIfChanged() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::filesystem::path file_;
  const std::optional<TlsServerConfig> tls_at_start_;
  const std::shared_ptr<spdlog::logger> log_;
  const Clock::duration check_interval_;

  std::mutex mu_;
  std::shared_ptr<const BasicAuthenticator> auth_ ABSL_GUARDED_BY(mu_);
  // The file as it was before the last parse attempted, good or bad.
  FileIdentity attempted_ ABSL_GUARDED_BY(mu_);
  Clock::time_point last_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neuron

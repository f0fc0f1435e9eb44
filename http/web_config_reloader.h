#pragma once
// The basic-auth users of a web config file (`--web.config.file`), re-read when the file changes,
// so that adding, removing or re-keying a user needs no restart (exporter-toolkit re-reads the
// file on every request).
//
// Checked on requests, not on accepts: Prometheus keeps its connection open for hours, and a user
// removed from the file must lose access on that connection too. At most once per
// `check_interval` (1 s in the server) a request stats the file (http/file_identity.h); a change
// re-reads it.
//
// Fails closed: a reload never turns authentication off and never applies half a file. A version
// of the file is not applied, and the configuration in force stays, when it
//   - cannot be used: unreadable or gone, empty (the first step of any non-atomic rewrite), or
//     invalid (a half-written hash or line, an unknown field: the error names file and line);
//   - removes every basic_auth_users entry while some are in force (turning auth off takes a
//     restart);
//   - has a tls_server_config other than the one in force, removed included (the listener would
//     have to change: a restart; the certificate files it names are re-read on their own,
//     http/tls_context.h).
// Then every check logs a warning saying why, until a version that can be applied replaces it.

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

// Warns that basic-auth passwords cross the network in the clear when there are users and no TLS:
// the server at start, and a reload that adds the first users, in the same words.
void WarnIfPlainHttpAuth(spdlog::logger& log, bool users, bool tls);

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
  void Check() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the file as it is now; why it was not applied, or "" when it was.
  std::string Apply() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::filesystem::path file_;
  const std::optional<TlsServerConfig> tls_in_force_;
  const std::shared_ptr<spdlog::logger> log_;
  const Clock::duration check_interval_;

  std::mutex mu_;
  std::shared_ptr<const BasicAuthenticator> auth_ ABSL_GUARDED_BY(mu_);
  // The file as it was before the last read attempted, good or bad.
  FileIdentity attempted_ ABSL_GUARDED_BY(mu_);
  // Why that version was not applied ("" when it was): warned on every check until it changes.
  std::string problem_ ABSL_GUARDED_BY(mu_);
  Clock::time_point last_check_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neuron

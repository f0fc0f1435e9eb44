#include "http/web_config_reloader.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/status/statusor.h"

namespace neuron {
namespace {

std::shared_ptr<const BasicAuthenticator> MakeAuthenticator(
    const std::map<std::string, std::string>& users) {
  if (users.empty()) return nullptr;
  return std::make_shared<const BasicAuthenticator>(users);
}

}  // namespace

WebConfigReloader::WebConfigReloader(std::filesystem::path file, const WebConfig& initial,
                                     std::shared_ptr<spdlog::logger> log,
                                     Clock::duration check_interval)
    : file_(std::move(file)),
      tls_at_start_(initial.tls),
      log_(std::move(log)),
      check_interval_(check_interval),
      auth_(MakeAuthenticator(initial.basic_auth_users)),
      // The caller read the file a moment ago; a change in between shows up as one more change.
      attempted_(StatFile(file_.string())),
      last_check_(Clock::now()) {}

std::shared_ptr<const BasicAuthenticator> WebConfigReloader::Current(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (now - last_check_ >= check_interval_) {
    last_check_ = now;
    ReloadIfChanged();
  }
  return auth_;
}

void WebConfigReloader::ReloadIfChanged() {
  FileIdentity seen = StatFile(file_.string());
  if (seen == attempted_) return;
  attempted_ = seen;
  absl::StatusOr<WebConfig> config = LoadWebConfig(file_);
  if (!config.ok()) {
    const std::string why(config.status().message());
    log_->error("web config changed but cannot be used; keeping the users it had before: {}", why);
    return;
  }
  if (config->tls != tls_at_start_) {
    log_->warn(
        "{}: tls_server_config changed; that takes a restart (the certificate and key "
        "files it names are re-read when they change)",
        file_.string());
  }
  auth_ = MakeAuthenticator(config->basic_auth_users);
  log_->info("web config {} reloaded: {} basic auth user(s)", file_.string(),
             config->basic_auth_users.size());
}

}  // namespace neuron

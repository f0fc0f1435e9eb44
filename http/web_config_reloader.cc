#include "http/web_config_reloader.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/statusor.h"
#include "fmt/format.h"

namespace neuron {
namespace {

std::shared_ptr<const BasicAuthenticator> MakeAuthenticator(
    const std::map<std::string, std::string>& users) {
  if (users.empty()) return nullptr;
  return std::make_shared<const BasicAuthenticator>(users);
}

// The whole file, or the reason it cannot be read.
absl::StatusOr<std::string> ReadWhole(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return absl::NotFoundError(fmt::format("cannot open it: {}", std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(fmt::format("cannot read it: {}", std::strerror(errno)));
  return ss.str();
}

}  // namespace

void WarnIfPlainHttpAuth(spdlog::logger& log, bool users, bool tls) {
  if (!users || tls) return;
  log.warn(
      "basic auth over plain HTTP: passwords cross the network readable by anyone on the path; "
      "set tls_server_config in the web config (turning TLS on takes a restart)");
}

WebConfigReloader::WebConfigReloader(std::filesystem::path file, const WebConfig& initial,
                                     std::shared_ptr<spdlog::logger> log,
                                     Clock::duration check_interval)
    : file_(std::move(file)),
      tls_in_force_(initial.tls),
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
    Check();
  }
  return auth_;
}

void WebConfigReloader::Check() {
  const FileIdentity seen = StatFile(file_.string());
  if (seen != attempted_) {
    attempted_ = seen;
    problem_ = Apply();
  }
  if (problem_.empty()) return;
  log_->warn("web config {} not applied; still in force: {} basic auth user(s){}. Why: {}",
             file_.string(), auth_ != nullptr ? auth_->users() : 0,
             tls_in_force_ ? " over TLS" : "", problem_);
}

std::string WebConfigReloader::Apply() {
  absl::StatusOr<std::string> text = ReadWhole(file_);
  if (!text.ok()) return std::string{text.status().message()};
  if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
    return "the file is empty (half written?)";
  }
  absl::StatusOr<WebConfig> config = ParseWebConfig(*text, file_.parent_path(), file_.string());
  if (!config.ok()) return std::string{config.status().message()};
  if (config->tls != tls_in_force_) {
    return config->tls ? "tls_server_config differs from the one in use, which takes a restart"
                       : "tls_server_config was removed; turning TLS off takes a restart";
  }
  if (auth_ != nullptr && config->basic_auth_users.empty()) {
    return "it has no basic_auth_users; turning authentication off takes a restart";
  }
  if (auth_ == nullptr) {
    WarnIfPlainHttpAuth(*log_, !config->basic_auth_users.empty(), tls_in_force_.has_value());
  }
  auth_ = MakeAuthenticator(config->basic_auth_users);
  log_->info("web config {} reloaded: {} basic auth user(s)", file_.string(),
             config->basic_auth_users.size());
  return "";
}

}  // namespace neuron

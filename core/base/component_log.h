#pragma once
// One named spdlog logger per component (docs/style.md#google-style), sharing the default logger's
// sinks so that a binary's logging setup (file for neuron-top, stderr elsewhere) applies to every
// component. The format (--log.format, core/base/log_setup.h) sits on those shared sinks and the
// level is copied from the default logger, so ConfigureLogging covers component loggers made
// before it (registered here) and after it (cloned from the configured default). Thread-safe.

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace neuron {

inline std::shared_ptr<spdlog::logger> ComponentLogger(const std::string& name) {
  if (std::shared_ptr<spdlog::logger> existing = spdlog::get(name)) return existing;
  std::shared_ptr<spdlog::logger> log = spdlog::default_logger()->clone(name);
  try {
    spdlog::register_logger(log);
  } catch (const spdlog::spdlog_ex&) {
    // Another thread registered it first; use theirs.
    if (std::shared_ptr<spdlog::logger> other = spdlog::get(name)) return other;
  }
  return log;
}

}  // namespace neuron

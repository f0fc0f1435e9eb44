#include "driver-sim/runtime/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

namespace neuron::nrt {
namespace {

// libnrt prints levels in upper case, padded to 5 ("ERROR", "WARN ", "INFO ").
class UpperLevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view name;
    switch (msg.level) {
      case spdlog::level::trace:
        name = "TRACE";
        break;
      case spdlog::level::debug:
        name = "DEBUG";
        break;
      case spdlog::level::info:
        name = "INFO ";
        break;
      case spdlog::level::warn:
        name = "WARN ";
        break;
      case spdlog::level::err:
        name = "ERROR";
        break;
      default:
        name = "FATAL";
        break;
    }
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<UpperLevelFlag>();
  }
};

spdlog::level::level_enum LevelFromEnv() {
  const char* v = std::getenv("NEURON_RT_LOG_LEVEL_NRT");
  if (v == nullptr || *v == '\0') v = std::getenv("NEURON_RT_LOG_LEVEL");
  if (v == nullptr) return spdlog::level::err;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "TRACE") return spdlog::level::trace;
  if (s == "DEBUG") return spdlog::level::debug;
  if (s == "INFO") return spdlog::level::info;
  if (s == "WARN" || s == "WARNING") return spdlog::level::warn;
  if (s == "FATAL") return spdlog::level::critical;
  if (s == "OFF") return spdlog::level::off;
  return spdlog::level::err;
}

std::shared_ptr<spdlog::logger> Make() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<UpperLevelFlag>('*').set_pattern("%Y-%b-%d %H:%M:%S.%f %P:%t %* NRT:%v");
  sink->set_formatter(std::move(formatter));
  // Not registered globally: an application's spdlog setup must not restyle libnrt's lines.
  auto log = std::make_shared<spdlog::logger>("nrt", sink);
  log->set_level(LevelFromEnv());
  log->flush_on(spdlog::level::warn);
  return log;
}

}  // namespace

std::shared_ptr<spdlog::logger> Log() {
  static const std::shared_ptr<spdlog::logger> log = Make();
  return log;
}

void ConfigureLogLevelFromEnv() { Log()->set_level(LevelFromEnv()); }

}  // namespace neuron::nrt

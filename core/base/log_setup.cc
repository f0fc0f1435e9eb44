#include "core/base/log_setup.h"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <ctime>
#include <string>

#include "absl/status/statusor.h"

namespace neuron {
namespace {

void Append(spdlog::memory_buf_t& dest, std::string_view s) {
  dest.append(s.data(), s.data() + s.size());
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid too, RFC 3629).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

// `s` as a JSON string, quotes included (RFC 8259 section 7).
void AppendJsonString(std::string_view s, spdlog::memory_buf_t& dest) {
  static constexpr char kHex[] = "0123456789abcdef";
  dest.push_back('"');
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(s, i);
      if (n == 0) {
        Append(dest, "\\ufffd");
        ++i;
      } else {
        Append(dest, s.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        Append(dest, "\\\"");
        break;
      case '\\':
        Append(dest, "\\\\");
        break;
      case '\n':
        Append(dest, "\\n");
        break;
      case '\r':
        Append(dest, "\\r");
        break;
      case '\t':
        Append(dest, "\\t");
        break;
      case '\b':
        Append(dest, "\\b");
        break;
      case '\f':
        Append(dest, "\\f");
        break;
      default:
        if (c < 0x20) {
          const char esc[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          Append(dest, std::string_view(esc, sizeof(esc)));
        } else {
          dest.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  dest.push_back('"');
}

// Exporter-toolkit's level words ("warn", not spdlog's "warning").
std::string_view LevelWord(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

void AppendTimestamp(spdlog::log_clock::time_point t, spdlog::memory_buf_t& dest) {
  const auto since_epoch = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - secs);
  const std::time_t tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  Append(dest, std::string_view(buf, n));
  const int milli = static_cast<int>(ms.count());
  const char frac[] = {'.', static_cast<char>('0' + milli / 100),
                       static_cast<char>('0' + milli / 10 % 10),
                       static_cast<char>('0' + milli % 10), 'Z'};
  Append(dest, std::string_view(frac, sizeof(frac)));
}

class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    Append(dest, "{\"ts\":\"");
    AppendTimestamp(msg.time, dest);
    Append(dest, "\",\"level\":\"");
    Append(dest, LevelWord(msg.level));
    Append(dest, "\",\"logger\":");
    std::string_view logger(msg.logger_name.data(), msg.logger_name.size());
    // The default logger may be unnamed (spdlog's own); the program is the component then.
    if (logger.empty()) logger = program_invocation_short_name;
    AppendJsonString(logger, dest);
    Append(dest, ",\"msg\":");
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    Append(dest, "}\n");
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

absl::StatusOr<spdlog::level::level_enum> ParseLevel(std::string_view level) {
  static constexpr std::pair<std::string_view, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace},       {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},         {"warn", spdlog::level::warn},
      {"warning", spdlog::level::warn},      {"error", spdlog::level::err},
      {"critical", spdlog::level::critical}, {"off", spdlog::level::off}};
  for (const auto& [name, value] : kLevels) {
    if (level == name) return value;
  }
  return absl::InvalidArgumentError(fmt::format(
      "log level \"{}\" is not one of trace, debug, info, warn, error, critical, off", level));
}

}  // namespace

std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter() {
  return std::make_unique<JsonFormatter>();
}

absl::Status ConfigureLogging(std::string_view level, std::string_view format) {
  const absl::StatusOr<spdlog::level::level_enum> lvl = ParseLevel(level);
  if (!lvl.ok()) return lvl.status();
  std::unique_ptr<spdlog::formatter> formatter;
  if (format == "json") {
    formatter = MakeJsonLogFormatter();
  } else if (format == "text") {
    formatter = std::make_unique<spdlog::pattern_formatter>();
  } else {
    return absl::InvalidArgumentError(
        fmt::format("log format \"{}\" is not one of text, json", format));
  }
  // Registered loggers (the default one among them) and, through their shared sinks, every
  // component logger cloned from the default one before or after this call.
  spdlog::set_formatter(std::move(formatter));
  spdlog::set_level(*lvl);
  return absl::OkStatus();
}

}  // namespace neuron

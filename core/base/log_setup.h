#pragma once
// How every binary's logs look, set once at start-up from --log.level and --log.format
// (the flag names Prometheus exporters use; monitor/README.md and plugin/README.md show them):
//   text: spdlog's default line, "[2026-11-24 07:00:00.123] [exporter] [info] listening ...";
//   json: one object per line, for log collectors:
//     {"ts":"2026-11-24T07:00:00.123Z","level":"info","logger":"exporter","msg":"listening ..."}
//     ts is UTC with milliseconds; level is trace|debug|info|warn|error|critical; logger is the
//     component (core/base/component_log.h), or the program's name for the default logger when
//     it has none; msg is the message as a JSON string: quotes, backslashes and control
//     characters escaped, and each byte that is not part of valid UTF-8 replaced by U+FFFD.
// The format goes onto the sinks, which every component logger shares with the default logger
// (ComponentLogger clones it), so it applies to component loggers created before and after.
// Call from main before starting threads; spdlog's registry makes the calls themselves safe.

#include <spdlog/formatter.h>

#include <memory>
#include <string_view>

#include "absl/status/status.h"

namespace neuron {

// Sets the level and format of the default logger and of every registered logger, and of
// loggers cloned from the default logger later. level: trace|debug|info|warn|warning|error|
// critical|off; format: text|json. INVALID_ARGUMENT naming the bad value (nothing changed then).
absl::Status ConfigureLogging(std::string_view level, std::string_view format);

// The json format's formatter (tests; sinks of one's own).
std::unique_ptr<spdlog::formatter> MakeJsonLogFormatter();

}  // namespace neuron

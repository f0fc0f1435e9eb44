#pragma once
// A logger registered under a component's name (so ComponentLogger, core/base/component_log.h,
// finds it) whose lines a test can read: the HTTP server's tests check what an operator is told.
// Thread-safe (spdlog's _mt sink); one per name at a time.

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace neuron::testing {

struct CapturedLog {
  explicit CapturedLog(const std::string& name)
      : sink(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)),
        logger(std::make_shared<spdlog::logger>(name, sink)) {
    spdlog::drop(name);
    spdlog::register_logger(logger);
  }
  ~CapturedLog() { spdlog::drop(logger->name()); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  bool Contains(const std::string& text) const { return Count(text) > 0; }
  // Lines (of the last 256) that contain `text`.
  int Count(const std::string& text) const {
    int n = 0;
    for (const std::string& line : sink->last_formatted()) {
      n += line.find(text) != std::string::npos ? 1 : 0;
    }
    return n;
  }

  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink;
  std::shared_ptr<spdlog::logger> logger;
};

}  // namespace neuron::testing

#pragma once
// Reads what a binary logged with --log.format json (core/base/log_setup.h): one object a line,
// each with string "ts", "level", "logger" and "msg". Header-only; needs nlohmann_json.
// GoogleTest-free.

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace neuron::testing {

struct JsonLogLines {
  std::vector<nlohmann::json> records;  // every line, in order, when all are records
  std::string bad_line;                 // the first line that is not a record, if any
  bool ok() const { return bad_line.empty(); }
};

inline JsonLogLines ParseJsonLogLines(const std::string& text) {
  JsonLogLines out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    bool record = doc.is_object();
    for (const char* key : {"ts", "level", "logger", "msg"}) {
      record = record && doc.contains(key) && doc[key].is_string();
    }
    if (!record) {
      out.bad_line = line.empty() ? "(an empty line)" : line;
      return out;
    }
    out.records.push_back(std::move(doc));
  }
  return out;
}

}  // namespace neuron::testing

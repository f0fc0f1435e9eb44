// core/base/log_setup.h: --log.level and --log.format for every binary. The json format must give
// one object per line that a real JSON parser (nlohmann, which rejects invalid UTF-8) accepts,
// whatever bytes a message holds, for component loggers created before and after the call.

#include "core/base/log_setup.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "core/base/component_log.h"

namespace neuron {
namespace {

using nlohmann::json;

// A default logger writing into a string, as a binary's stderr logger would (component loggers
// clone it and share its sink).
class LogSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spdlog::drop_all();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("main", sink));
  }
  void TearDown() override {
    spdlog::drop_all();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "", std::make_shared<spdlog::sinks::ostream_sink_mt>(std::cerr)));
  }

  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
  }
  // Every line as JSON; fails the test on a line that does not parse or lacks a key.
  std::vector<json> JsonLines() const {
    std::vector<json> docs;
    for (const std::string& line : Lines()) {
      json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(doc.is_discarded()) << "not JSON: " << line;
      if (doc.is_discarded()) continue;
      for (const char* key : {"ts", "level", "logger", "msg"}) {
        EXPECT_TRUE(doc.contains(key) && doc[key].is_string()) << key << " missing in " << line;
      }
      docs.push_back(std::move(doc));
    }
    return docs;
  }

  std::ostringstream out_;
};

TEST_F(LogSetupTest, JsonEscapesEveryMessageForLoggersMadeBeforeAndAfter) {
  const std::shared_ptr<spdlog::logger> before = ComponentLogger("before");
  ASSERT_TRUE(ConfigureLogging("info", "json").ok());
  const std::shared_ptr<spdlog::logger> after = ComponentLogger("after");
  const std::string tricky = "say \"hi\"\\path\nsecond line\ttab\x01 bell\x7f";
  const std::string utf8 = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";  // café € 😀
  const std::string broken =
      "a\xff"
      "b\xc3"
      "c\xe2\x82"
      "d\xed\xa0\x80"
      "e\xc0\xaf";
  before->info("{}", tricky);
  after->warn("{}", utf8);
  spdlog::error("{}", broken);
  after->debug("below the level");

  const std::vector<json> docs = JsonLines();
  ASSERT_EQ(docs.size(), 3u) << out_.str();
  EXPECT_EQ(docs[0]["logger"], "before");
  EXPECT_EQ(docs[0]["level"], "info");
  EXPECT_EQ(docs[0]["msg"], tricky);
  EXPECT_EQ(docs[1]["logger"], "after");
  EXPECT_EQ(docs[1]["level"], "warn");
  EXPECT_EQ(docs[1]["msg"], utf8);
  EXPECT_EQ(docs[2]["logger"], "main");
  EXPECT_EQ(docs[2]["level"], "error");
  // Each byte that is not valid UTF-8 (a stray byte, truncated sequences, a surrogate, an
  // overlong form) becomes U+FFFD; the valid letters around them stay.
  EXPECT_EQ(docs[2]["msg"],
            "a\xef\xbf\xbd"
            "b\xef\xbf\xbd"
            "c\xef\xbf\xbd\xef\xbf\xbd"
            "d\xef\xbf\xbd\xef\xbf\xbd"
            "\xef\xbf\xbd"
            "e\xef\xbf\xbd\xef\xbf\xbd");
  static const std::regex kTs(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  for (const json& d : docs) {
    EXPECT_TRUE(std::regex_match(d["ts"].get<std::string>(), kTs)) << d.dump();
  }
}

TEST_F(LogSetupTest, TextIsSpdlogsDefaultLine) {
  ASSERT_TRUE(ConfigureLogging("debug", "text").ok());
  ComponentLogger("comp")->debug("plain \"words\"");
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  static const std::regex kLine(
      R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[comp\] \[debug\] plain "words")");
  EXPECT_TRUE(std::regex_match(lines[0], kLine)) << lines[0];
}

TEST_F(LogSetupTest, BadValuesAreRejectedAndChangeNothing) {
  ASSERT_TRUE(ConfigureLogging("warn", "text").ok());
  for (const auto& [level, format] :
       std::vector<std::pair<std::string, std::string>>{{"verbose", "text"},
                                                        {"info", "logfmt"},
                                                        {"", "json"},
                                                        {"INFO", "text"},
                                                        {"json", "json"}}) {
    const absl::Status s = ConfigureLogging(level, format);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << level << " " << format;
    EXPECT_NE(s.message().find(level == "info" ? format : level), std::string_view::npos)
        << s.message();
  }
  spdlog::info("still filtered");
  spdlog::warn("still text");
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u) << out_.str();
  EXPECT_NE(lines[0].find("[main] [warning] still text"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace neuron

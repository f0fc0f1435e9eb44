// The plugin's log format comes through the same layers as every other setting
// (plugin/README.md): defaults < config file (log_format) < environment (NEURON_DP_LOG_FORMAT)
// < flag (--log.format).

#include <gtest/gtest.h>

#include <map>

#include "plugin/config.h"
#include "tests/support/fake_env.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

using ::neuron::testing::TempDir;
using ::neuron::testing::WriteFile;

using neuron::testing::EnvOf;

TEST(LogFormatConfigTest, FlagBeatsEnvironmentWhichBeatsTheFile) {
  absl::StatusOr<Config> c = ResolveConfig(Flags{}, EnvOf({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_format, "text");

  TempDir tmp;
  const auto file = tmp.path() / "p.yaml";
  WriteFile(file, "log_format: json\nlog_level: debug\n");
  Flags flags;
  flags.config_file = file.string();
  c = ResolveConfig(flags, EnvOf({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_format, "json") << "the file beats the default";
  EXPECT_EQ(c->log_level, "debug");

  c = ResolveConfig(flags, EnvOf({{"NEURON_DP_LOG_FORMAT", "text"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_format, "text") << "the environment beats the file";

  flags.log_format = "json";
  c = ResolveConfig(flags, EnvOf({{"NEURON_DP_LOG_FORMAT", "text"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->log_format, "json") << "the flag beats the environment";
}

// An unknown key in the file still names log_format among the keys it knows.
TEST(LogFormatConfigTest, UnknownKeyListsLogFormat) {
  TempDir tmp;
  const auto file = tmp.path() / "p.yaml";
  WriteFile(file, "log_fmt: json\n");
  Flags flags;
  flags.config_file = file.string();
  const absl::StatusOr<Config> c = ResolveConfig(flags, EnvOf({}));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("log_format"), std::string_view::npos) << c.status();
}

}  // namespace
}  // namespace neuron::plugin

// Config parsing and precedence: defaults < config file < environment < flags.

#include "plugin/config.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/support/fake_env.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin {
namespace {

using ::neuron::testing::TempDir;
using ::neuron::testing::WriteFile;

using neuron::testing::EnvOf;

TEST(ConfigTest, DefaultsServeThreeResourcesWithLegacyOff) {
  absl::StatusOr<Config> c = ResolveConfig(Flags{}, EnvOf({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->enabled(Resource::kNeuron));
  EXPECT_TRUE(c->enabled(Resource::kNeuronCore));
  EXPECT_TRUE(c->enabled(Resource::kEfa));
  EXPECT_FALSE(c->enabled(Resource::kNeuronDevice));
  EXPECT_EQ(c->noncontiguous, NonContiguousPolicy::kWarn);
  EXPECT_FALSE(c->cdi);
  EXPECT_EQ(c->root, "/");
  EXPECT_EQ(c->kubelet_dir, "/var/lib/kubelet");
  EXPECT_EQ(c->device_numbering, DeviceNumbering::kHost)
      << "docs/architecture.md#device-numbering: host until checked";
}

TEST(ConfigTest, FileSetsEveryKnob) {
  Config c;
  const absl::Status s = ApplyConfigYaml(R"(
resources:
  neurondevice: true
  efa: false
noncontiguous: reject
cdi: true
socket_suffix: node7
health:
  ecc: false
  efa_port: no
  poll_period: 2s
allocation_grace: 10s
)",
                                         "plugin.yaml", &c);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(c.enabled(Resource::kNeuronDevice));
  EXPECT_FALSE(c.enabled(Resource::kEfa));
  EXPECT_TRUE(c.enabled(Resource::kNeuron));
  EXPECT_EQ(c.noncontiguous, NonContiguousPolicy::kReject);
  EXPECT_TRUE(c.cdi);
  EXPECT_EQ(c.socket_suffix, "node7");
  EXPECT_EQ(c.health.ActionFor(EvidenceClass::kEcc), Action::kIgnore);
  EXPECT_EQ(c.health.ActionFor(EvidenceClass::kEfaPort), Action::kIgnore);
  EXPECT_EQ(c.health.ActionFor(EvidenceClass::kAbsence), Action::kTaint);
  EXPECT_EQ(c.health.poll_period, std::chrono::milliseconds(2000));
  EXPECT_EQ(c.allocation_grace, std::chrono::milliseconds(10000));
}

TEST(ConfigTest, BadLinesAreNamedWithTheirLineNumberAndChangeNothing) {
  Config c;
  absl::Status s = ApplyConfigYaml("cdi: true\nresources:\n  neuron: maybe\n", "p.yaml", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("p.yaml:3:"), std::string::npos) << s;
  EXPECT_NE(s.message().find("maybe"), std::string::npos) << s;
  EXPECT_FALSE(c.cdi) << "a bad file is applied whole or not at all";

  s = ApplyConfigYaml("health:\n  poll_period: 1s\n  eccc: true\n", "p.yaml", &c);
  EXPECT_NE(s.message().find("p.yaml:3:"), std::string::npos) << s;
  EXPECT_NE(s.message().find("health.eccc"), std::string::npos) << s;

  s = ApplyConfigYaml("noncontiguous: [warn\n", "p.yaml", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("p.yaml:"), std::string::npos) << s;

  s = ApplyConfigYaml("\n\nnoncontiguous: sometimes\n", "p.yaml", &c);
  EXPECT_NE(s.message().find("p.yaml:3:"), std::string::npos) << s;
}

// health.stale_after: 3 s to 10 minutes (the health stream re-sends every third of it), named
// with its line when outside.
TEST(ConfigTest, StaleAfterHasItsRange) {
  Config c;
  ASSERT_TRUE(ApplyConfigYaml("health:\n  stale_after: 5s\n", "p.yaml", &c).ok());
  EXPECT_EQ(c.health.stale_after, std::chrono::milliseconds(5000));
  for (const char* bad : {"2s", "0", "11m"}) {
    SCOPED_TRACE(bad);
    const absl::Status s =
        ApplyConfigYaml(std::string("health:\n  stale_after: ") + bad + "\n", "p.yaml", &c);
    EXPECT_NE(s.message().find("p.yaml:2: health.stale_after: '"), std::string::npos) << s;
    EXPECT_NE(s.message().find("stale after 3s to 10m"), std::string::npos) << s;
    EXPECT_EQ(c.health.stale_after, std::chrono::milliseconds(5000)) << "applied anyway";
  }
}

// plugin/README.md#config-file: a poll period of 0 would spin the health thread on a core; below
// 100 ms or above a minute is refused, naming the key, the line and the range.
TEST(ConfigTest, PollPeriodOutsideItsRangeIsRefused) {
  for (const char* bad : {"0", "0ms", "99ms", "-1", "-5s", "61s", "250m"}) {
    SCOPED_TRACE(bad);
    Config c;
    const absl::Status s = ApplyConfigYaml(
        std::string("cdi: true\nhealth:\n  poll_period: ") + bad + "\n", "p.yaml", &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("p.yaml:3: health.poll_period: '"), std::string::npos) << s;
    EXPECT_EQ(c.health.poll_period, Config{}.health.poll_period) << "applied anyway";
    EXPECT_FALSE(c.cdi);
    if (bad[0] != '-') {
      EXPECT_NE(s.message().find("must be 100ms to 60s"), std::string::npos) << s;
    }
  }
  for (const auto& [good, ms] :
       {std::pair<const char*, int>{"100ms", 100}, {"100", 100}, {"1m", 60000}, {"250ms", 250}}) {
    Config c;
    ASSERT_TRUE(
        ApplyConfigYaml(std::string("health:\n  poll_period: ") + good + "\n", "p.yaml", &c).ok())
        << good;
    EXPECT_EQ(c.health.poll_period, std::chrono::milliseconds(ms)) << good;
  }
}

// The socket suffix names files the plugin removes: from the file, the environment or a flag, it
// is one path component or refused.
TEST(ConfigTest, SocketSuffixIsOnePathComponent) {
  for (const std::string bad : {"../x", "a/b", "..", "x\x1b[2J"}) {
    SCOPED_TRACE(bad);
    Config c;
    std::string yaml = bad;  // YAML spells ESC as \e inside double quotes
    if (const size_t esc = yaml.find('\x1b'); esc != std::string::npos) yaml.replace(esc, 1, "\\e");
    absl::Status s = ApplyConfigYaml("socket_suffix: \"" + yaml + "\"\n", "p.yaml", &c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("p.yaml:1: socket_suffix: the socket suffix"), std::string::npos)
        << s;
    s = ApplyEnvironment(EnvOf({{"NEURON_DP_SOCKET_SUFFIX", bad}}), &c);
    EXPECT_NE(s.message().find("NEURON_DP_SOCKET_SUFFIX: "), std::string::npos) << s;
    Flags flags;
    flags.socket_suffix = bad;
    EXPECT_NE(ResolveConfig(flags, EnvOf({})).status().message().find("--socket-suffix: "),
              std::string::npos);
    EXPECT_EQ(c.socket_suffix, "");
  }
}

TEST(ConfigTest, FlagsBeatEnvironmentWhichBeatsTheFile) {
  TempDir tmp;
  const auto file = tmp.path() / "p.yaml";
  WriteFile(file, "noncontiguous: reject\ncdi: true\nsocket_suffix: fromfile\nlisten: 1.2.3.4:1\n");
  Flags flags;
  flags.config_file = file.string();
  flags.listen = "127.0.0.1:0";
  absl::StatusOr<Config> c = ResolveConfig(flags, EnvOf({{"NEURON_DP_NONCONTIGUOUS", "warn"},
                                                         {"NEURON_DP_LISTEN", "0.0.0.0:1"},
                                                         {"NEURON_ROOT", "/host"},
                                                         {"NEURON_LOGICAL_NC_CONFIG", "1"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->noncontiguous, NonContiguousPolicy::kWarn) << "environment beats the file";
  EXPECT_TRUE(c->cdi) << "the file beats the default";
  EXPECT_EQ(c->socket_suffix, "fromfile");
  EXPECT_EQ(c->listen, "127.0.0.1:0") << "the flag beats environment and file";
  EXPECT_EQ(c->root, "/host");
  EXPECT_EQ(c->lnc, 1);

  flags.lnc = "2";
  flags.resources = "neuron,efa";
  c = ResolveConfig(flags, EnvOf({{"NEURON_LOGICAL_NC_CONFIG", "1"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->lnc, 2);
  EXPECT_FALSE(c->enabled(Resource::kNeuronCore));

  // The config file can come from the environment too.
  c = ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_CONFIG", file.string()}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->socket_suffix, "fromfile");
}

TEST(ConfigTest, BadEnvironmentAndFlagsAreNamed) {
  absl::StatusOr<Config> c = ResolveConfig(Flags{}, EnvOf({{"NEURON_LOGICAL_NC_CONFIG", "3"}}));
  EXPECT_NE(c.status().message().find("NEURON_LOGICAL_NC_CONFIG"), std::string::npos);
  c = ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_RESOURCES", "neuron,gpu"}}));
  EXPECT_NE(c.status().message().find("gpu"), std::string::npos);
  Flags f;
  f.noncontiguous = "never";
  c = ResolveConfig(f, EnvOf({}));
  EXPECT_NE(c.status().message().find("--noncontiguous"), std::string::npos);
  f = Flags{};
  f.lnc = "0";
  c = ResolveConfig(f, EnvOf({}));
  EXPECT_EQ(c.status().message(), "--lnc: '0' is not 1 or 2");
  f = Flags{};
  f.config_file = "/nonexistent/plugin.yaml";
  c = ResolveConfig(f, EnvOf({}));
  EXPECT_NE(c.status().message().find("/nonexistent/plugin.yaml"), std::string::npos);
}

TEST(ConfigTest, DeviceNumberingFromFileEnvironmentAndFlag) {
  Config c;
  ASSERT_TRUE(ApplyConfigYaml("device_numbering: container\n", "p.yaml", &c).ok());
  EXPECT_EQ(c.device_numbering, DeviceNumbering::kContainer);
  ASSERT_TRUE(ApplyConfigYaml("device_numbering: host\n", "p.yaml", &c).ok());
  EXPECT_EQ(c.device_numbering, DeviceNumbering::kHost);

  TempDir tmp;
  const auto file = tmp.path() / "p.yaml";
  WriteFile(file, "device_numbering: container\n");
  Flags flags;
  flags.config_file = file.string();
  absl::StatusOr<Config> r = ResolveConfig(flags, EnvOf({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_numbering, DeviceNumbering::kContainer) << "the file beats the default";
  r = ResolveConfig(flags, EnvOf({{"NEURON_DP_DEVICE_NUMBERING", "host"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_numbering, DeviceNumbering::kHost) << "environment beats the file";
  r = ResolveConfig(flags, EnvOf({{"NEURON_DP_DEVICE_NUMBERING", ""}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_numbering, DeviceNumbering::kContainer) << "an empty variable is unset";
  flags.device_numbering = "host";
  r = ResolveConfig(flags, EnvOf({{"NEURON_DP_DEVICE_NUMBERING", "container"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->device_numbering, DeviceNumbering::kHost) << "the flag beats the environment";
  EXPECT_EQ(DeviceNumberingName(DeviceNumbering::kContainer), "container");
}

TEST(ConfigTest, BadDeviceNumberingIsNamedWhereverItComesFrom) {
  Config c;
  absl::Status s = ApplyConfigYaml("cdi: true\n\ndevice_numbering: pod\n", "p.yaml", &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("p.yaml:3: device_numbering: 'pod' is not host or container"),
            std::string::npos)
      << s;
  EXPECT_FALSE(c.cdi) << "a bad file is applied whole or not at all";
  s = ApplyConfigYaml("device_numbering: [host]\n", "p.yaml", &c);
  EXPECT_NE(s.message().find("p.yaml:1: device_numbering: expected a value"), std::string::npos)
      << s;

  absl::StatusOr<Config> r =
      ResolveConfig(Flags{}, EnvOf({{"NEURON_DP_DEVICE_NUMBERING", "Container"}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "NEURON_DP_DEVICE_NUMBERING: 'Container' is not host or container");
  Flags f;
  f.device_numbering = "0";
  r = ResolveConfig(f, EnvOf({}));
  EXPECT_EQ(r.status().message(), "--device-numbering: '0' is not host or container");
}

TEST(ConfigTest, Durations) {
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("3s"), std::chrono::milliseconds(3000));
  EXPECT_EQ(*ParseDuration("2m"), std::chrono::milliseconds(120000));
  EXPECT_EQ(*ParseDuration("40"), std::chrono::milliseconds(40));
  EXPECT_FALSE(ParseDuration("fast").ok());
  EXPECT_FALSE(ParseDuration("5h").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
}

}  // namespace
}  // namespace neuron::plugin

// Every binary's --version and --help, and the build info the plugin's /metrics carries
// (core/base/version.h): the same version, a revision that is the source tree's commit as git
// itself reports it (asked here independently of the build), text for users only; and the
// plugin's --log.format=json and `promtool check metrics` on its output.
#include <gtest/gtest.h>

#include <cctype>
#include <ctime>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/http_client.h"
#include "tests/support/json_logs.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/temp_dir.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::ReadFile;
using testing::RunCommand;
using testing::RunResult;
using testing::TempDir;

struct Binary {
  std::string program;
  std::string path;
};
const std::vector<Binary>& Binaries() {
  static const std::vector<Binary> b = {{"neuron-device-plugin", NEURON_PLUGIN_BIN},
                                        {"neuron-exporter", NEURON_EXPORTER_BIN},
                                        {"neuron-ls", NEURON_LS_BIN},
                                        {"neuron-top", NEURON_TOP_BIN},
                                        {"neuron-sim", NEURON_SIM_BIN}};
  return b;
}

// The short commit id of the source tree, from git (not from the build), or "unknown" when the
// source directory is not a git checkout of its own.
std::string SourceRevision(const fs::path& work) {
  const fs::path source = NEURON_SOURCE_DIR;
  const RunResult r =
      RunCommand(work, {"git", "-C", source.string(), "rev-parse", "--short", "HEAD"},
                 {"GIT_CEILING_DIRECTORIES=" + source.parent_path().string()});
  if (r.code != 0 || r.out.empty()) return "unknown";
  return r.out.substr(0, r.out.find('\n'));
}

// The build's revision as git would name the commit: the id, "-dirty" when the tree differed.
void ExpectRevision(const std::string& revision, const std::string& expected) {
  if (expected == "unknown") {
    EXPECT_EQ(revision, "unknown");
  } else {
    EXPECT_TRUE(revision == expected || revision == expected + "-dirty")
        << revision << " is not commit " << expected;
  }
}

std::string TodayUtc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

TEST(VersionTest, EveryBinaryPrintsTheSameVersionRevisionAndBuild) {
  TempDir dir("version");
  const std::string expected = SourceRevision(dir.path());
  static const std::regex kShape(
      "([a-z-]+), version ([0-9.]+) \\(revision: ([0-9a-z-]+)\\)\n"
      "  build date: ([0-9]{4}-[0-9]{2}-[0-9]{2})\n"
      "  compiler: ((gcc|clang) [0-9]+\\.[0-9]+\\.[0-9]+)\n");
  std::set<std::string> builds;  // revision, date and compiler: one build, one answer
  for (const Binary& b : Binaries()) {
    const RunResult r = RunCommand(dir.path(), {b.path, "--version"});
    EXPECT_EQ(r.code, 0) << b.program << ": " << r.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(r.out, m, kShape)) << b.program << ":\n" << r.out;
    EXPECT_EQ(m[1], b.program);
    EXPECT_EQ(m[2], NEURON_PROJECT_VERSION) << b.program;
    ExpectRevision(m[3], expected);
    // Not later than today (a SOURCE_DATE_EPOCH build says an earlier day).
    EXPECT_LE(m[4].str(), TodayUtc()) << b.program;
    builds.insert(m[3].str() + " " + m[4].str() + " " + m[5].str());
  }
  EXPECT_EQ(builds.size(), 1u) << ::testing::PrintToString(builds);
}

TEST(VersionTest, HelpSpeaksToUsersAndShowsExamples) {
  TempDir dir("help");
  for (const Binary& b : Binaries()) {
    const RunResult r = RunCommand(dir.path(), {b.path, "--help"});
    EXPECT_EQ(r.code, 0) << b.program << ": " << r.err;
    EXPECT_NE(r.out.find("Examples:"), std::string::npos) << b.program << ":\n" << r.out;
    EXPECT_NE(r.out.find("--version"), std::string::npos) << b.program;
    for (const char* internal :
         {"decision", "issue", "\xc2\xa7", "DESIGN", "docs/", "readme", ".md"}) {
      std::string lower = r.out;
      if (std::string_view(internal) != "DESIGN") {
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      EXPECT_EQ(lower.find(internal), std::string::npos)
          << b.program << " --help says \"" << internal << "\":\n"
          << r.out;
    }
  }
}

// A bad --log.level or --log.format is a usage error naming the value, before anything starts;
// --log-level is the old spelling of --log.level.
TEST(VersionTest, BadLogFlagsExitTwoNamingTheValue) {
  TempDir dir("log_flags");
  for (const char* bin : {NEURON_PLUGIN_BIN, NEURON_EXPORTER_BIN}) {
    for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
             {"--log.level=loud"}, {"--log-level", "loud"}, {"--log.format=xml"}}) {
      std::vector<std::string> args = {bin, "--root", dir.path().string()};
      args.insert(args.end(), flags.begin(), flags.end());
      const RunResult r = RunCommand(dir.path(), args);
      EXPECT_EQ(r.code, 2) << bin << " " << flags[0] << ": " << r.out << r.err;
      const std::string value = flags[0] == "--log.format=xml" ? "xml" : "loud";
      EXPECT_NE(r.err.find(value), std::string::npos) << bin << ": " << r.err;
    }
  }
}

// The plugin on a simulated node without a kubelet: it serves its endpoints anyway. Its
// /metrics has neuron_plugin_build_info with this build's values and passes promtool; its JSON
// logs parse line by line.
TEST(VersionTest, PluginBuildInfoPromtoolAndJsonLogs) {
  TempDir dir("plugin_version");
  testing::SimNode sim(
      {.sim_bin = NEURON_SIM_BIN, .root = dir.path() / "root", .logs = dir.path()});
  ASSERT_TRUE(sim.Up("trn1.2xlarge")) << sim.Log();
  fs::create_directories(dir.path() / "kubelet");
  const fs::path out = dir.path() / "plugin.out", err = dir.path() / "plugin.err";
  const pid_t pid = testing::Spawn(
      {NEURON_PLUGIN_BIN, "--root", sim.root().string(), "--kubelet-dir",
       (dir.path() / "kubelet").string(), "--listen", "127.0.0.1:0", "--log.format=json"},
      out, err);
  int port = 0;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        port = testing::ListeningPort(ReadFile(out));
        return port > 0;
      },
      60s))
      << ReadFile(out) << ReadFile(err);
  const testing::HttpResult metrics = testing::HttpGet(port, "/metrics");
  EXPECT_EQ(testing::Stop(pid, 30s), 0);
  ASSERT_EQ(metrics.status, 200);

  static const std::regex kBuildInfo("\nneuron_plugin_build_info\\{([^}]*)\\} 1\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(metrics.body, m, kBuildInfo)) << metrics.body;
  const std::string labels = m[1];
  EXPECT_NE(labels.find("version=\"" NEURON_PROJECT_VERSION "\""), std::string::npos) << labels;
  static const std::regex kRevision("revision=\"([^\"]+)\"");
  std::smatch rev;
  ASSERT_TRUE(std::regex_search(labels, rev, kRevision)) << labels;
  ExpectRevision(rev[1], SourceRevision(dir.path()));
  EXPECT_TRUE(std::regex_search(labels, std::regex("compiler=\"(gcc|clang) [0-9.]+\""))) << labels;

  if (testing::RunCommand(dir.path(), {"sh", "-c", "command -v promtool"}).code != 0) {
    ADD_FAILURE() << "promtool is not installed (scripts/install-deps.sh)";
  } else {
    testing::WriteFile(dir.path() / "plugin.prom", metrics.body);
    const RunResult check = RunCommand(
        dir.path(),
        {"sh", "-c", "promtool check metrics < " + (dir.path() / "plugin.prom").string()});
    EXPECT_EQ(check.code, 0) << check.out << check.err;
  }

  const testing::JsonLogLines logs = testing::ParseJsonLogLines(ReadFile(err));
  EXPECT_TRUE(logs.ok()) << "not a JSON log record: " << logs.bad_line;
  EXPECT_GE(logs.records.size(), 2u) << ReadFile(err);
}

}  // namespace
}  // namespace neuron

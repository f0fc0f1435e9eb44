// Where neuron-top logs and how it opens the file (top/log_file.h): never through a symlink or
// into a file someone else made, and never at a fixed name in a shared directory. The unit tests
// use top/log_file.h directly; the last one runs the real binary with a link planted at the
// fixed path neuron-top used to fall back to, /tmp/neuron-top-UID.log.
#include "top/log_file.h"

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "tests/support/process.h"
#include "tests/support/temp_dir.h"

namespace neuron::top {
namespace {

namespace fs = std::filesystem;
using ::neuron::testing::ReadFile;
using ::neuron::testing::TempDir;
using ::neuron::testing::WriteFile;

// An environment with XDG_STATE_HOME, HOME and TMPDIR as given ("" for unset) and nothing else.
GetEnvFn Env(const std::string& xdg, const std::string& home, const std::string& tmpdir) {
  return [=](const char* name) -> std::optional<std::string> {
    const std::string_view n(name);
    const std::string v = n == "XDG_STATE_HOME" ? xdg
                          : n == "HOME"         ? home
                          : n == "TMPDIR"       ? tmpdir
                                                : "";
    if (v.empty()) return std::nullopt;
    return v;
  };
}

mode_t Mode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST(LogFileTest, DefaultIsTheUsersStateDirectoryElseAFreshPrivateDirectory) {
  TempDir tmp("logfile");
  EXPECT_EQ(*DefaultLogFile(Env("/s", "/h", "")), "/s/neuron-top.log");
  EXPECT_EQ(*DefaultLogFile(Env("", "/h", "")), "/h/.local/state/neuron-top.log");
  const absl::StatusOr<std::string> a = DefaultLogFile(Env("", "", tmp.path().string()));
  const absl::StatusOr<std::string> b = DefaultLogFile(Env("", "", tmp.path().string()));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_NE(*a, *b) << "a name that can be guessed";
  for (const fs::path& file : {fs::path(*a), fs::path(*b)}) {
    EXPECT_EQ(file.parent_path().parent_path(), tmp.path());
    EXPECT_TRUE(file.parent_path().filename().string().starts_with("neuron-top-")) << file;
    EXPECT_EQ(Mode(file.parent_path()), 0700u);
    EXPECT_EQ(file.filename(), "neuron-top.log");
  }
}

TEST(LogFileTest, OpensARegularFileOfOurOwnAndNothingElse) {
  TempDir tmp("logfile");
  // Missing directories are made private; the file is created 0600 and appended to.
  const fs::path file = tmp.path() / "a/b/neuron-top.log";
  {
    absl::StatusOr<UniqueFd> fd = OpenLogFile(file.string());
    ASSERT_TRUE(fd.ok()) << fd.status();
    auto sink = MakeFdSink(*std::move(fd));
    sink->log(spdlog::details::log_msg("t", spdlog::level::info, "first"));
  }
  EXPECT_EQ(Mode(tmp.path() / "a"), 0700u);
  EXPECT_EQ(Mode(tmp.path() / "a/b"), 0700u);
  EXPECT_EQ(Mode(file), 0600u);
  ASSERT_TRUE(OpenLogFile(file.string()).ok());
  EXPECT_NE(ReadFile(file).find("first"), std::string::npos) << "not appended";

  // A symlink in its place is not followed, whatever it points at.
  const fs::path target = tmp.path() / "target";
  WriteFile(target, "precious\n");
  const fs::path link = tmp.path() / "link.log";
  fs::create_symlink(target, link);
  absl::StatusOr<UniqueFd> through = OpenLogFile(link.string());
  EXPECT_EQ(through.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(through.status().message().find("symlink: not followed"), std::string::npos)
      << through.status();
  EXPECT_EQ(ReadFile(target), "precious\n");
  // A dangling one is not created through either.
  fs::create_symlink(tmp.path() / "made-through-link", tmp.path() / "dangling.log");
  EXPECT_FALSE(OpenLogFile((tmp.path() / "dangling.log").string()).ok());
  EXPECT_FALSE(fs::exists(tmp.path() / "made-through-link"));
  // A FIFO neither blocks the open nor is written.
  const fs::path fifo = tmp.path() / "fifo.log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(OpenLogFile(fifo.string()).ok());
}

// The old fallback without HOME was the fixed /tmp/neuron-top-UID.log, which anyone could plant a
// link at. The binary, run without XDG_STATE_HOME and HOME, must leave the link's target alone and
// log into a private directory of its own under $TMPDIR.
TEST(LogFileTest, NeuronTopNeverWritesThroughALinkAtTheOldFixedPath) {
  TempDir work("logfile");
  const fs::path old = fs::path("/tmp") / ("neuron-top-" + std::to_string(::getuid()) + ".log");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(old, ec))) GTEST_SKIP() << old << " exists; not replacing it";
  const fs::path target = work.path() / "target";
  WriteFile(target, "");
  fs::create_symlink(target, old);
  const fs::path tmpdir = work.path() / "tmp";
  fs::create_directories(tmpdir);
  const ::neuron::testing::RunResult r = ::neuron::testing::RunCommand(
      work.path(),
      {"/usr/bin/env", "-u", "HOME", "-u", "XDG_STATE_HOME", "TMPDIR=" + tmpdir.string(),
       NEURON_TOP_BIN, "--root", (work.path() / "no-node").string(), "--snapshot"});
  fs::remove(old);
  EXPECT_NE(r.code, -1) << r.err;
  EXPECT_EQ(ReadFile(target), "") << "wrote through the planted link";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(tmpdir)) dirs.push_back(e.path());
  ASSERT_EQ(dirs.size(), 1u) << "no private log directory under TMPDIR; stderr: " << r.err;
  EXPECT_TRUE(dirs[0].filename().string().starts_with("neuron-top-")) << dirs[0];
  EXPECT_EQ(Mode(dirs[0]), 0700u);
  EXPECT_NE(ReadFile(dirs[0] / "neuron-top.log").find("neuron-top"), std::string::npos);
}

}  // namespace
}  // namespace neuron::top

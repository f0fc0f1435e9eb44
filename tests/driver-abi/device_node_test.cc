// The simulated device node as programs written apart from the agent see it, against
// docs/driver-interface.md: every stat variant says ROOT/dev/neuronN is the character device its
// class device's `dev` file names (#device-nodes; deviation D8 of
// driver-sim/README.md#deviations), Python's mmap module maps a running workload's datastore
// through it, the driver's npid_attach / npid_detach lines reach
// the kernel log as neuron_pid.c prints them, and a process's last close costs it the flush's
// ~10 ms without holding up anyone else (#abi-open-semantics). This test process runs under the
// interposer (its ctest environment preloads it, as `neuron-sim exec` would).
#include <dlfcn.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.h"
#include "core/driver/driver_abi.h"
#include "tests/support/driver_log.h"
#include "tests/support/subprocess.h"
#include "tests/support/suite_node.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::neuron::testing::DriverLinesOf;
using ::neuron::testing::KmsgRecord;
using ::neuron::testing::ReadFile;
using ::neuron::testing::ReadKmsg;
using ::testing::HasSubstr;

// The struct version the old entry points take (_STAT_VER, gone from glibc's headers).
#if defined(__x86_64__)
constexpr int kStatVer = 1;
#else
constexpr int kStatVer = 0;
#endif

// glibc before 2.33 had programs call __xstat and friends, and 2.36 still exports them; no header
// declares them any more. Looked up as a program linked against them would bind: the first
// definition in the process, the interposer's when it is preloaded.
template <typename Fn>
Fn* OldEntry(const char* name) {
  void* sym = ::dlsym(RTLD_DEFAULT, name);
  EXPECT_NE(sym, nullptr) << name;
  return reinterpret_cast<Fn*>(sym);
}

// A child that opens `node` read-only and waits to be killed: its PID, and what its open
// returned (the fd, or -errno).
struct Opener {
  pid_t pid = -1;
  int fd = -1;
};

Opener ForkOpener(const fs::path& node) {
  int ready[2];
  if (::pipe(ready) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(node.c_str(), O_RDONLY);
    const int answer = fd >= 0 ? fd : -errno;
    (void)!::write(ready[1], &answer, sizeof(answer));
    for (;;) ::pause();
  }
  ::close(ready[1]);
  int answer = -EIO;
  if (::read(ready[0], &answer, sizeof(answer)) != static_cast<ssize_t>(sizeof(answer))) {
    answer = -EIO;
  }
  ::close(ready[0]);
  return {child, answer};
}

void Kill(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// A simulated inf2.24xlarge (six devices) for the suite; each test uses its own devices.
class DeviceNodeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_ = new neuron::testing::SuiteNode("devnode", "inf2.24xlarge", NEURON_SIM_BIN);
    node_ = &suite_->node();
    dir_ = &suite_->dir();
    ASSERT_TRUE(node_->ready()) << node_->Log();
  }
  static void TearDownTestSuite() { delete suite_; }

  static fs::path Node(int d) { return node_->paths().DevNeuron(d); }
  static fs::path KmsgFile() { return node_->paths().Kmsg(); }
  // What the class device's `dev` file says, read here independently of the interposer.
  static dev_t Expected(int d) {
    const std::string text = ReadFile(node_->Device(d) / "dev");
    const size_t colon = text.find(':');
    EXPECT_NE(colon, std::string::npos) << text;
    return makedev(std::stoul(text.substr(0, colon)), std::stoul(text.substr(colon + 1)));
  }

  static inline neuron::testing::SuiteNode* suite_ = nullptr;
  static inline neuron::testing::TempDir* dir_ = nullptr;
  static inline neuron::testing::SimNode* node_ = nullptr;
};

// The fields a device node's stat carries, whichever struct they came in.
struct Seen {
  mode_t mode = 0;
  dev_t rdev = 0;
  off_t size = -1;
};

template <typename Stat>
Seen Of(int rc, const Stat& st) {
  if (rc != 0) return {};
  return {st.st_mode, st.st_rdev, static_cast<off_t>(st.st_size)};
}

void ExpectDevice(const Seen& s, dev_t expected, const std::string& how) {
  EXPECT_TRUE(S_ISCHR(s.mode)) << how << ": mode " << std::oct << s.mode;
  EXPECT_EQ(major(s.rdev), major(expected)) << how;
  EXPECT_EQ(minor(s.rdev), minor(expected)) << how;
  EXPECT_EQ(s.size, 0) << how;
}

TEST_F(DeviceNodeTest, EveryStatVariantSaysCharacterDevice) {
  const int d = 1;
  const std::string path = Node(d).string();
  const dev_t want = Expected(d);
  EXPECT_EQ(minor(want), 1u);
  // The number agrees with the sysfs char-device link the kernel makes.
  EXPECT_TRUE(fs::exists(node_->root() / "sys/dev/char" /
                         (std::to_string(major(want)) + ":" + std::to_string(minor(want)))));
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  const UniqueFd dev_dir(::open(Node(d).parent_path().c_str(), O_RDONLY | O_DIRECTORY));
  const std::string name = Node(d).filename().string();
  struct stat st {};
  struct stat64 st64 {};
  ExpectDevice(Of(::stat(path.c_str(), &st), st), want, "stat");
  ExpectDevice(Of(::stat64(path.c_str(), &st64), st64), want, "stat64");
  ExpectDevice(Of(::lstat(path.c_str(), &st), st), want, "lstat");
  ExpectDevice(Of(::lstat64(path.c_str(), &st64), st64), want, "lstat64");
  ExpectDevice(Of(::fstat(fd.get(), &st), st), want, "fstat");
  ExpectDevice(Of(::fstat64(fd.get(), &st64), st64), want, "fstat64");
  ExpectDevice(Of(::fstatat(AT_FDCWD, path.c_str(), &st, 0), st), want, "fstatat");
  ExpectDevice(Of(::fstatat(dev_dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW), st), want,
               "fstatat relative");
  ExpectDevice(Of(::fstatat(fd.get(), "", &st, AT_EMPTY_PATH), st), want, "fstatat empty");
  ExpectDevice(Of(::fstatat64(dev_dir.get(), name.c_str(), &st64, 0), st64), want, "fstatat64");
  using PathStat = int(int, const char*, struct stat*);
  using PathStat64 = int(int, const char*, struct stat64*);
  using FdStat = int(int, int, struct stat*);
  using FdStat64 = int(int, int, struct stat64*);
  using AtStat = int(int, int, const char*, struct stat*, int);
  using AtStat64 = int(int, int, const char*, struct stat64*, int);
  for (const char* name : {"__xstat", "__lxstat"}) {
    ExpectDevice(Of(OldEntry<PathStat>(name)(kStatVer, path.c_str(), &st), st), want, name);
  }
  for (const char* name : {"__xstat64", "__lxstat64"}) {
    ExpectDevice(Of(OldEntry<PathStat64>(name)(kStatVer, path.c_str(), &st64), st64), want, name);
  }
  ExpectDevice(Of(OldEntry<FdStat>("__fxstat")(kStatVer, fd.get(), &st), st), want, "__fxstat");
  ExpectDevice(Of(OldEntry<FdStat64>("__fxstat64")(kStatVer, fd.get(), &st64), st64), want,
               "__fxstat64");
  ExpectDevice(
      Of(OldEntry<AtStat>("__fxstatat")(kStatVer, dev_dir.get(), name.c_str(), &st, 0), st), want,
      "__fxstatat");
  ExpectDevice(
      Of(OldEntry<AtStat64>("__fxstatat64")(kStatVer, AT_FDCWD, path.c_str(), &st64, 0), st64),
      want, "__fxstatat64");
  for (const int flags : {0, AT_STATX_DONT_SYNC}) {
    struct statx stx {};
    ASSERT_EQ(::statx(AT_FDCWD, path.c_str(), flags, STATX_BASIC_STATS, &stx), 0);
    ExpectDevice({stx.stx_mode, makedev(stx.stx_rdev_major, stx.stx_rdev_minor),
                  static_cast<off_t>(stx.stx_size)},
                 want, "statx");
    ASSERT_EQ(::statx(fd.get(), "", AT_EMPTY_PATH | flags, STATX_TYPE, &stx), 0);
    EXPECT_TRUE(S_ISCHR(stx.stx_mode)) << "statx empty path";
    EXPECT_EQ(makedev(stx.stx_rdev_major, stx.stx_rdev_minor), want) << "statx empty path";
  }
  // std::filesystem goes through the same calls.
  EXPECT_TRUE(fs::is_character_file(path));
  EXPECT_FALSE(fs::is_regular_file(path));
}

TEST_F(DeviceNodeTest, LinksAndProcFdLinksLeadToTheDevice) {
  const int d = 2;
  const dev_t want = Expected(d);
  const fs::path link = dir_->path() / "my-accelerator";
  fs::create_symlink(Node(d), link);
  struct stat st {};
  ExpectDevice(Of(::stat(link.c_str(), &st), st), want, "stat of a symlink");
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));  // the symlink itself stays one

  // Another process's descriptor, through its /proc/PID/fd link (how a monitor finds holders).
  const Opener child = ForkOpener(Node(d));
  ASSERT_GE(child.fd, 0);
  const std::string proc_link =
      "/proc/" + std::to_string(child.pid) + "/fd/" + std::to_string(child.fd);
  ExpectDevice(Of(::stat(proc_link.c_str(), &st), st), want, "stat of /proc/PID/fd/N");
  struct statx stx {};
  ASSERT_EQ(::statx(AT_FDCWD, proc_link.c_str(), AT_STATX_DONT_SYNC, STATX_TYPE, &stx), 0);
  EXPECT_TRUE(S_ISCHR(stx.stx_mode));
  EXPECT_EQ(makedev(stx.stx_rdev_major, stx.stx_rdev_minor), want);
  ASSERT_EQ(::lstat(proc_link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  Kill(child.pid);
}

// An empty file named like a device node is a device only under a root whose driver runs.
TEST_F(DeviceNodeTest, OtherFilesStayFiles) {
  const fs::path fake = dir_->path() / "noroot/dev/neuron0";
  fs::create_directories(fake.parent_path());
  neuron::testing::WriteFile(fake, "");
  struct stat st {};
  ASSERT_EQ(::stat(fake.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  ASSERT_EQ(::stat(KmsgFile().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// The client of docs/driver-interface.md#abi-reading-datastore in Python, run under
// `neuron-sim exec` next to a running workload: stat, open, GET_ALL_APPS_INFO through
// fcntl.ioctl, ACQUIRE_NEURON_DS, mmap.mmap of 262144 bytes at the offset, 'nds' signature.
TEST_F(DeviceNodeTest, APythonMonitorMapsARunningWorkloadsDatastore) {
  const pid_t workload = node_->StartWorkload("4");  // device 2's first core on inf2 (2 each)
  ASSERT_GT(workload, 0) << ReadFile(node_->logs() / "run.0.out.err");
  const neuron::testing::RunResult r = neuron::testing::RunCommand(
      dir_->path(),
      node_->UnderDriver(
          {"python3", NEURON_SOURCE_DIR "/tests/driver-abi/py_monitor.py", Node(2).string()}));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const dev_t want = Expected(2);
  EXPECT_THAT(r.out, HasSubstr("stat: character device " + std::to_string(major(want)) + ":2"));
  EXPECT_THAT(r.out, HasSubstr("datastore: pid " + std::to_string(workload) + " "));
  EXPECT_THAT(r.out, HasSubstr("signature: b'nds\\x00'"));
}

// neuron_pid.c: the first normal open of a process logs npid_attach with its slot at KERN_INFO, a
// second open of the same process logs nothing, the last close logs npid_detach; free-access
// opens log nothing. The text carries pr_fmt's "neuron:<function>: " before the driver's own
// "neuron:npid_attach: ".
TEST_F(DeviceNodeTest, AttachAndDetachReachTheKernelLogAsTheDriverPrintsThem) {
  const int d = 3;
  const pid_t me = ::getpid();
  {
    const UniqueFd free_access(::open(Node(d).c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(free_access.valid());
  }
  EXPECT_TRUE(DriverLinesOf(KmsgFile(), me).empty());
  UniqueFd first(::open(Node(d).c_str(), O_RDONLY | O_CLOEXEC));
  UniqueFd second(::open(Node(d).c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(first.valid() && second.valid());
  std::vector<KmsgRecord> lines = DriverLinesOf(KmsgFile(), me);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].priority, 6);
  EXPECT_EQ(lines[0].text,
            "neuron:npid_attach: neuron:npid_attach: pid=" + std::to_string(me) + ", slot=0");
  first.Reset();
  EXPECT_EQ(DriverLinesOf(KmsgFile(), me).size(), 1u);  // still attached through `second`
  second.Reset();
  lines = DriverLinesOf(KmsgFile(), me);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].priority, 6);
  EXPECT_EQ(lines[1].text,
            "neuron:npid_detach: neuron:npid_detach: pid=" + std::to_string(me) + ", slot=0");
}

// A second process takes the next free entry of the driver's table; the 17th is refused with
// ncdev_open's line and npid_print_usage's table.
TEST_F(DeviceNodeTest, SlotsAndTheRefusalAreLogged) {
  const int d = 4;
  std::vector<pid_t> children;
  for (int i = 0; i < NEURON_ABI_MAX_PROCESSES + 1; ++i) {
    const Opener child = ForkOpener(Node(d));
    children.push_back(child.pid);
    if (i < NEURON_ABI_MAX_PROCESSES) {
      EXPECT_GE(child.fd, 0) << "opener " << i;
    } else {
      EXPECT_EQ(child.fd, -EBUSY) << "the 17th";
    }
  }
  const std::vector<KmsgRecord> second = DriverLinesOf(KmsgFile(), children[1]);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_THAT(second[0].text, HasSubstr(", slot=1"));
  const std::string refused = "neuron:ncdev_open: nd" + std::to_string(d) + ": pid " +
                              std::to_string(children.back()) + " failed to open";
  const std::vector<KmsgRecord> all = ReadKmsg(KmsgFile());
  const auto it =
      std::find_if(all.begin(), all.end(), [&](const KmsgRecord& r) { return r.text == refused; });
  ASSERT_NE(it, all.end());
  EXPECT_EQ(it->priority, 3);
  ASSERT_GE(all.end() - it, 3 + NEURON_ABI_MAX_PROCESSES);
  EXPECT_EQ((it + 1)->text, "neuron:npid_print_usage: neuron: nd" + std::to_string(d) + " usage:");
  EXPECT_EQ((it + 3)->text,
            "neuron:npid_print_usage: pid " + std::to_string(children[0]) + " open count 1");
  for (const pid_t c : children) Kill(c);
}

// ncdev_flush sleeps ~10 ms in the process whose last fd it closes; the daemon meanwhile answers
// everyone else (the reply waits, not the loop).
TEST_F(DeviceNodeTest, TheLastCloseSleepsAndNobodyElseWaits) {
  const int d = 5;
  using Clock = std::chrono::steady_clock;
  const auto last_close = [&] {
    const int fd = ::open(Node(d).c_str(), O_RDONLY | O_CLOEXEC);
    const auto start = Clock::now();
    ::close(fd);
    return Clock::now() - start;
  };
  EXPECT_GE(last_close(), 10ms);
  {
    // Not the last fd of the process on it: no sleep (the quickest of five, as this machine's
    // load may stretch any one of them).
    const UniqueFd keep(::open(Node(d).c_str(), O_RDONLY | O_CLOEXEC));
    Clock::duration quickest = 1h;
    for (int i = 0; i < 5; ++i) {
      const int fd = ::open(Node(d).c_str(), O_RDONLY | O_CLOEXEC);
      const auto start = Clock::now();
      ::close(fd);
      quickest = std::min(quickest, Clock::now() - start);
    }
    EXPECT_LT(quickest, 10ms);
  }
  // A child closes its last fd 40 times (>= 400 ms asleep in the driver) while we ask.
  const pid_t child = ::fork();
  if (child == 0) {
    for (int i = 0; i < 40; ++i) ::close(::open(Node(d).c_str(), O_RDONLY | O_CLOEXEC));
    ::_exit(0);
  }
  const UniqueFd free_access(::open(Node(0).c_str(), O_WRONLY | O_CLOEXEC));
  std::vector<Clock::duration> asks;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    neuron_abi_basic_info info{};
    const auto start = Clock::now();
    ASSERT_EQ(::ioctl(free_access.get(), NEURON_ABI_DEVICE_BASIC_INFO, &info), 0);
    asks.push_back(Clock::now() - start);
  }
  ASSERT_GT(asks.size(), 20u);
  std::sort(asks.begin(), asks.end());
  EXPECT_LT(asks[asks.size() / 2], 5ms) << "median of " << asks.size() << " asks";
}

}  // namespace
}  // namespace neuron

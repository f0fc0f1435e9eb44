// The simulated driver's device ABI against what the Neuron driver does, written from
// docs/driver-interface.md "The device node" (and its source: the driver's neuron_cdev.c,
// neuron_ds.c, neuron_mmap.c), not from our implementation. This test process plays the
// runtime and the monitor itself: it runs under the interposer (its ctest environment preloads
// it, as `neuron-sim exec` would), and `neuron-sim up` is the driver.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/base/unique_fd.h"
#include "core/driver/datastore_layout.h"
#include "core/driver/driver_abi.h"
#include "core/model/catalog.h"
#include "tests/support/process.h"
#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/suite_node.h"

namespace neuron {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::neuron::testing::ReadFile;
using ::neuron::testing::WaitUntil;
using ::testing::Contains;
using ::testing::Not;

constexpr size_t kSlot = NEURON_ABI_DS_SIZE;

// A monitor's read-only mapping of the slot ACQUIRE_DS named, unmapped when it goes (or at
// Reset), so a failed assertion does not leave it behind.
class SlotMapping {
 public:
  SlotMapping(int fd, const neuron_abi_ds_info& info)
      : m_(::mmap(nullptr, kSlot, PROT_READ, MAP_SHARED, fd,
                  static_cast<off_t>(info.mmap_offset))) {}
  SlotMapping(const SlotMapping&) = delete;
  SlotMapping& operator=(const SlotMapping&) = delete;
  ~SlotMapping() { Reset(); }

  bool ok() const { return m_ != MAP_FAILED; }
  void* get() const { return m_; }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(m_); }
  void Reset() {
    if (ok()) ::munmap(m_, kSlot);
    m_ = MAP_FAILED;
  }

 private:
  void* m_;
};

// One simulated trn1.32xlarge for the whole suite; each test uses its own devices.
class DriverAbiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite_ = new neuron::testing::SuiteNode("abi", "trn1.32xlarge", NEURON_SIM_BIN,
                                            {"--reset-ms", "1500"});
    node_ = &suite_->node();
    ASSERT_TRUE(node_->ready()) << node_->Log();
  }
  static void TearDownTestSuite() {
    delete suite_;
    node_ = nullptr;
  }

  static fs::path Node(int d) { return node_->paths().DevNeuron(d); }
  static fs::path Sys(int d) { return node_->Device(d); }
  static UniqueFd Open(int d, int flags) {
    return UniqueFd(::open(Node(d).c_str(), flags | O_CLOEXEC));
  }

  // GET_ALL_APPS_INFO: the PIDs listed, or nullopt with errno set.
  static std::optional<std::vector<neuron_abi_app_info>> Apps(int fd, uint16_t flags = 0xF,
                                                              uint32_t capacity = 16) {
    std::vector<uint8_t> buf(16 + 16 * sizeof(neuron_abi_app_info), 0);
    neuron_abi_apps_header h{};
    h.flags = flags;
    h.capacity = capacity;
    std::memcpy(buf.data(), &h, sizeof(h));
    if (::ioctl(fd, NEURON_ABI_GET_ALL_APPS_INFO, buf.data()) != 0) return std::nullopt;
    std::memcpy(&h, buf.data(), sizeof(h));
    std::vector<neuron_abi_app_info> out(h.size);
    std::memcpy(out.data(), buf.data() + 16, h.size * sizeof(neuron_abi_app_info));
    return out;
  }
  static std::vector<pid_t> Pids(int fd) {
    std::vector<pid_t> pids;
    for (const neuron_abi_app_info& a : Apps(fd).value_or(std::vector<neuron_abi_app_info>{})) {
      pids.push_back(a.pid);
    }
    return pids;
  }
  // ACQUIRE_NEURON_DS: 0 or the errno.
  static int Acquire(int fd, pid_t pid, neuron_abi_ds_info* info) {
    *info = {};
    info->pid = pid;
    return ::ioctl(fd, NEURON_ABI_ACQUIRE_DS, info) == 0 ? 0 : errno;
  }
  static uint64_t Counter(const fs::path& file) { return std::stoull("0" + ReadFile(file)); }
  static uint64_t ResetRequests(int d) {
    return Counter(Sys(d) / "neuron_core0/stats/other_info/reset_req_count/total");
  }
  // Writes the sysfs reset file and waits until the driver handled the write: either way it
  // writes the file anew (the state it keeps, or RESET), so the inode changes.
  static void WriteReset(int d) {
    const fs::path file = Sys(d) / "reset";
    const uint64_t ino = Inode(file);
    {
      const UniqueFd fd(::open(file.c_str(), O_WRONLY | O_TRUNC));  // in place, as `echo 1 >`
      EXPECT_EQ(::write(fd.get(), "1\n", 2), 2);
    }  // closed, as `echo` closes it, before the driver's answer is awaited
    EXPECT_TRUE(WaitUntil([&] { return Inode(file) != ino; }, 10s)) << "reset write not seen";
  }
  static uint64_t Inode(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
  }

  static neuron::testing::SuiteNode* suite_;
  static neuron::testing::SimNode* node_;  // suite_'s
};

neuron::testing::SuiteNode* DriverAbiTest::suite_ = nullptr;
neuron::testing::SimNode* DriverAbiTest::node_ = nullptr;

// A forked process that runs `body`, says whether it succeeded, runs `then` (which may wait for
// the test) and waits to be killed.
class Child {
 public:
  explicit Child(const std::function<bool()>& body, const std::function<void()>& then = {}) {
    int ends[2];
    EXPECT_EQ(::pipe2(ends, O_CLOEXEC), 0);
    UniqueFd ready_read(ends[0]), ready_write(ends[1]);
    pid_ = ::fork();
    if (pid_ == 0) {
      ready_read.Reset();
      const char ok = body() ? 'y' : 'n';
      (void)!::write(ready_write.get(), &ok, 1);
      if (then) then();
      for (;;) ::pause();
    }
    ready_write.Reset();  // a child that dies before it answers then reads as EOF
    char ok = 0;
    EXPECT_EQ(::read(ready_read.get(), &ok, 1), 1);
    ok_ = ok == 'y';
  }
  ~Child() { Kill(SIGKILL); }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  bool ok() const { return ok_; }

 private:
  pid_t pid_ = -1;
  bool ok_ = false;
};

// A runtime: attaches, claims its slot and writes TIME_IN_USE of core 0. Its device fd goes to
// *held when given (the caller closes it when it wants the driver to release the slot), else it
// stays open until the process dies.
bool RuntimeBody(const fs::path& node, uint64_t busy_us, UniqueFd* held = nullptr) {
  UniqueFd fd(::open(node.c_str(), O_RDWR));
  const int raw = fd.get();
  if (held != nullptr) {
    *held = std::move(fd);
  } else {
    (void)fd.Release();
  }
  neuron_abi_ds_info info{};
  if (raw < 0 || ::ioctl(raw, NEURON_ABI_ACQUIRE_DS, &info) != 0) return false;
  void* m = ::mmap(nullptr, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, raw,
                   static_cast<off_t>(info.mmap_offset));
  if (m == MAP_FAILED) return false;
  auto* base = static_cast<uint8_t*>(m);
  std::memcpy(base, nds::kMagic, 4);
  std::memcpy(base + *nds::CoreCounterOffset(0, nds::kTimeInUse), &busy_us, 8);
  return true;
}

TEST_F(DriverAbiTest, GuessedRequestValuesAreRefused) {
  const UniqueFd fd = Open(0, O_RDONLY);
  ASSERT_GE(fd.get(), 0) << std::strerror(errno);
  neuron_abi_ds_info info{};
  // _IOWR('N', 71, 24): the struct's size instead of the pointer's falls through to EINVAL.
  EXPECT_EQ(::ioctl(fd.get(), 0xC0184E47u, &info), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_REQUEST(NEURON_ABI_DIR_READ, 250, 8), &info), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(DriverAbiTest, NormalOpensAttachAndFreeAccessOpensDoNot) {
  const UniqueFd fd = Open(1, O_RDONLY);
  ASSERT_GE(fd.get(), 0);
  Child writer([] { return ::open(Node(1).c_str(), O_WRONLY) >= 0; });
  ASSERT_TRUE(writer.ok());
  Child reader([] { return ::open(Node(1).c_str(), O_RDWR) >= 0; });
  ASSERT_TRUE(reader.ok());
  const std::vector<pid_t> pids = Pids(fd.get());
  EXPECT_THAT(pids, Contains(::getpid()));  // the monitor itself is listed
  EXPECT_THAT(pids, Contains(reader.pid()));
  EXPECT_THAT(pids, Not(Contains(writer.pid())));
}

TEST_F(DriverAbiTest, FreeAccessFdsReachOnlyTheMiscRequests) {
  const UniqueFd fd = Open(2, O_WRONLY);
  ASSERT_GE(fd.get(), 0);
  EXPECT_FALSE(Apps(fd.get()).has_value());
  EXPECT_EQ(errno, EINVAL);
  neuron_abi_ds_info info{};
  EXPECT_EQ(Acquire(fd.get(), 0, &info), EINVAL);
  uint8_t ready = 0;
  EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_DEVICE_READY, &ready), -1);
  neuron_abi_basic_info basic{};
  EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_DEVICE_BASIC_INFO, &basic), 0);
  EXPECT_EQ(basic.architecture, NEURON_ABI_ARCH_V2);  // Trainium1
  neuron_abi_bdf_ext bdf{};
  EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_DEVICE_BDF_EXT, &bdf), 0);
  // No read access: the VFS refuses to map.
  EXPECT_EQ(::mmap(nullptr, kSlot, PROT_READ, MAP_SHARED, fd.get(), 0), MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
}

TEST_F(DriverAbiTest, TheSeventeenthProcessGetsEbusy) {
  std::vector<std::unique_ptr<Child>> openers;
  for (int i = 0; i < NEURON_ABI_MAX_PROCESSES; ++i) {
    openers.push_back(std::make_unique<Child>([] { return ::open(Node(3).c_str(), O_RDWR) >= 0; }));
    ASSERT_TRUE(openers.back()->ok()) << "opener " << i;
  }
  Child seventeenth([] { return ::open(Node(3).c_str(), O_RDWR) < 0 && errno == EBUSY; });
  EXPECT_TRUE(seventeenth.ok());
  // A free-access open attaches nothing and still works.
  Child free_access([] { return ::open(Node(3).c_str(), O_WRONLY) >= 0; });
  EXPECT_TRUE(free_access.ok());
  openers.back()->Kill(SIGKILL);  // a slot frees when its process dies
  Child again([] { return ::open(Node(3).c_str(), O_RDWR) >= 0; });
  EXPECT_TRUE(again.ok());
}

TEST_F(DriverAbiTest, AppsInfoWritesAtMostCapacityEntriesAndOnlyTheFlagsAsked) {
  Child runtime([] { return RuntimeBody(Node(4), 1); });
  ASSERT_TRUE(runtime.ok());
  const UniqueFd fd = Open(4, O_RDONLY);
  ASSERT_GE(fd.get(), 0);
  std::vector<uint8_t> buf(16 + 3 * sizeof(neuron_abi_app_info), 0x5a);
  neuron_abi_apps_header h{};
  h.flags = 0;
  h.capacity = 1;
  std::memcpy(buf.data(), &h, sizeof(h));
  ASSERT_EQ(::ioctl(fd.get(), NEURON_ABI_GET_ALL_APPS_INFO, buf.data()), 0);
  std::memcpy(&h, buf.data(), sizeof(h));
  EXPECT_EQ(h.size, 1u);
  EXPECT_EQ(buf[16 + sizeof(neuron_abi_app_info)], 0x5a) << "wrote past the capacity";
  neuron_abi_app_info first{};
  std::memcpy(&first, buf.data() + 16, sizeof(first));
  EXPECT_EQ(first.nc_lock_map, 0);  // not asked for
  EXPECT_EQ(first.device_mem_size, 0u);
}

TEST_F(DriverAbiTest, AcquireWithPidZeroClaimsOneSlotAndOthersFindIt) {
  const UniqueFd fd = Open(5, O_RDWR);
  ASSERT_GE(fd.get(), 0);
  neuron_abi_ds_info a{}, b{}, none{};
  EXPECT_EQ(Acquire(fd.get(), ::getpid(), &none), ENOENT);  // nothing claimed yet
  ASSERT_EQ(Acquire(fd.get(), 0, &a), 0);
  ASSERT_EQ(Acquire(fd.get(), 0, &b), 0);
  EXPECT_EQ(a.mmap_offset, b.mmap_offset);  // one slot per process
  EXPECT_EQ(a.size, kSlot);
  Child monitor([] {
    const UniqueFd mfd(::open(Node(5).c_str(), O_RDONLY));
    neuron_abi_ds_info info{};
    info.pid = ::getppid();
    return mfd.get() >= 0 && ::ioctl(mfd.get(), NEURON_ABI_ACQUIRE_DS, &info) == 0;
  });
  EXPECT_TRUE(monitor.ok());
}

TEST_F(DriverAbiTest, MmapTakesExactlyTheSlotAndMonitorsCannotWrite) {
  Child runtime([] { return RuntimeBody(Node(6), 4242); });
  ASSERT_TRUE(runtime.ok());
  const UniqueFd fd = Open(6, O_RDONLY);
  neuron_abi_ds_info info{};
  ASSERT_EQ(Acquire(fd.get(), runtime.pid(), &info), 0);
  const off_t off = static_cast<off_t>(info.mmap_offset);
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd.get(), off), MAP_FAILED);
  EXPECT_EQ(::mmap(nullptr, kSlot, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), off), MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  const SlotMapping m(fd.get(), info);
  ASSERT_TRUE(m.ok()) << std::strerror(errno);
  uint64_t busy = 0;
  std::memcpy(&busy, m.bytes() + *nds::CoreCounterOffset(0, nds::kTimeInUse), 8);
  EXPECT_EQ(busy, 4242u);
}

TEST_F(DriverAbiTest, ReleaseOfAForeignPidIsANoOp) {
  Child runtime([] { return RuntimeBody(Node(7), 77); });
  ASSERT_TRUE(runtime.ok());
  const UniqueFd fd = Open(7, O_RDONLY);
  neuron_abi_ds_info info{};
  info.pid = runtime.pid();
  EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_RELEASE_DS, &info), 0);
  EXPECT_EQ(Acquire(fd.get(), runtime.pid(), &info), 0) << "the foreign slot was released";
}

// The owner's exit folds its counters into sysfs and zeroes the slot under a monitor's mapping.
TEST_F(DriverAbiTest, TheOwnersLastCloseFoldsAndZeroesItsSlot) {
  for (const int how : {SIGTERM, SIGKILL, 0}) {
    SCOPED_TRACE(how == 0 ? "close" : strsignal(how));
    const fs::path busy_file = Sys(8) / "neuron_core0/stats/other_info/nc_time_in_use/total";
    const uint64_t before = Counter(busy_file);
    int ends[2];
    ASSERT_EQ(::pipe(ends), 0);
    const UniqueFd go_read(ends[0]), go_write(ends[1]);
    UniqueFd runtime_fd;  // the child's device fd, in the child
    // With how == 0 the runtime closes its device fd when told and lives on: that last close
    // is what the driver folds and zeroes on.
    const auto then = [&] {
      char c;
      if (::read(go_read.get(), &c, 1) == 1 && how == 0) runtime_fd.Reset();
    };
    auto runtime = std::make_unique<Child>(
        [&runtime_fd] { return RuntimeBody(Node(8), 5000, &runtime_fd); }, then);
    ASSERT_TRUE(runtime->ok());
    const UniqueFd fd = Open(8, O_RDONLY);
    neuron_abi_ds_info info{};
    ASSERT_EQ(Acquire(fd.get(), runtime->pid(), &info), 0);
    const SlotMapping m(fd.get(), info);
    ASSERT_TRUE(m.ok());
    const pid_t pid = runtime->pid();
    (void)!::write(go_write.get(), "x", 1);
    if (how != 0) runtime->Kill(how);
    EXPECT_TRUE(WaitUntil([&] { return Acquire(fd.get(), pid, &info) == ENOENT; }, 10s));
    EXPECT_THAT(Pids(fd.get()), Not(Contains(pid)));
    const uint8_t* bytes = m.bytes();
    EXPECT_TRUE(std::all_of(bytes, bytes + kSlot, [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(Counter(busy_file), before + 5000);
  }
}

// Never-used slots go first, then the least recently cleared: the 17th runtime gets the first
// one's slot, so a stale mapping shows another PID's data.
TEST_F(DriverAbiTest, SlotsAreReusedLeastRecentlyClearedFirst) {
  std::optional<uint64_t> first;
  const UniqueFd fd = Open(9, O_RDONLY);
  for (int i = 0; i <= NEURON_ABI_MAX_PROCESSES; ++i) {
    Child runtime([] { return RuntimeBody(Node(9), 1); });
    ASSERT_TRUE(runtime.ok());
    neuron_abi_ds_info info{};
    ASSERT_EQ(Acquire(fd.get(), runtime.pid(), &info), 0);
    if (!first) first = info.mmap_offset;
    if (i == NEURON_ABI_MAX_PROCESSES) {
      EXPECT_EQ(info.mmap_offset, *first);
    } else if (i > 0) {
      EXPECT_NE(info.mmap_offset, *first);
    }
  }
}

TEST_F(DriverAbiTest, ForkedChildrenAreNotAttachedAndDoNotInheritMappings) {
  const UniqueFd fd = Open(10, O_RDWR);
  neuron_abi_ds_info info{};
  ASSERT_EQ(Acquire(fd.get(), 0, &info), 0);
  const SlotMapping mapping(fd.get(), info);
  ASSERT_TRUE(mapping.ok());
  Child child(
      [m = mapping.get()] { return ::madvise(m, kSlot, MADV_NORMAL) != 0 && errno == ENOMEM; });
  EXPECT_TRUE(child.ok()) << "the child has the parent's datastore mapping";
  EXPECT_THAT(Pids(fd.get()), Not(Contains(child.pid())));
  Child opener([] { return ::open(Node(10).c_str(), O_RDONLY) >= 0; });
  EXPECT_THAT(Pids(fd.get()), Contains(opener.pid()));
}

TEST_F(DriverAbiTest, CloseOnExecDetachesAtExec) {
  const UniqueFd fd = Open(11, O_RDONLY);
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  const UniqueFd go_read(ends[0]), go_write(ends[1]);
  const pid_t child = ::fork();
  if (child == 0) {
    // Left open on purpose: the exec below is what detaches it.
    if (::open(Node(11).c_str(), O_RDONLY | O_CLOEXEC) < 0) ::_exit(1);
    char c;
    (void)!::read(go_read.get(), &c, 1);
    ::execl("/bin/sleep", "sleep", "30", nullptr);
    ::_exit(2);
  }
  EXPECT_TRUE(WaitUntil([&] { return ::testing::Value(Pids(fd.get()), Contains(child)); }, 10s));
  (void)!::write(go_write.get(), "x", 1);
  EXPECT_TRUE(WaitUntil([&] { return !::testing::Value(Pids(fd.get()), Contains(child)); }, 10s));
  EXPECT_EQ(::kill(child, 0), 0) << "the process must still be alive";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST_F(DriverAbiTest, DupedFdsKeepTheProcessAttachedUntilTheLastClose) {
  Child child([] {
    UniqueFd a(::open(Node(12).c_str(), O_RDONLY));
    UniqueFd b(::dup(a.get()));
    // Kept open for the child's life: the process stays attached through it alone.
    const int c = ::fcntl(a.get(), F_DUPFD_CLOEXEC, 100);
    a.Reset();
    b.Reset();
    return c >= 0;
  });
  ASSERT_TRUE(child.ok());
  const UniqueFd fd = Open(12, O_RDONLY);
  EXPECT_THAT(Pids(fd.get()), Contains(child.pid()));
}

TEST_F(DriverAbiTest, AProgramClosingAllItsFdsKeepsTheDriverConnection) {
  Child child([] {
    const UniqueFd fd(::open(Node(13).c_str(), O_RDONLY));
    if (fd.get() < 0 || !Apps(fd.get()).has_value()) return false;
    // A daemon-style sweep of high fds: the interposer keeps its own above 600.
    ::close_range(500, ~0U, 0);
    // Raw closes of numbers it never opened, on purpose: that sweep is what is tested.
    for (int high = 500; high < 700; ++high) ::close(high);
    return Apps(fd.get()).has_value();
  });
  EXPECT_TRUE(child.ok());
}

TEST_F(DriverAbiTest, RelativeOpensAndSymlinksReachTheDevice) {
  const UniqueFd dir(::open((node_->root() / "dev").c_str(), O_RDONLY | O_DIRECTORY));
  const UniqueFd fd(::openat(dir.get(), "neuron14", O_RDONLY));
  ASSERT_GE(fd.get(), 0);
  EXPECT_TRUE(Apps(fd.get()).has_value());
  const fs::path link = suite_->dir().path() / "my-neuron";
  fs::create_symlink(Node(14), link);
  const UniqueFd via_link(::open(link.c_str(), O_RDONLY));
  EXPECT_TRUE(Apps(via_link.get()).has_value());
}

// A sysfs reset write is ignored while a normal fd or a mapping is live: the reset counter
// grows by one for the two writes below, the second made after everything was let go.
TEST_F(DriverAbiTest, SysfsResetIsIgnoredWhileTheDeviceIsOpenOrMapped) {
  const int d = 15;
  const uint64_t before = ResetRequests(d);
  UniqueFd fd = Open(d, O_RDWR);
  neuron_abi_ds_info info{};
  ASSERT_EQ(Acquire(fd.get(), 0, &info), 0);
  SlotMapping m(fd.get(), info);
  ASSERT_TRUE(m.ok());
  WriteReset(d);
  fd.Reset();  // the mapping alone still holds the device
  WriteReset(d);
  m.Reset();
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(Sys(d) / "reset") == "1\n"; }, 10s));
  WriteReset(d);
  EXPECT_TRUE(WaitUntil([&] { return ResetRequests(d) == before + 1; }, 10s));
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(Sys(d) / "reset") == "1\n"; }, 10s));
  EXPECT_EQ(ResetRequests(d), before + 1);
}

TEST_F(DriverAbiTest, OpensWaitOutAResetAndFailOnAnInvalidDevice) {
  const auto ctl = [](const std::vector<std::string>& words) {
    return node_->Ctl(words, 30s).code;
  };
  ASSERT_EQ(ctl({"reset", "--device", "0"}), 0);
  ASSERT_EQ(ReadFile(Sys(0) / "reset"), "0\n");  // RESET for 1.5 s
  {
    const UniqueFd fd = Open(0, O_RDONLY);  // waits while the device is in RESET
    ASSERT_GE(fd.get(), 0);
    EXPECT_EQ(ReadFile(Sys(0) / "reset"), "1\n");
    uint8_t ready = 0;
    EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_DEVICE_READY, &ready), 0);
    EXPECT_EQ(ready, 1);
  }
  ASSERT_EQ(ctl({"reset", "--device", "1", "--fail"}), 0);
  EXPECT_EQ(Open(1, O_RDONLY).get(), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(ctl({"reset", "--device", "1"}), 0);  // a good reset brings it back
  const UniqueFd again = Open(1, O_RDONLY);
  EXPECT_GE(again.get(), 0);
}

TEST_F(DriverAbiTest, BdfExtIsRelativeToTheDeviceTheFdWasOpenedOn) {
  const InstanceSpec& spec = **FindInstance("trn1.32xlarge");
  const UniqueFd fd = Open(3, O_WRONLY);
  for (uint32_t rel : {0u, 1u}) {
    neuron_abi_bdf_ext bdf{};
    bdf.nd_index = rel;
    ASSERT_EQ(::ioctl(fd.get(), NEURON_ABI_DEVICE_BDF_EXT, &bdf), 0);
    char text[32];
    std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", bdf.domain, bdf.bus, bdf.slot, bdf.func);
    EXPECT_EQ(text, spec.placement[3 + rel].bdf);
  }
  neuron_abi_bdf_ext bad{};
  bad.nd_index = 100;
  EXPECT_EQ(::ioctl(fd.get(), NEURON_ABI_DEVICE_BDF_EXT, &bad), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(DriverAbiTest, PrintkChecksSizeAndTerminationAndLogsAtKernErr) {
  const UniqueFd fd = Open(2, O_WRONLY);
  const auto printk = [&fd](const char* text, uint32_t size) {
    neuron_abi_printk p{reinterpret_cast<uint64_t>(text), size, 0};
    return ::ioctl(fd.get(), NEURON_ABI_PRINTK, &p) == 0 ? 0 : errno;
  };
  std::string big(600, 'x');
  EXPECT_EQ(printk(big.c_str(), 600), EFAULT);
  EXPECT_EQ(printk("no terminator", 5), EBADMSG);
  const char msg[] = "conformance says hello";
  EXPECT_EQ(printk(msg, sizeof(msg)), 0);
  EXPECT_TRUE(WaitUntil(
      [&] { return ReadFile(node_->root() / "dev/kmsg").find(msg) != std::string::npos; }, 10s));
}

// The driver's copy_to_user failures come back as a positive count, not -1/EFAULT.
TEST_F(DriverAbiTest, ABadPointerGivesAPositiveReturn) {
  const UniqueFd fd = Open(4, O_RDONLY);
  const int rc = ::ioctl(fd.get(), NEURON_ABI_GET_ALL_APPS_INFO, reinterpret_cast<void*>(8));
  EXPECT_GT(rc, 0);
}

}  // namespace
}  // namespace neuron

#include "driver-sim/runtime/rendezvous.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>

#include "driver-sim/driver/sim_paths.h"

namespace neuron::nrt {
namespace {

constexpr char kMagic[4] = {'n', 'r', 'c', 'c'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kSlotBytes = 512;
constexpr size_t kEntriesOffset = 64;
constexpr int kEntries = 14;
constexpr int64_t kWaitSliceNs = 20'000'000;  // re-check interrupts this often

struct Entry {
  uint64_t group_key;
  uint32_t seq;
  uint32_t pad;
  int64_t arrive_ns[2];
};
static_assert(sizeof(Entry) == 32);
static_assert(kEntriesOffset + kEntries * sizeof(Entry) == kSlotBytes);

int64_t SteadyNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

void FutexWait(uint32_t* addr, uint32_t expected, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
              static_cast<long>(timeout_ns % 1'000'000'000)};
  ::syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(uint32_t* addr) {
  ::syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

template <typename T>
std::atomic_ref<T> A(T& v) {
  return std::atomic_ref<T>(v);
}

std::string Sanitize(const std::string& id) {
  std::string out;
  for (char c : id) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '.' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "default" : out;
}

size_t DataOffset(uint32_t world) {
  const size_t end = kHeaderBytes + size_t{world} * kSlotBytes;
  return (end + 4095) / 4096 * 4096;
}

}  // namespace

struct CommWorld::Slot {
  uint32_t pid;
  int32_t device;
  uint32_t generation;  // futex word: bumped and woken on every change
  uint32_t last_pid;    // the process that last joined: a new one starts the counts afresh
  uint32_t pad[12];
  Entry entries[kEntries];
};

uint64_t CommWorld::GroupKey(const std::vector<uint32_t>& members) {
  std::vector<uint32_t> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  uint64_t h = 1469598103934665603ull;
  for (uint32_t r : sorted) {
    for (int i = 0; i < 4; ++i) {
      h ^= (r >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h | 1;
}

absl::StatusOr<std::shared_ptr<CommWorld>> CommWorld::Attach(const RootPaths& root,
                                                             const std::string& comm_id,
                                                             uint32_t world) {
  if (world == 0 || world > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        fmt::format("collective world size {} is outside 1-{}", world, kMaxWorldSize));
  }
  const std::filesystem::path dir = sim::SimRunDir(root) / "cc";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(fmt::format("mkdir {}: {}", dir.string(), ec.message()));
  const std::string path = (dir / fmt::format("{}.w{}", Sanitize(comm_id), world)).string();
  const size_t size = DataOffset(world) + size_t{world} * kRankDataBytes;
  for (int attempt = 0; attempt < 100; ++attempt) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd) return absl::InternalError(fmt::format("open {}: {}", path, strerror(errno)));
    ::flock(fd.get(), LOCK_EX);
    struct stat by_fd {
    }, by_path{};
    // The last leaver may have unlinked the file between our open and our lock: start over.
    if (::fstat(fd.get(), &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0 ||
        by_fd.st_ino != by_path.st_ino) {
      continue;  // closing fd drops the lock
    }
    // Every return below without a CommWorld closes fd, which drops the lock.
    if (by_fd.st_size == 0 && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
      return absl::InternalError(fmt::format("ftruncate {}: {}", path, strerror(errno)));
    }
    if (by_fd.st_size != 0 && static_cast<size_t>(by_fd.st_size) != size) {
      return absl::InvalidArgumentError(
          fmt::format("{} was made for another world size (NEURON_RT_ROOT_COMM_ID {} with "
                      "{} ranks)",
                      path, comm_id, world));
    }
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (map == MAP_FAILED) {
      return absl::InternalError(fmt::format("mmap {}: {}", path, strerror(errno)));
    }
    auto* base = static_cast<uint8_t*>(map);
    if (by_fd.st_size == 0) {
      std::memcpy(base, kMagic, 4);
      std::memcpy(base + 4, &kVersion, 4);
      std::memcpy(base + 8, &world, 4);
      const uint32_t slot = kSlotBytes;
      std::memcpy(base + 12, &slot, 4);
      const uint64_t data = DataOffset(world);
      std::memcpy(base + 16, &data, 8);
    }
    ::flock(fd.get(), LOCK_UN);
    std::shared_ptr<CommWorld> w(new CommWorld(path, std::move(fd), base, size, world));
    w->joined_.assign(world, 0);
    return w;
  }
  return absl::InternalError(fmt::format("could not open {} (removed repeatedly)", path));
}

CommWorld::~CommWorld() {
  const pid_t self = ::getpid();
  for (uint32_t r = 0; r < world_; ++r) {
    if (joined_[r] == 0) continue;
    Slot* s = SlotOf(r);
    uint32_t expected = static_cast<uint32_t>(self);
    A(s->pid).compare_exchange_strong(expected, 0);
    A(s->generation).fetch_add(1);
    FutexWakeAll(&s->generation);
  }
  ::flock(fd_.get(), LOCK_EX);
  bool anyone = false;
  for (uint32_t r = 0; r < world_ && !anyone; ++r) {
    const uint32_t pid = A(SlotOf(r)->pid).load();
    anyone = pid != 0 && Alive(static_cast<pid_t>(pid));
  }
  struct stat by_fd {
  }, by_path{};
  if (!anyone && ::fstat(fd_.get(), &by_fd) == 0 && ::stat(path_.c_str(), &by_path) == 0 &&
      by_fd.st_ino == by_path.st_ino) {
    ::unlink(path_.c_str());
    ::rmdir(std::filesystem::path(path_).parent_path().c_str());  // only if empty
  }
  ::munmap(base_, size_);
  fd_.Reset();  // drops the lock
}

CommWorld::Slot* CommWorld::SlotOf(uint32_t rank) const {
  static_assert(sizeof(Slot) == kSlotBytes);
  return reinterpret_cast<Slot*>(base_ + kHeaderBytes + size_t{rank} * kSlotBytes);
}

uint8_t* CommWorld::Data(uint32_t rank) const {
  return base_ + DataOffset(world_) + size_t{rank} * kRankDataBytes;
}

absl::Status CommWorld::Join(uint32_t rank, int device) {
  if (rank >= world_) {
    return absl::InvalidArgumentError(
        fmt::format("rank {} is outside the world of {} ranks", rank, world_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (joined_[rank]++ > 0) return absl::OkStatus();
  Slot* s = SlotOf(rank);
  const uint32_t self = static_cast<uint32_t>(::getpid());
  uint32_t owner = A(s->pid).load();
  while (owner != self) {
    if (owner != 0 && Alive(static_cast<pid_t>(owner))) {
      --joined_[rank];
      return absl::InvalidArgumentError(
          fmt::format("rank {} of {} is already used by pid {}", rank, path_, owner));
    }
    if (A(s->pid).compare_exchange_strong(owner, self)) break;
  }
  if (A(s->last_pid).exchange(self) != self) {
    for (Entry& e : s->entries) {
      A(e.seq).store(0);
      A(e.group_key).store(0);
    }
  }
  A(s->device).store(device);
  A(s->generation).fetch_add(1, std::memory_order_release);
  FutexWakeAll(&s->generation);
  return absl::OkStatus();
}

void CommWorld::Leave(uint32_t rank) {
  if (rank >= world_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (joined_[rank] == 0 || --joined_[rank] > 0) return;
  Slot* s = SlotOf(rank);
  uint32_t self = static_cast<uint32_t>(::getpid());
  A(s->pid).compare_exchange_strong(self, 0);
  A(s->generation).fetch_add(1, std::memory_order_release);
  FutexWakeAll(&s->generation);
}

CommWorld::Result CommWorld::Arrive(uint32_t rank, const std::vector<uint32_t>& members,
                                    int64_t arrive_ns, int64_t deadline_ns,
                                    const Interrupt* interrupt) {
  Result out;
  const uint64_t key = GroupKey(members);
  Slot* me = SlotOf(rank);
  Entry* mine = nullptr;
  for (Entry& e : me->entries) {
    if (A(e.group_key).load() == key) mine = &e;
  }
  for (Entry& e : me->entries) {
    if (mine == nullptr && A(e.group_key).load() == 0) {
      A(e.group_key).store(key);
      mine = &e;
    }
  }
  if (mine == nullptr) {  // more replica groups than slots: cannot take part
    out.missing = members;
    return out;
  }
  const uint32_t seq = A(mine->seq).load() + 1;
  A(mine->arrive_ns[seq & 1]).store(arrive_ns, std::memory_order_relaxed);
  A(mine->seq).store(seq, std::memory_order_release);
  A(me->generation).fetch_add(1, std::memory_order_release);
  FutexWakeAll(&me->generation);

  out.start_ns = arrive_ns;
  out.devices.assign(members.size(), -1);
  for (size_t i = 0; i < members.size(); ++i) {
    const uint32_t m = members[i];
    if (m >= world_) {
      out.missing.push_back(m);
      continue;
    }
    Slot* p = SlotOf(m);
    while (true) {
      const uint32_t gen = A(p->generation).load(std::memory_order_acquire);
      const Entry* found = nullptr;
      for (const Entry& e : p->entries) {
        if (A(const_cast<uint64_t&>(e.group_key)).load() == key) found = &e;
      }
      if (m == rank ||
          (found != nullptr &&
           A(const_cast<uint32_t&>(found->seq)).load(std::memory_order_acquire) >= seq)) {
        const Entry* e = m == rank ? mine : found;
        out.start_ns =
            std::max(out.start_ns, A(const_cast<int64_t&>(e->arrive_ns[seq & 1])).load());
        out.devices[i] = A(p->device).load();
        break;
      }
      const int64_t now = SteadyNs();
      if (now >= deadline_ns || (interrupt != nullptr && interrupt->fired())) {
        out.missing.push_back(m);
        break;
      }
      FutexWait(&p->generation, gen, std::min(deadline_ns - now, kWaitSliceNs));
    }
  }
  out.complete = out.missing.empty();
  return out;
}

absl::StatusOr<std::shared_ptr<CommWorld>> GetCommWorld(const RootPaths& root,
                                                        const std::string& comm_id,
                                                        uint32_t world) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<CommWorld>> worlds;
  const std::string key = fmt::format("{}|{}|{}", root.root().string(), comm_id, world);
  std::lock_guard<std::mutex> lock(mu);
  if (std::shared_ptr<CommWorld> w = worlds[key].lock()) return w;
  absl::StatusOr<std::shared_ptr<CommWorld>> w = CommWorld::Attach(root, comm_id, world);
  if (w.ok()) worlds[key] = *w;
  return w;
}

}  // namespace neuron::nrt

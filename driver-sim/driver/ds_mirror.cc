#include "driver-sim/driver/ds_mirror.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/driver/datastore_layout.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/driver/efa_traffic_layout.h"
#include "driver-sim/driver/sim_paths.h"
#include "driver-sim/runtime/records.h"

namespace neuron::sim {
namespace {

namespace fs = std::filesystem;

constexpr int kFirstDeviceMemIndex = nds::kMemUsageCodeDevice;  // 22..26
constexpr int kFirstHostMemIndex = nds::kMemUsageCodeHost;      // 6..10
constexpr std::array<std::string_view, nds::kEfaTrafficFields> kEfaFieldCounters{
    "tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts"};

template <typename T>
bool ParseWhole(std::string_view text, T* out, int base = 10) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, base);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

struct DatastoreMirror::Entry {
  int device = -1;
  int slot = -1;
  pid_t pid = 0;
  const uint8_t* base = nullptr;  // nds::kSize bytes of the driver's memory
  // What sysfs holds for this process: device memory by [physical core][category], host memory
  // by category; the counters already accounted for EFA traffic and busy time.
  std::vector<std::array<uint64_t, kDeviceMemMirror.size()>> dev_mem;
  std::array<uint64_t, kHostMemMirror.size()> host_mem{};
  std::vector<std::array<uint64_t, nds::kEfaTrafficFields>> efa_seen;
  std::vector<uint64_t> busy_seen;

  uint64_t Word(size_t offset) const {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(base + offset), __ATOMIC_RELAXED);
  }
  uint32_t Word32(size_t offset) const {
    return __atomic_load_n(reinterpret_cast<const uint32_t*>(base + offset), __ATOMIC_RELAXED);
  }
  uint64_t Core(int slot, int index) const {
    const std::optional<size_t> off = nds::CoreCounterOffset(slot, index);
    return off ? Word(*off) : 0;
  }
};

DatastoreMirror::DatastoreMirror(SimTree* tree, const InstanceSpec& spec, int lnc,
                                 std::shared_ptr<spdlog::logger> log)
    : tree_(tree),
      spec_(spec),
      lnc_(lnc),
      sets_per_device_(std::min(spec.chip->physical_cores, nds::kMaxCores)),
      physical_cores_(spec.chip->physical_cores),
      log_(std::move(log)),
      busy_(static_cast<size_t>(spec.devices)) {}

DatastoreMirror::~DatastoreMirror() = default;

void DatastoreMirror::Attach(int device, int slot, pid_t pid, const uint8_t* base) {
  auto e = std::make_unique<Entry>();
  e->device = device;
  e->slot = slot;
  e->pid = pid;
  e->base = base;
  e->dev_mem.assign(static_cast<size_t>(physical_cores_), {});
  e->efa_seen.assign(spec_.efas.size(), {});
  e->busy_seen.assign(static_cast<size_t>(sets_per_device_), 0);
  log_->info("runtime pid {} attached to device {} (datastore slot {})", pid, device, slot);
  entries_[{device, slot}] = std::move(e);
}

void DatastoreMirror::Release(int device, int slot) {
  auto it = entries_.find({device, slot});
  if (it == entries_.end()) return;
  log_->info("runtime pid {} released device {}; folding its datastore into sysfs", it->second->pid,
             device);
  Fold(*it->second);
  entries_.erase(it);
}

DatastoreMemory DatastoreMirror::MemoryOf(int device, int slot) const {
  DatastoreMemory m;
  auto it = entries_.find({device, slot});
  if (it == entries_.end()) return m;
  const Entry& e = *it->second;
  for (int p = 0; p < sets_per_device_; ++p) {
    for (size_t c = 0; c < kDeviceMemMirror.size(); ++c) {
      m.device_bytes += e.Core(p, kFirstDeviceMemIndex + static_cast<int>(c));
    }
  }
  for (size_t c = 0; c < kHostMemMirror.size(); ++c) {
    m.host_bytes += e.Word(nds::DeviceCounterOffset(kFirstHostMemIndex + static_cast<int>(c)));
  }
  return m;
}

void DatastoreMirror::Apply(const fs::path& dir, int64_t delta) {
  if (delta == 0) return;
  const CounterOp op = delta > 0 ? CounterOp::kInc : CounterOp::kDec;
  const uint64_t magnitude =
      delta > 0 ? static_cast<uint64_t>(delta) : static_cast<uint64_t>(-(delta + 1)) + 1;
  if (absl::Status s = tree_->ApplyCounter(dir, op, magnitude); !s.ok()) {
    log_->warn("{}", std::string{s.message()});
  }
}

void DatastoreMirror::Sync(Entry& e, bool release) {
  const size_t d = static_cast<size_t>(e.device);
  // Busy time feeds the power model whether or not sysfs can be written.
  for (int p = 0; p < sets_per_device_; ++p) {
    const uint64_t now = e.Core(p, nds::kTimeInUse);
    uint64_t& seen = e.busy_seen[static_cast<size_t>(p)];
    if (now > seen) busy_[d].pending_us += now - seen;
    seen = now;
  }
  // EFA traffic: monotonic port counters grow by what the process moved since the last pass.
  if (std::memcmp(e.base + nds::kEfaTrafficOffset, nds::kEfaTrafficMagic, 4) == 0) {
    const size_t n = std::min<size_t>({e.Word32(nds::kEfaTrafficOffset + 4), e.efa_seen.size(),
                                       static_cast<size_t>(nds::kMaxEfas)});
    for (size_t i = 0; i < n; ++i) {
      const std::string& efa = spec_.efas[i].name;
      for (int f = 0; f < nds::kEfaTrafficFields; ++f) {
        const uint64_t now = e.Word(nds::EfaTrafficFieldOffset(static_cast<int>(i), f));
        uint64_t& seen = e.efa_seen[i][static_cast<size_t>(f)];
        if (now > seen && tree_->EfaPresent(efa)) {
          if (absl::Status s =
                  tree_->AddEfaCounter(efa, kEfaFieldCounters[static_cast<size_t>(f)], now - seen);
              !s.ok()) {
            log_->warn("{}", std::string{s.message()});
          }
        }
        seen = now;  // traffic over a downed EFA is lost, as its counters restart at 0
      }
    }
  }
  if (!tree_->DevicePresent(e.device)) return;
  // Device memory: counter set p is physical core p's, mirrored into neuron_core<p>; each change
  // one inc or dec on the category and on device_mem/ itself.
  for (int p = 0; p < sets_per_device_; ++p) {
    for (size_t c = 0; c < kDeviceMemMirror.size(); ++c) {
      const uint64_t target = release ? 0 : e.Core(p, kFirstDeviceMemIndex + static_cast<int>(c));
      uint64_t& mirrored = e.dev_mem[static_cast<size_t>(p)][c];
      if (target == mirrored) continue;
      const int64_t delta = static_cast<int64_t>(target - mirrored);
      Apply(tree_->DeviceMemDir(e.device, p, kDeviceMemMirror[c]), delta);
      Apply(tree_->CoreDir(e.device, p) / sysfs::kDeviceMemDir, delta);
      mirrored = target;
    }
  }
  for (size_t c = 0; c < kHostMemMirror.size(); ++c) {
    const uint64_t v =
        release ? 0 : e.Word(nds::DeviceCounterOffset(kFirstHostMemIndex + static_cast<int>(c)));
    if (v == e.host_mem[c]) continue;
    Apply(tree_->HostMemDir(e.device, kHostMemMirror[c]), static_cast<int64_t>(v - e.host_mem[c]));
    e.host_mem[c] = v;
  }
}

void DatastoreMirror::Fold(Entry& e) {
  Sync(e, /*release=*/false);  // the last traffic and busy time
  if (tree_->DevicePresent(e.device)) {
    auto inc = [&](const fs::path& dir, uint64_t v) {
      if (v == 0) return;
      if (absl::Status s = tree_->ApplyCounter(dir, CounterOp::kInc, v); !s.ok()) {
        log_->warn("{}", std::string{s.message()});
      }
    };
    // Counter set p into neuron_core<p>, for every physical core, whatever the LNC: the driver's
    // nsysfsmetric_nds_aggregate (driver-sim/README.md#the-daemon-and-the-datastores).
    using O = OtherInfoCounter;
    for (int p = 0; p < sets_per_device_; ++p) {
      for (const StatusCounterName& s : kStatusCounters) {
        inc(tree_->StatusDir(e.device, p, s.sysfs), e.Core(p, s.nds_index));
      }
      inc(tree_->OtherInfoDir(e.device, p, Name(O::model_load_count)),
          e.Core(p, nds::kModelLoadCount));
      inc(tree_->OtherInfoDir(e.device, p, Name(O::inference_count)),
          e.Core(p, nds::kInferenceCount));
      inc(tree_->OtherInfoDir(e.device, p, Name(O::flop_count)), 2 * e.Core(p, nds::kMacCount));
      inc(tree_->OtherInfoDir(e.device, p, Name(O::nc_time_in_use)), e.Core(p, nds::kTimeInUse));
    }
  }
  Sync(e, /*release=*/true);  // frees its memory
}

void DatastoreMirror::Poll(Clock::time_point now) {
  for (auto& [key, e] : entries_) Sync(*e, /*release=*/false);

  // Credit busy time to this poll interval, per device, carrying what does not fit.
  if (polled_ && now > last_poll_) {
    const double seconds = std::chrono::duration<double>(now - last_poll_).count();
    const auto capacity_us =
        static_cast<uint64_t>(seconds * 1e6) * static_cast<uint64_t>(std::max(sets_per_device_, 1));
    for (DeviceBusy& b : busy_) {
      const uint64_t credit = std::min(b.pending_us, capacity_us);
      b.pending_us -= credit;
      const double share = capacity_us ? static_cast<double>(credit) / capacity_us : 0.0;
      b.weighted += share * seconds;
      b.seconds += seconds;
      b.min = std::min(b.min, share);
      b.max = std::max(b.max, share);
    }
  }
  last_poll_ = now;
  polled_ = true;
}

void DatastoreMirror::ForgetDevice(int device) {
  for (auto& [key, e] : entries_) {
    if (e->device != device) continue;
    for (auto& row : e->dev_mem) row.fill(0);
    e->host_mem.fill(0);
  }
  busy_[static_cast<size_t>(device)] = DeviceBusy{};
}

BusyWindow DatastoreMirror::TakeBusyWindow(int device) {
  DeviceBusy& b = busy_[static_cast<size_t>(device)];
  BusyWindow w;
  if (b.seconds > 0) w = {b.weighted / b.seconds, b.min, b.max};
  b.weighted = 0;
  b.seconds = 0;
  b.min = 1;
  b.max = 0;
  return w;
}

std::vector<DatastoreProcess> DatastoreMirror::Processes() const {
  std::vector<DatastoreProcess> out;
  for (const auto& [key, e] : entries_) {
    DatastoreProcess p;
    p.device = e->device;
    p.pid = e->pid;
    // The runtime's tag, through libnrt-sim's own reader of its private records (status page).
    p.tag = nrt::records::TagOf({e->base + nrt::records::kAreaOffset, nrt::records::kAreaSize});
    if (p.tag.empty()) p.tag = std::to_string(e->pid);
    // Logical slot k owns counter sets k*lnc .. k*lnc+lnc-1.
    for (int set = 0; set < sets_per_device_; ++set) {
      bool used = false;
      for (int i = 0; i < nds::kCoreCounterCount && !used; ++i) used = e->Core(set, i) != 0;
      const int slot = set / lnc_;
      if (used && (p.slots.empty() || p.slots.back() != slot)) p.slots.push_back(slot);
      for (size_t c = 0; c < kDeviceMemMirror.size(); ++c) {
        p.device_bytes += e->Core(set, kFirstDeviceMemIndex + static_cast<int>(c));
      }
    }
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const DatastoreProcess& a, const DatastoreProcess& b) {
    return std::tie(a.device, a.pid) < std::tie(b.device, b.pid);
  });
  return out;
}

std::map<pid_t, std::vector<int>> CoreLockHolders(const RootPaths& paths) {
  // Lock files by (major, minor, inode).
  std::map<std::tuple<unsigned, unsigned, uint64_t>, int> cores;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sim::CoreLockDir(paths), ec)) {
    int core = -1;
    if (!ParseWhole(entry.path().filename().string(), &core)) continue;
    struct stat st {};
    if (stat(entry.path().c_str(), &st) != 0) continue;
    cores[{major(st.st_dev), minor(st.st_dev), static_cast<uint64_t>(st.st_ino)}] = core;
  }
  std::map<pid_t, std::vector<int>> holders;
  if (cores.empty()) return holders;
  // "1: FLOCK  ADVISORY  WRITE 4711 00:2e:123456 0 EOF"; waiters carry "->" and hold nothing.
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream words(line);
    std::string id, kind, advisory, mode, pid_text, where;
    words >> id >> kind;
    if (kind != "FLOCK") continue;
    words >> advisory >> mode >> pid_text >> where;
    pid_t pid = 0;
    const size_t c1 = where.find(':');
    const size_t c2 = where.find(':', c1 == std::string::npos ? 0 : c1 + 1);
    unsigned maj = 0, min = 0;
    uint64_t ino = 0;
    if (!ParseWhole(pid_text, &pid) || c1 == std::string::npos || c2 == std::string::npos ||
        !ParseWhole(std::string_view(where).substr(0, c1), &maj, 16) ||
        !ParseWhole(std::string_view(where).substr(c1 + 1, c2 - c1 - 1), &min, 16) ||
        !ParseWhole(std::string_view(where).substr(c2 + 1), &ino)) {
      continue;
    }
    const auto it = cores.find({maj, min, ino});
    if (it != cores.end()) holders[pid].push_back(it->second);
  }
  for (auto& [pid, list] : holders) std::sort(list.begin(), list.end());
  return holders;
}

}  // namespace neuron::sim

// The datastore reader over the driver's device ABI (core/sample/datastore.h,
// MakeDriverDatastoreReader), as a monitor must use it on a real node (docs/driver-interface.md
// "Reading another process's datastore"):
//   - a presence probe on a worker thread, every probe_period: open /dev/neuronN read-only
//     (a normal open, which waits while the device is in RESET), list its processes
//     (GET_ALL_APPS_INFO) and ask for each one's datastore (ACQUIRE_NEURON_DS with its PID).
//     The device is held only while some other process owns a datastore and at least two of
//     its 16 process slots are free; otherwise the fd goes back (its close sleeps ~10 ms in
//     the driver, which is why the worker does it), so an idle device stays resettable through
//     sysfs and a busy one keeps a slot for one more runtime.
//   - the sample path (ReadAll, List) uses only held fds: list, acquire, map read-only, parse.
//     It never opens or closes a device, so a device in reset never blocks a scrape. Slots are
//     zeroed and reused by the driver, so owner and header are checked again every sample.
//   - the runtimes' records (options.records, core/sample/runtime_records.h) are read where a
//     held device's datastores are, and let go of before the device is.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/base/component_log.h"
#include "core/driver/driver_abi.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"

namespace neuron {
namespace {

spdlog::logger& Log() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("datastore");
  return *log;
}

// One process of GET_ALL_APPS_INFO.
struct AppEntry {
  pid_t pid = 0;
  uint8_t nc_lock_map = 0;
  uint64_t host_mem = 0;
  uint64_t device_mem = 0;
};

// GET_ALL_APPS_INFO on a normal fd. errno-style error (positive) on failure.
int ListApps(int fd, std::vector<AppEntry>* out) {
  std::vector<uint8_t> buf(sizeof(neuron_abi_apps_header) +
                           NEURON_ABI_MAX_PROCESSES * sizeof(neuron_abi_app_info));
  neuron_abi_apps_header header{};
  header.flags = NEURON_ABI_APPS_ALL;
  header.capacity = NEURON_ABI_MAX_PROCESSES;
  std::memcpy(buf.data(), &header, sizeof(header));
  const int rc = ::ioctl(fd, NEURON_ABI_GET_ALL_APPS_INFO, buf.data());
  if (rc != 0) return rc > 0 ? EFAULT : errno;  // a positive value: bytes not copied
  std::memcpy(&header, buf.data(), sizeof(header));
  const uint32_t n = std::min<uint32_t>(header.size, NEURON_ABI_MAX_PROCESSES);
  out->clear();
  for (uint32_t i = 0; i < n; ++i) {
    neuron_abi_app_info info;
    std::memcpy(&info, buf.data() + sizeof(header) + i * sizeof(info), sizeof(info));
    out->push_back({info.pid, info.nc_lock_map, info.host_mem_size, info.device_mem_size});
  }
  return 0;
}

// ACQUIRE_NEURON_DS for `pid`: its slot's mmap offset, or the errno (ENOENT: no datastore).
int AcquireOffset(int fd, pid_t pid, uint64_t* offset) {
  neuron_abi_ds_info info{};
  info.pid = pid;  // never 0: that would claim a slot for us
  const int rc = ::ioctl(fd, NEURON_ABI_ACQUIRE_DS, &info);
  if (rc != 0) return rc > 0 ? EFAULT : errno;
  if (info.size != nds::kSize) return EPROTO;
  *offset = info.mmap_offset;
  return 0;
}

// Why a device's datastores cannot be read, in the user's words.
std::string OpenProblem(const std::string& node, int err) {
  switch (err) {
    case ENOENT:
      return fmt::format("no device node {}", node);
    case EACCES:
    case EPERM:
      return fmt::format("{}: permission denied (the agent needs device access: privileged)", node);
    case ENXIO:
    case ENODEV:
      return fmt::format("{}: no Neuron driver behind the device node", node);
    default:
      return fmt::format("{}: {}", node, std::strerror(err));
  }
}

std::string IoctlProblem(const std::string& node, int err) {
  if (err == ENOTTY || err == EINVAL) {
    return fmt::format("{}: no Neuron driver answers its ioctls ({})", node, std::strerror(err));
  }
  return fmt::format("{}: GET_ALL_APPS_INFO: {}", node, std::strerror(err));
}

class DriverDatastoreReader final : public DatastoreReader {
 public:
  DriverDatastoreReader(const RootPaths& root, DriverDatastoreOptions options)
      : root_(root), options_(std::move(options)), self_(::getpid()) {
    worker_ = std::thread([this] { ProbeLoop(); });
  }

  ~DriverDatastoreReader() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
    for (auto& [device, held] : held_) Unhold(device, held);
  }

  void SetDevices(std::vector<int> devices) override {
    std::lock_guard<std::mutex> lock(mu_);
    options_.devices = std::move(devices);
    wake_.notify_all();
  }

  SourceState State() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }

  bool AwaitFirstProbe(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    return probed_.wait_for(lock, timeout, [this] { return state_.known; });
  }

  // Without asking the driver: a slot its owner released is zeroed before anyone else can have
  // it, so a mapped slot whose header is gone is an entry that went away.
  std::vector<DatastoreKey> List() override {
    std::vector<DatastoreKey> keys;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [device, held] : held_) {
      for (const auto& [pid, offset] : held.mapped_pids) {
        if (HeaderIntact(held, offset)) keys.push_back({device, pid});
      }
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  DatastoreScan ReadAll() override {
    DatastoreScan scan;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [device, held] : held_) ReadDevice(device, held, &scan);
    std::sort(scan.records.begin(), scan.records.end(),
              [](const DatastoreRecord& a, const DatastoreRecord& b) { return a.key() < b.key(); });
    return scan;
  }

  std::string_view name() const override { return "driver"; }

 private:
  struct Held {
    int fd = -1;
    std::map<uint64_t, const std::byte*> maps;  // mmap offset -> read-only mapping
    std::map<pid_t, uint64_t> mapped_pids;      // the last sample's owners
    size_t listed = 0;                          // processes attached, ours included
    bool sampled = false;                       // a sample has looked since it was opened
    bool broken = false;                        // an ioctl failed: the worker lets it go
  };

  static bool HeaderIntact(const Held& h, uint64_t offset) {
    const auto it = h.maps.find(offset);
    return it != h.maps.end() && std::memcmp(it->second, nds::kMagic, sizeof(nds::kMagic)) == 0;
  }

  void Unhold(int device, Held& h) const {
    if (options_.records) options_.records->Release(device);
    for (auto& [offset, addr] : h.maps) ::munmap(const_cast<std::byte*>(addr), nds::kSize);
    h.maps.clear();
    if (h.fd >= 0) ::close(h.fd);
    h.fd = -1;
  }

  void ReadDevice(int device, Held& held, DatastoreScan* scan);
  std::map<pid_t, uint64_t> Owners(Held& held, const std::vector<AppEntry>& apps) const;
  const std::byte* MapSlot(Held& held, uint64_t offset, std::string* error);
  void ProbeLoop();
  void ProbeDevice(int device, SourceState* state);
  bool KeepHolding(Held& held) const;
  // Opens the device and decides whether to keep it; fills `problem` when it cannot be read.
  int OpenIfWanted(int device, std::string* problem);

  RootPaths root_;
  DriverDatastoreOptions options_;
  const pid_t self_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable probed_;
  bool stop_ = false;
  SourceState state_;
  std::map<int, Held> held_;  // device -> what we hold
  std::thread worker_;
};

const std::byte* DriverDatastoreReader::MapSlot(Held& held, uint64_t offset, std::string* error) {
  if (auto it = held.maps.find(offset); it != held.maps.end()) return it->second;
  void* addr =
      ::mmap(nullptr, nds::kSize, PROT_READ, MAP_SHARED, held.fd, static_cast<off_t>(offset));
  if (addr == MAP_FAILED) {
    *error = std::strerror(errno);
    return nullptr;
  }
  return held.maps[offset] = static_cast<const std::byte*>(addr);
}

// Each listed process's slot. A process keeps its slot until it releases it, which zeroes the
// slot, so a known process whose mapped header is intact is asked again only when another
// listed process turns out to hold the same slot (it was released and handed on in between).
std::map<pid_t, uint64_t> DriverDatastoreReader::Owners(Held& held,
                                                        const std::vector<AppEntry>& apps) const {
  std::map<pid_t, uint64_t> owners;
  std::map<uint64_t, pid_t> by_offset;
  std::vector<pid_t> ask;
  for (const AppEntry& app : apps) {
    if (app.pid == self_) continue;
    const auto known = held.mapped_pids.find(app.pid);
    if (known != held.mapped_pids.end() && HeaderIntact(held, known->second)) {
      owners[app.pid] = known->second;
      by_offset[known->second] = app.pid;
    } else {
      ask.push_back(app.pid);
    }
  }
  for (size_t i = 0; i < ask.size() && i < 2 * apps.size(); ++i) {
    uint64_t offset = 0;
    if (AcquireOffset(held.fd, ask[i], &offset) != 0) continue;  // ENOENT: no datastore
    if (auto other = by_offset.find(offset); other != by_offset.end() && other->second != ask[i]) {
      owners.erase(other->second);  // its slot was handed on: look it up again
      ask.push_back(other->second);
    }
    owners[ask[i]] = offset;
    by_offset[offset] = ask[i];
  }
  return owners;
}

void DriverDatastoreReader::ReadDevice(int device, Held& held, DatastoreScan* scan) {
  const std::string node = root_.DevNeuron(device).string();
  std::vector<AppEntry> apps;
  if (const int err = ListApps(held.fd, &apps); err != 0) {
    scan->errors.push_back(IoctlProblem(node, err));
    held.broken = true;
    return;
  }
  held.sampled = true;
  held.listed = apps.size();
  const std::map<pid_t, uint64_t> owners = Owners(held, apps);
  std::vector<int> read;
  for (const AppEntry& app : apps) {
    const auto owner = owners.find(app.pid);
    if (owner == owners.end()) continue;
    std::string error;
    const std::byte* bytes = MapSlot(held, owner->second, &error);
    if (bytes == nullptr) {
      scan->errors.push_back(
          fmt::format("{}: mmap of pid {}'s datastore: {}", node, app.pid, error));
      continue;
    }
    const std::string source = fmt::format("{} (pid {})", node, app.pid);
    absl::StatusOr<DatastoreRecord> rec =
        ParseDatastore({bytes, nds::kSize}, device, app.pid, source);
    if (!rec.ok()) continue;  // zeroed (released) or not written yet: nothing live there
    rec->driver = DriverProcessInfo{app.nc_lock_map, app.host_mem, app.device_mem};
    scan->records.push_back(*std::move(rec));
    read.push_back(app.pid);
  }
  if (options_.records) options_.records->ReadHeld(device, read);
  // Slots no process owns any more are unmapped; the driver may give them to another PID.
  for (auto it = held.maps.begin(); it != held.maps.end();) {
    const bool used = std::any_of(owners.begin(), owners.end(),
                                  [&](const auto& o) { return o.second == it->first; });
    if (used) {
      ++it;
      continue;
    }
    ::munmap(const_cast<std::byte*>(it->second), nds::kSize);
    it = held.maps.erase(it);
  }
  held.mapped_pids = owners;
}

int DriverDatastoreReader::OpenIfWanted(int device, std::string* problem) {
  const std::string node = root_.DevNeuron(device).string();
  // A normal open: GET_ALL_APPS_INFO and ACQUIRE_NEURON_DS are refused on free-access fds.
  const int fd = ::open(node.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *problem = OpenProblem(node, errno);
    return -1;
  }
  std::vector<AppEntry> apps;
  const int err = ListApps(fd, &apps);
  bool owner = false;
  for (const AppEntry& a : apps) {
    uint64_t offset = 0;
    if (a.pid != self_ && AcquireOffset(fd, a.pid, &offset) == 0) owner = true;
  }
  // Our own open is in the list: with at most one slot free after it, give it back.
  const bool crowded = static_cast<int>(apps.size()) >= NEURON_ABI_MAX_PROCESSES - 1;
  if (err != 0) *problem = IoctlProblem(node, err);
  if (err == 0 && owner && !crowded) return fd;
  if (err == 0 && owner && crowded) {
    *problem = fmt::format(
        "{}: {} of its {} process slots are in use; the agent does not take one of the last "
        "two to monitor it",
        node, apps.size(), NEURON_ABI_MAX_PROCESSES);
  }
  ::close(fd);
  return -1;
}

// Whether a held device is still worth holding. The probe lists its processes itself, so the
// slot goes back when the device fills up whether or not anyone samples.
bool DriverDatastoreReader::KeepHolding(Held& h) const {
  std::vector<AppEntry> apps;
  if (h.broken || ListApps(h.fd, &apps) != 0) return false;
  h.listed = apps.size();
  const bool crowded = static_cast<int>(apps.size()) >= NEURON_ABI_MAX_PROCESSES - 1;
  const bool owner = std::any_of(apps.begin(), apps.end(),
                                 [&](const AppEntry& a) { return h.mapped_pids.contains(a.pid); });
  return !crowded && (!h.sampled || owner);
}

void DriverDatastoreReader::ProbeDevice(int device, SourceState* state) {
  std::optional<Held> letting_go;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = held_.find(device); it != held_.end()) {
      if (KeepHolding(it->second)) {
        state->up = true;
        return;
      }
      // Unknown from now until the probe has looked again: a sample in between must not take
      // the device for idle.
      letting_go = std::move(it->second);
      held_.erase(it);
      state_.unread[device] =
          fmt::format("{}: being looked at again", root_.DevNeuron(device).string());
    }
  }
  // Let go outside the lock (the close sleeps in the driver), then look again.
  if (letting_go) Unhold(device, *letting_go);
  std::string problem;
  const int fd = OpenIfWanted(device, &problem);
  if (fd >= 0) {
    std::lock_guard<std::mutex> lock(mu_);
    held_[device].fd = fd;
  }
  if (problem.empty()) {
    state->up = true;
    return;
  }
  state->unread[device] = problem;
  if (state->reason.empty()) state->reason = problem;
}

void DriverDatastoreReader::ProbeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const std::vector<int> devices = options_.devices;
    lock.unlock();
    SourceState next;
    next.known = true;
    for (const int d : devices) ProbeDevice(d, &next);
    if (devices.empty()) next.reason = "no Neuron devices";
    if (next.up) next.reason.clear();
    lock.lock();
    if (next.up != state_.up || next.reason != state_.reason || !state_.known) {
      if (next.up) {
        Log().info("live datastores readable through the driver ({} devices)", devices.size());
      } else {
        Log().warn("live datastores unavailable: {}", next.reason);
      }
    }
    state_ = next;
    probed_.notify_all();
    // Devices no longer in the inventory are let go.
    for (auto it = held_.begin(); it != held_.end();) {
      if (std::find(devices.begin(), devices.end(), it->first) != devices.end()) {
        ++it;
        continue;
      }
      Unhold(it->first, it->second);
      it = held_.erase(it);
    }
    wake_.wait_for(lock, options_.probe_period, [this] { return stop_; });
  }
}

}  // namespace

std::unique_ptr<DatastoreReader> MakeDriverDatastoreReader(const RootPaths& root,
                                                           DriverDatastoreOptions options) {
  return std::make_unique<DriverDatastoreReader>(root, std::move(options));
}

}  // namespace neuron

// The datastore reader over the driver's device ABI (core/sample/datastore.h,
// MakeDriverDatastoreReader), as a monitor must use it on a real node (docs/driver-interface.md
// "Reading another process's datastore"), without making the driver log for idle devices
// (docs/architecture.md#noticing-runtimes):
//   - a probe on a worker thread, every probe_period. It finds who holds each device from one
//     pass over /proc (ProcReader::HoldersOf, by device number), which costs the driver nothing.
//     A device nobody else holds is known to be idle and is not opened: every normal open
//     attaches (npid_attach in the kernel log), every last close detaches (npid_detach) and
//     sleeps ~10 ms. Whether a node can be opened at all is checked once, up front, with a
//     free-access open (O_WRONLY) and DEVICE_BASIC_INFO, which attaches and logs nothing.
//   - a device some other process holds is opened read-only (a normal open, which waits while
//     the device is in RESET), its processes listed (GET_ALL_APPS_INFO) and each one's
//     datastore asked for (ACQUIRE_NEURON_DS with its PID). It is held while some other process
//     owns a datastore there and at least two of its 16 process slots are free, or for a grace
//     period after opening (a runtime opens its device before it claims its datastore);
//     otherwise the fd goes back (the close sleeps in the driver, which is why the worker does
//     it) and the same holders are not looked at again for a while, so an idle device stays
//     resettable through sysfs and a busy one keeps a slot for one more runtime.
//   - where holders cannot be seen (some process's fd/ unreadable, a device's number unknown),
//     every device is opened every probe_period as before, and the log says so once.
//   - while the kernel log's open and close records reach ProbeSoon (SetOpensLogged) and
//     nothing is held, the probe runs on those records and every quiet_probe_period besides:
//     on a node with thousands of descriptors the /proc pass is most of an idle agent's calls.
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
#include <set>
#include <thread>

#include "core/base/component_log.h"
#include "core/driver/driver_abi.h"
#include "core/proc/procinfo.h"
#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"

namespace neuron {
namespace {

spdlog::logger& DatastoreLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("datastore");
  return *log;
}

using Clock = std::chrono::steady_clock;
// How long a device opened for new holders is held without a datastore on it: a runtime opens
// its device before it claims its datastore.
constexpr auto kRuntimeGrace = std::chrono::seconds(10);
// How long holders that were looked at without a runtime among them are left alone: a process
// that keeps a device open without a datastore costs two driver log lines this often.
constexpr auto kRelook = std::chrono::seconds(60);

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

std::string IoctlProblem(const std::string& node, int err,
                         std::string_view request = "GET_ALL_APPS_INFO") {
  if (err == ENOTTY || err == EINVAL) {
    return fmt::format("{}: no Neuron driver answers its ioctls ({})", node, std::strerror(err));
  }
  return fmt::format("{}: {}: {}", node, request, std::strerror(err));
}

// Who holds each device, from one pass over /proc.
struct HolderView {
  // Device -> the PIDs other than ours that hold it, for the devices whose holders are known.
  std::map<int, std::vector<int>> others;
  std::string reason;  // why some device's holders are not known (empty: all are)
};

class DriverDatastoreReader final : public DatastoreReader {
 public:
  DriverDatastoreReader(const RootPaths& root, DriverDatastoreOptions options)
      : root_(root),
        options_(std::move(options)),
        proc_(root),
        // The driver lists PIDs as the host numbers them; so does the /proc we read.
        self_(proc_.SelfPid().value_or(::getpid())) {
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
    soon_ = true;
    wake_.notify_all();
  }

  void SetOpensLogged(bool logged) override {
    std::lock_guard<std::mutex> lock(mu_);
    opens_logged_ = logged;
  }

  void ProbeSoon() override {
    std::lock_guard<std::mutex> lock(mu_);
    soon_ = true;
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
    bool broken = false;                        // an ioctl failed: the worker lets it go
    Clock::time_point grace_until;              // held without a runtime until then
  };

  // What the probe knows of a device (worker thread only).
  struct Watch {
    bool access_ok = false;    // a free-access open and DEVICE_BASIC_INFO worked
    std::set<int> looked_at;   // the other holders when the device was last opened
    Clock::time_point looked;  // when
    std::string problem;       // what that look could not read; said while they stay
  };
  enum class Verdict { kKeep, kNoRuntime, kLookAgain };

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
  HolderView LookForHolders(const std::vector<int>& devices);
  absl::StatusOr<dev_t> DeviceNumber(int device, bool reread);
  void SayHowRuntimesAreNoticed(const HolderView& view);
  void ProbeDevice(int device, const HolderView& view, SourceState* state);
  Verdict KeepHolding(Held& held, Clock::time_point now) const;
  bool HasRuntime(int fd, const std::vector<AppEntry>& apps) const;
  // The free-access check, until it has worked once; fills `problem` when it fails.
  bool CheckAccess(int device, std::string* problem);
  bool ShouldOpen(int device, const std::vector<int>* others, Clock::time_point now);
  // Opens the device and decides whether to keep it (`sighted`: its holders are known, so a
  // device without a runtime yet is kept for the grace period; `*runtime`: one is there); fills
  // `problem` when it cannot be read.
  int OpenIfWanted(int device, bool sighted, bool* runtime, std::string* problem);

  RootPaths root_;
  DriverDatastoreOptions options_;
  const ProcReader proc_;
  const pid_t self_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable probed_;
  bool stop_ = false;
  bool soon_ = false;  // ProbeSoon or SetDevices: probe without waiting out the period
  bool opens_logged_ = options_.opens_logged;  // SetOpensLogged
  SourceState state_;
  std::map<int, Held> held_;                  // device -> what we hold
  std::map<int, Watch> watch_;                // worker thread only
  std::optional<std::string> logged_reason_;  // worker thread only: the last view.reason logged
  std::map<int, dev_t> numbers_;              // worker thread only: the devices' numbers read
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

// A device's number from its class device's `dev` file, or as last read. The driver's devices
// share one major, allocated when the module loads, and each has its index as minor
// (docs/driver-interface.md#device-nodes): a reload that keeps the major keeps every number, and
// one that changes it changes the first device's too. So a probe reads the first device's number
// and reads the others again only when it moved: one read a second, not one per device.
absl::StatusOr<dev_t> DriverDatastoreReader::DeviceNumber(int device, bool reread) {
  if (auto it = numbers_.find(device); !reread && it != numbers_.end()) return it->second;
  absl::StatusOr<dev_t> number = NeuronDeviceNumber(root_, device);
  if (number.ok()) {
    numbers_[device] = *number;
  } else {
    numbers_.erase(device);
  }
  return number;
}

HolderView DriverDatastoreReader::LookForHolders(const std::vector<int>& devices) {
  HolderView view;
  if (std::optional<std::string> why = proc_.MissesProcesses()) {
    view.reason = *why;
    return view;
  }
  std::vector<dev_t> numbers;
  std::map<dev_t, int> device_of;
  bool reread = false;
  if (!devices.empty()) {
    const auto before = numbers_.find(devices.front());
    const std::optional<dev_t> was =
        before != numbers_.end() ? std::optional<dev_t>(before->second) : std::nullopt;
    const absl::StatusOr<dev_t> first = DeviceNumber(devices.front(), true);
    reread = !first.ok() || was != *first;
  }
  for (const int d : devices) {
    absl::StatusOr<dev_t> number = DeviceNumber(d, reread && d != devices.front());
    if (number.ok()) {
      numbers.push_back(*number);
      device_of[*number] = d;
      view.others[d];  // known until a problem says otherwise: nobody
    } else if (view.reason.empty()) {
      view.reason = fmt::format("the number of {} is unknown ({})", root_.DevNeuron(d).string(),
                                std::string{number.status().message()});
    }
  }
  const ProcReader::DeviceHolders holders = proc_.HoldersOf(numbers);
  if (holders.problems.processes > 0) {
    view.reason = fmt::format("the open files of {} processes cannot be read ({})",
                              holders.problems.processes, holders.problems.first);
    view.others.clear();
    return view;
  }
  for (const auto& [number, pids] : holders.pids) {
    std::vector<int>& others = view.others[device_of.at(number)];
    std::copy_if(pids.begin(), pids.end(), std::back_inserter(others),
                 [this](int pid) { return pid != self_; });
  }
  return view;
}

// Said once per change: whether idle devices are left alone, or opened every probe and why.
void DriverDatastoreReader::SayHowRuntimesAreNoticed(const HolderView& view) {
  if (logged_reason_ && *logged_reason_ == view.reason) return;
  logged_reason_ = view.reason;
  if (view.reason.empty()) {
    DatastoreLog().info("runtimes are noticed in {} by device number; idle devices are not opened",
                        proc_.proc_dir().string());
  } else {
    DatastoreLog().warn(
        "cannot see which processes hold the Neuron devices: {}; devices whose holders are "
        "unknown are opened every {} ms to look for runtimes, which the driver logs "
        "(npid_attach, npid_detach)",
        view.reason, options_.probe_period.count());
  }
}

bool DriverDatastoreReader::CheckAccess(int device, std::string* problem) {
  Watch& w = watch_[device];
  if (w.access_ok) return true;
  const std::string node = root_.DevNeuron(device).string();
  // O_WRONLY: the driver's free-access mode, no attach, no open count, no log line.
  const int fd = ::open(node.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *problem = OpenProblem(node, errno);
    return false;
  }
  neuron_abi_basic_info info{};
  const int rc = ::ioctl(fd, NEURON_ABI_DEVICE_BASIC_INFO, &info);
  const int err = rc > 0 ? EFAULT : errno;
  ::close(fd);
  if (rc != 0) {
    *problem = IoctlProblem(node, err, "DEVICE_BASIC_INFO");
    return false;
  }
  w.access_ok = true;
  return true;
}

// Whether to open a device that is not held: when its holders cannot be seen (to look), and
// when it has holders the probe has not looked at (or not for kRelook). Never when idle.
bool DriverDatastoreReader::ShouldOpen(int device, const std::vector<int>* others,
                                       Clock::time_point now) {
  if (others == nullptr) return true;
  Watch& w = watch_[device];
  if (others->empty()) {
    w.looked_at.clear();
    w.problem.clear();
    return false;
  }
  const bool news = std::any_of(others->begin(), others->end(),
                                [&w](int pid) { return !w.looked_at.contains(pid); });
  return news || now - w.looked >= kRelook;
}

int DriverDatastoreReader::OpenIfWanted(int device, bool sighted, bool* runtime,
                                        std::string* problem) {
  const std::string node = root_.DevNeuron(device).string();
  // A normal open: GET_ALL_APPS_INFO and ACQUIRE_NEURON_DS are refused on free-access fds.
  const int fd = ::open(node.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *problem = OpenProblem(node, errno);
    watch_[device].access_ok = false;  // checked again before the next open
    return -1;
  }
  std::vector<AppEntry> apps;
  const int err = ListApps(fd, &apps);
  const bool owner = err == 0 && HasRuntime(fd, apps);
  *runtime = owner;
  // Our own open is in the list: with at most one slot free after it, give it back.
  const bool crowded = static_cast<int>(apps.size()) >= NEURON_ABI_MAX_PROCESSES - 1;
  if (err != 0) *problem = IoctlProblem(node, err);
  if (err == 0 && !crowded && (owner || sighted)) return fd;
  if (err == 0 && crowded) {
    *problem = fmt::format(
        "{}: {} of its {} process slots are in use; the agent does not take one of the last "
        "two to monitor it",
        node, apps.size(), NEURON_ABI_MAX_PROCESSES);
  }
  ::close(fd);
  return -1;
}

// Whether some listed process other than us owns a datastore (ACQUIRE_NEURON_DS with its PID:
// no attach, no log line).
bool DriverDatastoreReader::HasRuntime(int fd, const std::vector<AppEntry>& apps) const {
  return std::any_of(apps.begin(), apps.end(), [&](const AppEntry& a) {
    uint64_t offset = 0;
    return a.pid != self_ && AcquireOffset(fd, a.pid, &offset) == 0;
  });
}

// Whether a held device is still worth holding: a runtime's datastore is there, or it was
// opened for its holders so recently that one may still claim it (until a runtime was seen). The
// probe lists its processes itself, so the slot goes back when the device fills up whether or not
// anyone samples; then, or when the driver stopped answering, the device is looked at again at
// once.
DriverDatastoreReader::Verdict DriverDatastoreReader::KeepHolding(Held& h,
                                                                  Clock::time_point now) const {
  std::vector<AppEntry> apps;
  if (h.broken || ListApps(h.fd, &apps) != 0) return Verdict::kLookAgain;
  h.listed = apps.size();
  if (static_cast<int>(apps.size()) >= NEURON_ABI_MAX_PROCESSES - 1) return Verdict::kLookAgain;
  // A runtime a sample has mapped, whose slot is intact, needs no ioctl to be known.
  const bool mapped = std::any_of(apps.begin(), apps.end(), [&h](const AppEntry& a) {
    const auto it = h.mapped_pids.find(a.pid);
    return it != h.mapped_pids.end() && HeaderIntact(h, it->second);
  });
  if (mapped || HasRuntime(h.fd, apps)) {
    h.grace_until = {};  // it came: when it goes, the device goes back at once
    return Verdict::kKeep;
  }
  return now < h.grace_until ? Verdict::kKeep : Verdict::kNoRuntime;
}

void DriverDatastoreReader::ProbeDevice(int device, const HolderView& view, SourceState* state) {
  const auto now = Clock::now();
  const auto known = view.others.find(device);
  const std::vector<int>* others = known != view.others.end() ? &known->second : nullptr;
  std::optional<Held> letting_go;
  Verdict verdict = Verdict::kNoRuntime;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = held_.find(device); it != held_.end()) {
      verdict = KeepHolding(it->second, now);
      if (verdict == Verdict::kKeep) {
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
  if (letting_go) Unhold(device, *letting_go);  // outside the lock: the close sleeps in the driver
  Watch& w = watch_[device];
  if (verdict == Verdict::kLookAgain) w.looked_at.clear();
  std::string problem;
  if (CheckAccess(device, &problem) && ShouldOpen(device, others, now)) {
    bool runtime = false;
    const int fd = OpenIfWanted(device, others != nullptr, &runtime, &problem);
    if (fd >= 0) {
      std::lock_guard<std::mutex> lock(mu_);
      Held& held = held_[device];
      held.fd = fd;
      if (!runtime) held.grace_until = now + kRuntimeGrace;
    }
    if (others != nullptr) w.looked_at = std::set<int>(others->begin(), others->end());
    w.looked = now;
    w.problem = problem;
  } else if (problem.empty()) {
    problem = w.problem;  // idle (none), or the holders last looked at: what that look found
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
    const HolderView view = LookForHolders(devices);
    SayHowRuntimesAreNoticed(view);
    for (const int d : devices) ProbeDevice(d, view, &next);
    if (devices.empty()) next.reason = "no Neuron devices";
    if (next.up) next.reason.clear();
    std::erase_if(watch_, [&devices](const auto& w) {
      return std::find(devices.begin(), devices.end(), w.first) == devices.end();
    });
    lock.lock();
    if (next.up != state_.up || next.reason != state_.reason || !state_.known) {
      if (next.up) {
        DatastoreLog().info("live datastores readable through the driver ({} devices)",
                            devices.size());
      } else {
        DatastoreLog().warn("live datastores unavailable: {}", next.reason);
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
    const bool quiet = opens_logged_ && held_.empty() && view.reason.empty();
    wake_.wait_for(lock, quiet ? options_.quiet_probe_period : options_.probe_period,
                   [this] { return stop_ || soon_; });
    soon_ = false;
  }
}

}  // namespace

std::unique_ptr<DatastoreReader> MakeDriverDatastoreReader(const RootPaths& root,
                                                           DriverDatastoreOptions options) {
  return std::make_unique<DriverDatastoreReader>(root, std::move(options));
}

}  // namespace neuron

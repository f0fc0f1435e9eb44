#include "core/events/internal/node_watch.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/component_log.h"
#include "core/base/file_io.h"

namespace neuron::events_internal {
namespace {

using udev_util::UdevDevice;
using udev_util::UdevEnumerate;

spdlog::logger& NodeWatchLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("events");
  return *log;
}

std::optional<int> NeuronIndexOf(std::string_view name) {
  if (!name.starts_with(sysfs::kDevicePrefix)) return std::nullopt;
  name.remove_prefix(sysfs::kDevicePrefix.size());
  if (name.empty() || name.size() > 3 || (name.size() > 1 && name[0] == '0')) return std::nullopt;
  int v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string Basename(std::string_view p) {
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  const size_t slash = p.rfind('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

std::string ReadLinkBase(const std::filesystem::path& link) {
  char buf[4096];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf));
  if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf)) return "";
  return Basename(std::string_view(buf, static_cast<size_t>(n)));
}

bool IsDir(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string_view StripNewlines(std::string_view raw) {
  while (!raw.empty() && (raw.back() == '\n' || raw.back() == '\r')) raw.remove_suffix(1);
  return raw;
}

std::optional<DeviceState> ParseState(std::string_view raw) {
  raw = StripNewlines(raw);
  if (raw == "0") return DeviceState::kReset;
  if (raw == "1") return DeviceState::kReady;
  if (raw == "2") return DeviceState::kInvalid;
  return std::nullopt;
}

// "4: ACTIVE" -> "ACTIVE", as discovery reports it.
std::string PortState(std::string_view raw) {
  raw = StripNewlines(raw);
  const size_t colon = raw.find(": ");
  if (colon != std::string_view::npos) raw.remove_prefix(colon + 2);
  return std::string(raw);
}

constexpr uint32_t kDirMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                              IN_MOVE_SELF | IN_ONLYDIR | IN_MASK_ADD;
constexpr uint32_t kKmsgDirMask =
    IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_ONLYDIR | IN_MASK_ADD;

}  // namespace

NodeWatch::NodeWatch(RootPaths root, WatchMode mode) : root_(std::move(root)), mode_(mode) {}

NodeWatch::~NodeWatch() { Close(); }

int NodeWatch::monitor_fd() const { return monitor_ ? udev_monitor_get_fd(monitor_.get()) : -1; }

absl::Status NodeWatch::Open() {
  inotify_fd_.Reset();  // first, so that no close() runs between inotify_init1 and errno
  inotify_fd_.Reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_fd_.valid()) {
    const int err = errno;
    const std::string msg =
        fmt::format("inotify_init1: {}{}", std::strerror(err),
                    err == EMFILE ? "; consider increasing fs.inotify.max_user_instances" : "");
    if (mode_ == WatchMode::kDirectory) return absl::ResourceExhaustedError(msg);
    NodeWatchLog().warn("{}; a file-based kernel log is then read on the poll timer only", msg);
  }
  if (mode_ == WatchMode::kDirectory) {
    for (const auto& dir :
         {root_.NeuronClassDir(), root_.NeuronDevicesDir(), root_.InfinibandClassDir()}) {
      target_wd_[dir] = -1;
    }
    ArmWatches();
    return absl::OkStatus();
  }
  udev_.reset(udev_new());
  if (udev_) monitor_.reset(udev_monitor_new_from_netlink(udev_.get(), "udev"));
  if (!monitor_) {
    return absl::UnavailableError("cannot create a udev monitor; use the directory watch mode");
  }
  udev_monitor_filter_add_match_subsystem_devtype(monitor_.get(), kNeuronClass.data(), nullptr);
  udev_monitor_filter_add_match_subsystem_devtype(monitor_.get(), sysfs::kInfinibandClass.data(),
                                                  nullptr);
  if (udev_monitor_enable_receiving(monitor_.get()) < 0) {
    return absl::UnavailableError("cannot receive udev events; use the directory watch mode");
  }
  return absl::OkStatus();
}

void NodeWatch::Close() {
  inotify_fd_.Reset();
  target_wd_.clear();
  wd_path_.clear();
  kmsg_.clear();
  monitor_.reset();
  udev_.reset();
}

void NodeWatch::ArmWatches() {
  if (!inotify_fd_.valid()) return;
  const std::filesystem::path top = root_.root();
  for (auto& [target, wd] : target_wd_) {
    if (wd >= 0) continue;
    // The directory itself, or else its nearest existing ancestor, to see it (re)appear
    // (Envoy: watch the directory that owns the thing being watched).
    for (std::filesystem::path p = target;; p = p.parent_path()) {
      const int w = ::inotify_add_watch(inotify_fd_.get(), p.c_str(), kDirMask);
      if (w >= 0) {
        wd_path_[w] = p;
        if (p == target) wd = w;
        break;
      }
      if (errno == ENOSPC) {
        NodeWatchLog().error(
            "inotify_add_watch {}: {}; consider increasing fs.inotify.max_user_watches", p.string(),
            std::strerror(errno));
        return;
      }
      if (p == top || p == p.parent_path()) break;
    }
  }
  if (!kmsg_.empty()) {
    const std::filesystem::path dir = kmsg_.parent_path();
    const int w = ::inotify_add_watch(inotify_fd_.get(), dir.c_str(), kKmsgDirMask);
    if (w >= 0) wd_path_[w] = dir;
  }
}

bool NodeWatch::ServesPresence(const std::filesystem::path& dir) const {
  for (const auto& [target, wd] : target_wd_) {
    // The target itself, or an ancestor watched while the target is missing.
    auto [t, d] = std::mismatch(target.begin(), target.end(), dir.begin(), dir.end());
    if (d == dir.end()) return true;
  }
  return false;
}

void NodeWatch::WatchKmsgFile(const std::filesystem::path& kmsg) {
  kmsg_ = kmsg;
  ArmWatches();
}

void NodeWatch::DrainInotify(bool* presence, bool* kmsg) {
  if (!inotify_fd_.valid()) return;
  alignas(inotify_event) char buf[16 * 1024];
  bool rearm = false;
  const std::filesystem::path kmsg_dir = kmsg_.empty() ? "" : kmsg_.parent_path();
  const std::string kmsg_name = kmsg_.filename().string();
  for (;;) {
    const ssize_t n = ::read(inotify_fd_.get(), buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {
        *presence = true;
        *kmsg = true;
        continue;
      }
      auto it = wd_path_.find(ev->wd);
      if (it == wd_path_.end()) continue;
      if (ev->mask & IN_IGNORED) {
        // The watched directory is gone; an ancestor is watched until it returns.
        for (auto& [target, wd] : target_wd_) {
          if (wd == ev->wd) wd = -1;
        }
        wd_path_.erase(it);
        rearm = true;
        *presence = true;
        continue;
      }
      if (!kmsg_dir.empty() && it->second == kmsg_dir) {
        if (ev->len > 0 && std::string_view(ev->name) == kmsg_name) *kmsg = true;
        if (!ServesPresence(it->second)) continue;  // only the log is watched here
      }
      *presence = true;
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) rearm = true;  // maybe a watched dir returned
    }
  }
  if (rearm) ArmWatches();
}

std::vector<Uevent> NodeWatch::DrainMonitor() {
  std::vector<Uevent> out;
  if (!monitor_) return out;
  while (UdevDevice dev{udev_monitor_receive_device(monitor_.get())}) {
    const char* action = udev_device_get_action(dev.get());
    const char* subsystem = udev_device_get_subsystem(dev.get());
    const char* sysname = udev_device_get_sysname(dev.get());
    const char* syspath = udev_device_get_syspath(dev.get());
    if (action == nullptr || subsystem == nullptr || sysname == nullptr || syspath == nullptr) {
      continue;
    }
    Uevent u;
    const std::string_view act = action;
    if (act != "add" && act != "remove") continue;
    u.add = act == "add";
    u.neuron = std::string_view(subsystem) == kNeuronClass;
    u.name = sysname;
    u.syspath = syspath;
    if (u.neuron) {
      const std::optional<int> index = NeuronIndexOf(u.name);
      if (!index) continue;
      u.index = *index;
    }
    out.push_back(std::move(u));
  }
  return out;
}

Presence NodeWatch::ReadPresence(const Presence& known) {
  Presence p;
  const auto device_state = [&](int index) {
    const auto it = known.devices.find(index);
    return it != known.devices.end() ? it->second : ReadDeviceState(index);
  };
  const auto port_state = [&](const std::string& name) {
    const auto it = known.efas.find(name);
    return it != known.efas.end() ? it->second : ReadPortState(name).value_or("");
  };
  if (mode_ == WatchMode::kDirectory) {
    const std::filesystem::path cls = root_.NeuronClassDir();
    for (const std::string& name : ListDir(cls)) {
      const std::optional<int> index = NeuronIndexOf(name);
      // A dangling class link means the device is going away.
      if (index && IsDir(cls / name)) p.devices[*index] = device_state(*index);
    }
    const std::filesystem::path ib = root_.InfinibandClassDir();
    for (const std::string& name : ListDir(ib)) {
      // Only the driver tells EFA apart (docs/driver-interface.md#efa).
      if (ReadLinkBase(ib / name / sysfs::kDeviceDriverLink) != sysfs::kEfaDriverName) continue;
      p.efas[name] = port_state(name);
    }
    return p;
  }
  for (const std::string_view subsystem : {kNeuronClass, sysfs::kInfinibandClass}) {
    UdevEnumerate e(udev_enumerate_new(udev_.get()));
    if (!e) continue;
    udev_enumerate_add_match_subsystem(e.get(), std::string(subsystem).c_str());
    if (udev_enumerate_scan_devices(e.get()) < 0) continue;
    udev_list_entry* entry = nullptr;
    udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e.get())) {
      const std::string syspath = udev_list_entry_get_name(entry);
      const std::string name = Basename(syspath);
      if (subsystem == kNeuronClass) {
        if (const std::optional<int> index = NeuronIndexOf(name)) {
          p.devices[*index] = device_state(*index);
        }
      } else if (IsEfaSyspath(syspath)) {
        p.efas[name] = port_state(name);
      }
    }
  }
  return p;
}

bool NodeWatch::IsEfaSyspath(const std::string& syspath) {
  if (!udev_) return false;
  const std::string pci_path = fmt::format("{}/{}", syspath, sysfs::kDeviceLink);
  UdevDevice pci(udev_device_new_from_syspath(udev_.get(), pci_path.c_str()));
  if (!pci) return false;
  const char* driver = udev_device_get_driver(pci.get());
  return driver != nullptr && std::string_view(driver) == sysfs::kEfaDriverName;
}

std::optional<DeviceState> NodeWatch::ReadDeviceState(int index) {
  const std::string name = fmt::format("{}{}", sysfs::kDevicePrefix, index);
  if (mode_ == WatchMode::kDirectory) {
    absl::StatusOr<std::string> raw = ReadAttribute(root_.NeuronClassDir() / name / sysfs::kReset);
    return raw.ok() ? ParseState(*raw) : std::nullopt;
  }
  UdevDevice dev(
      udev_device_new_from_subsystem_sysname(udev_.get(), kNeuronClass.data(), name.c_str()));
  if (!dev) return std::nullopt;
  const char* v = udev_device_get_sysattr_value(dev.get(), sysfs::kReset.data());
  return v != nullptr ? ParseState(v) : std::nullopt;
}

std::optional<std::string> NodeWatch::ReadPortState(const std::string& efa) {
  if (mode_ == WatchMode::kDirectory) {
    absl::StatusOr<std::string> raw =
        ReadAttribute(root_.InfinibandClassDir() / efa / sysfs::kPortState);
    if (!raw.ok()) return std::nullopt;
    return PortState(*raw);
  }
  UdevDevice dev(udev_device_new_from_subsystem_sysname(udev_.get(), sysfs::kInfinibandClass.data(),
                                                        efa.c_str()));
  if (!dev) return std::nullopt;
  const char* v = udev_device_get_sysattr_value(dev.get(), sysfs::kPortState.data());
  if (v == nullptr) return std::nullopt;
  return PortState(v);
}

}  // namespace neuron::events_internal

#include "driver-sim/driver/driver_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/unique_fd.h"
#include "driver-sim/driver/driver_server_internal.h"
#include "driver-sim/driver/sim_driver_proto.h"

namespace neuron::sim {
namespace {

using driver_server_internal::kSlots;
using driver_server_internal::kSlotSize;
constexpr size_t kMaxClients = 4096;
// How long GET_ALL_APPS_INFO's core map may be old: /proc/locks is read at most this often.
constexpr auto kLockHoldersMaxAge = std::chrono::milliseconds(100);
// The kmalloc'd answer is not zeroed by the driver: unused UUIDs and padding hold whatever
// was there. A visible pattern keeps readers honest about it.
constexpr uint8_t kUninitialised = 0xa5;

// The datastore chunk's DMA address as the driver reports it: opaque, OR'd with the PCIe host
// base (1 << 44 on v2, 1 << 46 on v3).
uint64_t BaseOffset(const InstanceSpec& spec) {
  return spec.chip->arch_type == "NDv2" ? (uint64_t{1} << 44) : (uint64_t{1} << 46);
}

std::string ErrnoText() { return std::strerror(errno); }

}  // namespace

DriverServer::DriverServer(RootPaths paths, const InstanceSpec& spec, int lnc, DriverHost* host,
                           DatastoreMirror* mirror, std::shared_ptr<spdlog::logger> log)
    : paths_(std::move(paths)),
      spec_(spec),
      lnc_(lnc),
      host_(host),
      mirror_(mirror),
      log_(std::move(log)),
      devices_(static_cast<size_t>(spec.devices)) {}

absl::StatusOr<std::unique_ptr<DriverServer>> DriverServer::Start(
    const RootPaths& paths, const InstanceSpec& spec, int lnc, DriverHost* host,
    DatastoreMirror* mirror, std::shared_ptr<spdlog::logger> log) {
  std::unique_ptr<DriverServer> s(new DriverServer(paths, spec, lnc, host, mirror, std::move(log)));
  for (int d = 0; d < spec.devices; ++d) {
    if (absl::Status st = s->MakeMemory(d); !st.ok()) return st;
  }
  const std::string path = (paths.root() / NSIM_DRIVER_SOCKET).string();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: longer than a Unix socket path may be ({} bytes)", path, sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  unlink(path.c_str());
  s->listen_fd_.Reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int fd = s->listen_fd_.get();
  if (fd < 0 || bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path.c_str(), 0666) != 0 || listen(fd, 128) != 0) {
    return absl::InternalError(fmt::format("driver socket {}: {}", path, ErrnoText()));
  }
  s->flush_timer_.Reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!s->flush_timer_) return absl::InternalError(fmt::format("timerfd: {}", ErrnoText()));
  return s;
}

DriverServer::~DriverServer() {
  clients_.clear();
  if (listen_fd_) {
    listen_fd_.Reset();
    unlink((paths_.root() / NSIM_DRIVER_SOCKET).c_str());
  }
  for (int d = 0; d < static_cast<int>(devices_.size()); ++d) FreeMemory(d);
}

absl::Status DriverServer::MakeMemory(int device) {
  Device& dev = devices_[static_cast<size_t>(device)];
  const std::string name = fmt::format("neuron{}-datastore", device);
  dev.memfd.Reset(memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  const int fd = dev.memfd.get();
  if (fd < 0 || ftruncate(fd, kSlots * kSlotSize) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return absl::InternalError(
        fmt::format("datastore memory of device {}: {}", device, ErrnoText()));
  }
  // A read-only reopen: a mapping of it can never be made writable (monitors' fds).
  dev.memfd_ro.Reset(open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDONLY | O_CLOEXEC));
  void* base = mmap(nullptr, kSlots * kSlotSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!dev.memfd_ro || base == MAP_FAILED) {
    return absl::InternalError(
        fmt::format("datastore memory of device {}: {}", device, ErrnoText()));
  }
  dev.base = static_cast<uint8_t*>(base);
  return absl::OkStatus();
}

void DriverServer::FreeMemory(int device) {
  Device& dev = devices_[static_cast<size_t>(device)];
  if (dev.base != nullptr) munmap(dev.base, kSlots * kSlotSize);
  dev.memfd.Reset();
  dev.memfd_ro.Reset();
  dev.base = nullptr;
}

// ---------------------------------------------------------------------------------------------
// Connections

// Entries before the connections': the listening socket, the flush timer.
constexpr size_t kFixedPollFds = 2;

void DriverServer::AppendPollFds(std::vector<pollfd>* fds) const {
  fds->push_back({listen_fd_.get(), POLLIN, 0});
  fds->push_back({flush_timer_.get(), POLLIN, 0});
  for (const auto& c : clients_) {
    // A client waiting out a reset or a flush sends nothing more until it is answered.
    const bool answered = !c->waiting && !c->closing;
    fds->push_back({c->fd.get(), static_cast<int16_t>(answered ? POLLIN : 0), 0});
  }
}

void DriverServer::Serve(std::span<const pollfd> fds) {
  if (fds.size() < kFixedPollFds) return;
  // Connections first (their indices match), then flushes that have slept, then new ones.
  std::vector<Client*> gone;
  for (size_t i = kFixedPollFds; i < fds.size() && i - kFixedPollFds < clients_.size(); ++i) {
    if (fds[i].revents == 0) continue;
    Client& c = *clients_[i - kFixedPollFds];
    if ((fds[i].revents & (POLLHUP | POLLERR)) != 0 || !Receive(c)) gone.push_back(&c);
  }
  for (Client* c : gone) Drop(*c);
  if ((fds[1].revents & POLLIN) != 0) {
    uint64_t expirations = 0;  // read only to clear the timer; FinishFlushes looks at the clock
    [[maybe_unused]] const ssize_t n = read(flush_timer_.get(), &expirations, sizeof(expirations));
    FinishFlushes();
  }
  if ((fds[0].revents & POLLIN) != 0) Accept();
}

void DriverServer::Accept() {
  for (;;) {
    UniqueFd fd(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        log_->warn("driver socket accept: {}", ErrnoText());
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (clients_.size() >= kMaxClients ||
        getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      continue;  // fd closes here
    }
    auto c = std::make_unique<Client>();
    c->fd = std::move(fd);
    c->pid = cred.pid;
    clients_.push_back(std::move(c));
  }
}

bool DriverServer::Receive(Client& c) {
  for (;;) {
    nsim_request rq{};
    const ssize_t n = recv(c.fd.get(), &rq, sizeof(rq), MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n < static_cast<ssize_t>(offsetof(nsim_request, data)) || rq.len > sizeof(rq.data) ||
        offsetof(nsim_request, data) + rq.len > size_t(n)) {
      log_->warn("driver socket: malformed request from pid {}; dropping it", c.pid);
      return false;
    }
    nsim_reply rp{};
    int send_fd = -1;
    if (!Handle(c, rq, &rp, &send_fd)) {
      if (!c.closing) c.waiting = rq;  // a sleeping flush is answered by FinishFlushes
      return true;
    }
    Reply(c, rp, send_fd);
    if (c.waiting) return true;
  }
}

// `send_fd` stays the device's (a plain int, borrowed): SCM_RIGHTS gives the process a duplicate
// of it, so nothing is handed over here and nothing must be closed after the send.
void DriverServer::Reply(Client& c, const nsim_reply& rp, int send_fd) {
  iovec iov{const_cast<nsim_reply*>(&rp), offsetof(nsim_reply, data) + rp.len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (send_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* h = CMSG_FIRSTHDR(&msg);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(h), &send_fd, sizeof(int));
  }
  // The process waits for this answer; a full socket buffer only delays it (replies are small).
  while (sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL) < 0 && (errno == EINTR || errno == EAGAIN)) {
    pollfd p{c.fd.get(), POLLOUT, 0};
    poll(&p, 1, 100);
  }
}

// The connection's end is the process's: everything it held goes, as the driver's release
// of its last fd (SIGKILL included).
void DriverServer::Drop(Client& c) {
  for (const auto& [device, n] : c.fds) {
    if (!Valid(device)) continue;
    auto& attached = devices_[static_cast<size_t>(device)].attached;
    if (auto it = attached.find(c.pid); it != attached.end() && (it->second.fds -= n) <= 0) {
      Detach(device, c.pid);
    }
  }
  for (const auto& [device, n] : c.opens) {
    if (!Valid(device)) continue;
    Device& dev = devices_[static_cast<size_t>(device)];
    dev.open_count = std::max(0, dev.open_count - n);
    if (dev.open_count == 0) {
      for (int s = 0; s < kSlots; ++s) {
        if (dev.slots[static_cast<size_t>(s)].pid != 0) ReleaseSlot(device, s);
      }
    }
  }
  // A slot claimed without an attach of this connection (pid 0 on an fd of an earlier one) is
  // this process's too; it goes with the process unless another connection still attaches it.
  for (int d = 0; d < static_cast<int>(devices_.size()); ++d) {
    const std::optional<int> slot = SlotOf(d, c.pid);
    if (slot && !devices_[static_cast<size_t>(d)].attached.contains(c.pid)) ReleaseSlot(d, *slot);
  }
  // Erasing the client closes its connection.
  std::erase_if(clients_, [&c](const std::unique_ptr<Client>& p) { return p.get() == &c; });
}

bool DriverServer::Valid(int device) const {
  return device >= 0 && device < static_cast<int>(devices_.size());
}

// ---------------------------------------------------------------------------------------------
// Requests

bool DriverServer::Handle(Client& c, const nsim_request& rq, nsim_reply* rp, int* send_fd) {
  bool wait = false;
  if (!Valid(rq.device) || !host_->StateOf(rq.device)) {
    rp->err = ENODEV;  // unplugged: the device is gone under the open fd
    if (rq.op == NSIM_OP_FLUSH) Flush(c, rq.device);
    if (rq.op == NSIM_OP_RELEASE) Release(c, rq.device);
    return true;
  }
  switch (rq.op) {
    case NSIM_OP_OPEN:
      rp->err = Open(c, rq, &wait);
      break;
    case NSIM_OP_FLUSH:
      if (DelayFlush(c, rq.device)) return false;
      Flush(c, rq.device);
      break;
    case NSIM_OP_RELEASE:
      Release(c, rq.device);
      break;
    case NSIM_OP_IOCTL:
      rp->err = Ioctl(c, rq, rp, &wait);
      break;
    case NSIM_OP_MEMFD:
      rp->err = Memfd(rq.device, rq, rp, send_fd);
      break;
    default:
      rp->err = EINVAL;
  }
  return !wait;
}

void DriverServer::ReleaseSlot(int device, int slot) {
  Device& dev = devices_[static_cast<size_t>(device)];
  auto& s = dev.slots[static_cast<size_t>(slot)];
  log_->info("runtime pid {} released its datastore on device {}", s.pid, device);
  // Folds into sysfs first (docs/architecture.md#daemon-is-the-driver)
  mirror_->Release(device, slot);
  if (dev.base != nullptr) std::memset(dev.base + slot * kSlotSize, 0, kSlotSize);
  s.pid = 0;
  s.cleared = ++clear_seq_;
}

std::optional<int> DriverServer::SlotOf(int device, pid_t pid) const {
  const Device& dev = devices_[static_cast<size_t>(device)];
  for (int s = 0; s < kSlots; ++s) {
    if (dev.slots[static_cast<size_t>(s)].pid == pid) return s;
  }
  return std::nullopt;
}

int DriverServer::Ioctl(Client& c, const nsim_request& rq, nsim_reply* rp, bool* wait) {
  const int d = rq.device;
  // Free-access fds reach only the misc requests.
  const bool misc = rq.cmd == NEURON_ABI_DEVICE_BASIC_INFO || rq.cmd == NEURON_ABI_DEVICE_BDF_EXT ||
                    rq.cmd == NEURON_ABI_PRINTK;
  if (rq.mode == NSIM_MODE_FREE && !misc) return EINVAL;
  switch (rq.cmd) {
    case NEURON_ABI_DEVICE_READY: {
      const DeviceState state = *host_->StateOf(d);
      if (state == DeviceState::kReset) {
        *wait = true;
        return 0;
      }
      rp->len = 1;
      rp->data[0] = state == DeviceState::kReady ? 1 : 0;
      return 0;
    }
    case NEURON_ABI_GET_ALL_APPS_INFO:
      return AppsInfo(d, rq, rp);
    case NEURON_ABI_ACQUIRE_DS:
      return AcquireDs(c, d, rq, rp);
    case NEURON_ABI_RELEASE_DS:
      return ReleaseDs(c, d, rq);
    case NEURON_ABI_DEVICE_BASIC_INFO: {
      neuron_abi_basic_info info{
          spec_.chip->arch_type == "NDv2" ? NEURON_ABI_ARCH_V2 : NEURON_ABI_ARCH_V3, 0};
      rp->len = sizeof(info);
      std::memcpy(rp->data, &info, sizeof(info));
      return 0;
    }
    case NEURON_ABI_DEVICE_BDF_EXT:
      return BdfExt(rq, rp);
    case NEURON_ABI_PRINTK:
      return Printk(rq);
    default:
      return EINVAL;  // unmatched requests fall through to the misc handler, which refuses
  }
}

int DriverServer::AppsInfo(int device, const nsim_request& rq, nsim_reply* rp) {
  neuron_abi_apps_header header{};
  std::memcpy(&header, rq.data, sizeof(header));
  const Device& dev = devices_[static_cast<size_t>(device)];
  const uint32_t n = std::min<uint32_t>(header.capacity, dev.attached.size());
  std::memset(rp->data, kUninitialised, sizeof(header) + n * sizeof(neuron_abi_app_info));
  header.size = n;
  std::memcpy(rp->data, &header, sizeof(header));
  uint32_t i = 0;
  for (const auto& [pid, fds] : dev.attached) {
    if (i == n) break;
    FillAppInfo(device, pid, header.flags,
                rp->data + sizeof(header) + i++ * sizeof(neuron_abi_app_info));
  }
  rp->len = static_cast<uint32_t>(sizeof(header) + n * sizeof(neuron_abi_app_info));
  return 0;
}

void DriverServer::FillAppInfo(int device, pid_t pid, uint16_t flags, uint8_t* out) {
  neuron_abi_app_info info;
  std::memcpy(&info, out, sizeof(info));  // keeps the "uninitialised" bytes
  info.pid = pid;
  info.nc_lock_map = 0;
  info.host_mem_size = 0;
  info.device_mem_size = 0;
  if ((flags & NEURON_ABI_APPS_NC_LOCK_INFO) != 0) {
    info.nc_lock_map = CoreLockMap(device, pid);
    for (int i = 0; i < NEURON_ABI_APPS_CORES; ++i) {
      if ((info.nc_lock_map & (1u << i)) == 0) continue;
      const std::string uuid = fmt::format("{:016x}{:08x}{:08x}", spec_.devices, device, i);
      std::memcpy(info.uuid[i], uuid.data(), sizeof(info.uuid[i]));
    }
  }
  if ((flags & NEURON_ABI_APPS_MEM_USAGE) != 0) {
    if (std::optional<int> slot = SlotOf(device, pid)) {
      const DatastoreMemory mem = mirror_->MemoryOf(device, *slot);
      info.host_mem_size = mem.host_bytes;
      info.device_mem_size = mem.device_bytes;
    }
  }
  std::memcpy(out, &info, sizeof(info));
}

uint8_t DriverServer::CoreLockMap(int device, pid_t pid) {
  const auto now = std::chrono::steady_clock::now();
  if (now - holders_read_ > kLockHoldersMaxAge) {
    lock_holders_ = CoreLockHolders(paths_);
    holders_read_ = now;
  }
  const auto it = lock_holders_.find(pid);
  if (it == lock_holders_.end()) return 0;
  const int per_device = LogicalCoresPerDevice(spec_, lnc_);
  uint8_t map = 0;
  for (const int global : it->second) {
    if (global / per_device != device) continue;
    const int first_physical = (global % per_device) * lnc_;
    for (int p = first_physical; p < first_physical + lnc_; ++p) {
      if (p < NEURON_ABI_APPS_CORES) map = static_cast<uint8_t>(map | (1u << p));
    }
  }
  return map;
}

int DriverServer::AcquireDs(Client& c, int device, const nsim_request& rq, nsim_reply* rp) {
  neuron_abi_ds_info info{};
  std::memcpy(&info, rq.data, sizeof(info));
  Device& dev = devices_[static_cast<size_t>(device)];
  std::optional<int> slot;
  if (info.pid != 0) {
    slot = SlotOf(device, info.pid);  // anyone may look: no permission check, no refcount
    if (!slot) return ENOENT;
  } else {
    slot = SlotOf(device, c.pid);
    if (!slot) {  // claim the least recently cleared free slot
      for (int s = 0; s < kSlots; ++s) {
        const auto& cand = dev.slots[static_cast<size_t>(s)];
        if (cand.pid == 0 &&
            (!slot || cand.cleared < dev.slots[static_cast<size_t>(*slot)].cleared)) {
          slot = s;
        }
      }
      if (!slot) return ENOMEM;
      dev.slots[static_cast<size_t>(*slot)].pid = c.pid;
      mirror_->Attach(device, *slot, c.pid, dev.base + *slot * kSlotSize);
    }
  }
  info.mmap_offset = BaseOffset(spec_) + static_cast<uint64_t>(*slot) * kSlotSize;
  info.size = kSlotSize;
  rp->len = sizeof(info);
  std::memcpy(rp->data, &info, sizeof(info));
  return 0;
}

int DriverServer::ReleaseDs(Client& c, int device, const nsim_request& rq) {
  neuron_abi_ds_info info{};
  std::memcpy(&info, rq.data, sizeof(info));
  if (info.pid != 0 && info.pid != c.pid) return 0;  // a foreign pid: a no-op
  if (std::optional<int> slot = SlotOf(device, c.pid)) ReleaseSlot(device, *slot);
  return 0;
}

int DriverServer::BdfExt(const nsim_request& rq, nsim_reply* rp) const {
  const int64_t target = rq.arg;
  if (target < 0 || target >= spec_.devices) return EINVAL;
  const std::string& bdf = spec_.placement[static_cast<size_t>(target)].bdf;
  unsigned domain = 0, bus = 0, slot = 0, func = 0;
  if (std::sscanf(bdf.c_str(), "%x:%x:%x.%x", &domain, &bus, &slot, &func) != 4) return EINVAL;
  neuron_abi_bdf_ext out{};
  out.domain = domain;
  out.bus = bus;
  out.slot = static_cast<uint8_t>(slot);
  out.func = static_cast<uint8_t>(func);
  rp->len = sizeof(out);
  std::memcpy(rp->data, &out, sizeof(out));
  return 0;
}

int DriverServer::Printk(const nsim_request& rq) {
  if (rq.arg <= 0 || rq.arg > NEURON_ABI_PRINTK_MAX || rq.len != rq.arg) return EFAULT;
  if (rq.data[rq.len - 1] != '\0') return EBADMSG;
  host_->Kmsg(kKernErr, std::string(reinterpret_cast<const char*>(rq.data)));
  return 0;
}

int DriverServer::Memfd(int device, const nsim_request& rq, nsim_reply* rp, int* send_fd) {
  const Device& dev = devices_[static_cast<size_t>(device)];
  *send_fd = rq.mode == NSIM_MODE_RDWR ? dev.memfd.get() : dev.memfd_ro.get();
  if (*send_fd < 0) return ENODEV;
  const nsim_memfd_info info{BaseOffset(spec_), static_cast<uint32_t>(kSlotSize), kSlots};
  rp->len = sizeof(info);
  std::memcpy(rp->data, &info, sizeof(info));
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Device events

void DriverServer::OnStateChange(int device) {
  for (auto& c : clients_) {
    if (!c->waiting || c->waiting->device != device) continue;
    const nsim_request rq = *c->waiting;
    c->waiting.reset();
    nsim_reply rp{};
    int send_fd = -1;
    if (!Handle(*c, rq, &rp, &send_fd)) {
      c->waiting = rq;
      continue;
    }
    Reply(*c, rp, send_fd);
  }
}

void DriverServer::OnUnplug(int device) {
  Device& dev = devices_[static_cast<size_t>(device)];
  for (int s = 0; s < kSlots; ++s) {
    if (dev.slots[static_cast<size_t>(s)].pid != 0) ReleaseSlot(device, s);
  }
  dev.attached.clear();
  dev.open_count = 0;
  for (auto& c : clients_) {
    c->fds.erase(device);
    c->opens.erase(device);
  }
  FreeMemory(device);
  OnStateChange(device);  // opens waiting on it fail: the device is gone
}

void DriverServer::OnPlug(int device) {
  if (absl::Status s = MakeMemory(device); !s.ok()) log_->error("{}", std::string{s.message()});
}

int DriverServer::OpenCount(int device) const {
  return Valid(device) ? devices_[static_cast<size_t>(device)].open_count : 0;
}

std::vector<pid_t> DriverServer::Attached(int device) const {
  std::vector<pid_t> out;
  if (!Valid(device)) return out;
  for (const auto& [pid, n] : devices_[static_cast<size_t>(device)].attached) out.push_back(pid);
  return out;
}

}  // namespace neuron::sim

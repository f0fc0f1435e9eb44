#include "core/discovery/bdf.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/driver/driver_abi.h"

namespace neuron {
namespace {

class TableResolver final : public BdfResolver {
 public:
  explicit TableResolver(std::vector<std::string> bdfs) : bdfs_(std::move(bdfs)) {}
  absl::StatusOr<std::string> Resolve(int index) override {
    if (index < 0 || static_cast<size_t>(index) >= bdfs_.size() || bdfs_[index].empty()) {
      return absl::NotFoundError(fmt::format("no PCI address for neuron{}", index));
    }
    return bdfs_[index];
  }
  std::string_view name() const override { return "table"; }

 private:
  std::vector<std::string> bdfs_;
};

class IoctlResolver final : public BdfResolver {
 public:
  explicit IoctlResolver(const RootPaths& root) : root_(root) {}

  absl::StatusOr<std::string> Resolve(int index) override {
    const std::filesystem::path node = root_.DevNeuron(index);
    // O_WRONLY is the driver's free-access mode: no attach, no open count, misc ioctls only.
    const int fd = ::open(node.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      if (errno == ENOENT) {
        return absl::NotFoundError(fmt::format("open {}: {}", node.string(), std::strerror(errno)));
      }
      return Once(absl::UnavailableError(fmt::format("{}: no PCI addresses: open: {}",
                                                     (root_.Dev() / "neuron*").string(),
                                                     std::strerror(errno))));
    }
    neuron_abi_bdf_ext arg{};
    arg.nd_index = 0;  // relative to the device the fd is open on
    const int rc = ::ioctl(fd, NEURON_ABI_DEVICE_BDF_EXT, &arg);
    const int err = errno;
    ::close(fd);
    if (rc != 0) {
      // Said once for all devices, naming none: the same reason holds for every one of them,
      // and a message that names whichever device came first would differ between scans.
      return Once(absl::UnavailableError(fmt::format(
          "{}: no PCI addresses: DEVICE_BDF_EXT: {}{}", (root_.Dev() / "neuron*").string(),
          rc > 0 ? "bad argument" : std::strerror(err),
          err == ENOTTY ? " (no Neuron driver behind the device nodes)" : "")));
    }
    if (arg.bus > 0xff || arg.slot > 0x1f || arg.func > 7) {
      return absl::DataLossError(
          fmt::format("{}: driver returned an impossible PCI address", node.string()));
    }
    return FormatBdf(arg.domain, arg.bus, arg.slot, arg.func);
  }
  std::string_view name() const override { return "ioctl"; }

 private:
  // The same failure on every device says nothing new after the first.
  absl::Status Once(absl::Status s) {
    if (reported_) return absl::NotFoundError(s.message());
    reported_ = true;
    return s;
  }

  RootPaths root_;
  bool reported_ = false;
};

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::unique_ptr<BdfResolver> MakeIoctlBdfResolver(const RootPaths& root) {
  return std::make_unique<IoctlResolver>(root);
}

std::unique_ptr<BdfResolver> MakeTableBdfResolver(std::vector<std::string> bdfs) {
  return std::make_unique<TableResolver>(std::move(bdfs));
}

std::string FormatBdf(unsigned domain, unsigned bus, unsigned slot, unsigned func) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, slot, func);
}

bool IsBdf(std::string_view t) {
  // The domain is at least 4 digits (the kernel prints "%04x"; VMD domains have 5).
  if (t.size() < 12 || t.size() > 16) return false;
  const size_t d = t.size() - 8;  // length of the domain
  if (t[d] != ':' || t[d + 3] != ':' || t[d + 6] != '.') return false;
  for (size_t i = 0; i < t.size() - 1; ++i) {
    if (i == d || i == d + 3 || i == d + 6) continue;
    if (!IsLowerHex(t[i])) return false;
  }
  return t.back() >= '0' && t.back() <= '7';
}

}  // namespace neuron

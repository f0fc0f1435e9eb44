#include "core/bdf.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace neuron {
namespace {

// From the driver's neuron_ioctl.h (aws-neuron/aws-neuron-driver): `nd_index` is relative to
// the device the fd was opened on ("for containers the index passed will be relative to the
// device ordering as seen from the container"), so we open /dev/neuronN and pass 0.
struct NeuronIoctlDeviceBdfExt {
  uint32_t nd_index;    // [in]
  uint32_t domain;      // [out]
  uint32_t bus_number;  // [out]
  uint8_t slot;         // [out]
  uint8_t func;         // [out]
};
static_assert(sizeof(NeuronIoctlDeviceBdfExt) == 16,
              "layout of struct neuron_ioctl_device_bdf_ext");

// The driver declares it `_IOR(NEURON_IOCTL_BASE, 106, struct neuron_ioctl_device_bdf_ext *)`:
// the size field holds sizeof(a pointer), not of the struct, and the driver compares the whole
// command word, so we must encode it the same way.
static_assert(kIoctlDeviceBdfExt == _IOR('N', 106, NeuronIoctlDeviceBdfExt*));

class NodeInfoResolver final : public BdfResolver {
 public:
  explicit NodeInfoResolver(NodeInfo info) : info_(std::move(info)) {}

  absl::StatusOr<std::string> Resolve(int index) override {
    if (index < 0 || static_cast<size_t>(index) >= info_.device_bdf.size() ||
        info_.device_bdf[index].empty()) {
      return absl::NotFoundError(fmt::format("node.json has no PCI address for neuron{}", index));
    }
    const std::string& bdf = info_.device_bdf[index];
    if (!IsBdf(bdf)) {
      return absl::DataLossError(
          fmt::format("node.json: PCI address \"{}\" of neuron{} is malformed", bdf, index));
    }
    return bdf;
  }
  std::string_view name() const override { return "node.json"; }

 private:
  NodeInfo info_;
};

class IoctlResolver final : public BdfResolver {
 public:
  explicit IoctlResolver(const RootPaths& root) : root_(root) {}

  absl::StatusOr<std::string> Resolve(int index) override {
    const std::filesystem::path node = root_.DevNeuron(index);
    // O_WRONLY is the driver's free-access mode: no attach, no open count, misc ioctls only.
    const int fd = ::open(node.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      const std::string msg = fmt::format("open {}: {}", node.string(), std::strerror(errno));
      return errno == ENOENT ? absl::NotFoundError(msg) : absl::UnavailableError(msg);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
      ::close(fd);
      return absl::NotFoundError(fmt::format("{} is not a character device", node.string()));
    }
    NeuronIoctlDeviceBdfExt arg{};
    arg.nd_index = 0;
    const int rc = ::ioctl(fd, static_cast<unsigned long>(kIoctlDeviceBdfExt), &arg);
    const int err = errno;
    ::close(fd);
    if (rc != 0) {
      return absl::UnavailableError(fmt::format("ioctl NEURON_IOCTL_DEVICE_BDF_EXT on {}: {}",
                                                node.string(), std::strerror(err)));
    }
    if (arg.bus_number > 0xff || arg.slot > 0x1f || arg.func > 7) {
      return absl::DataLossError(
          fmt::format("{}: driver returned an impossible PCI address", node.string()));
    }
    return FormatBdf(arg.domain, arg.bus_number, arg.slot, arg.func);
  }
  std::string_view name() const override { return "ioctl"; }

 private:
  RootPaths root_;
};

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::unique_ptr<BdfResolver> MakeNodeInfoBdfResolver(NodeInfo info) {
  return std::make_unique<NodeInfoResolver>(std::move(info));
}

std::unique_ptr<BdfResolver> MakeIoctlBdfResolver(const RootPaths& root) {
  return std::make_unique<IoctlResolver>(root);
}

std::unique_ptr<BdfResolver> MakeBdfResolver(const RootPaths& root,
                                             const absl::StatusOr<NodeInfo>& node_info) {
  if (node_info.ok()) return MakeNodeInfoBdfResolver(*node_info);
  return MakeIoctlBdfResolver(root);
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

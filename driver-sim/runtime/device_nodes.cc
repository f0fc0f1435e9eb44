#include "driver-sim/runtime/device_nodes.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

namespace neuron::nrt {
namespace {

// The host device behind an fd: the placeholder the driver's name resolved to ends in
// "/dev/neuron<H>".
absl::StatusOr<int> HostIndexOf(int fd, const std::string& name) {
  char path[4096];
  const std::string link = fmt::format("/proc/self/fd/{}", fd);
  const ssize_t n = ::readlink(link.c_str(), path, sizeof(path) - 1);
  const std::string_view target(path, n > 0 ? static_cast<size_t>(n) : 0);
  const size_t at = target.rfind("/dev/neuron");
  int host = -1;
  if (at != std::string_view::npos) {
    const std::string_view digits = target.substr(at + 11);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), host);
    if (ec != std::errc() || p != digits.data() + digits.size()) host = -1;
  }
  if (host < 0) {
    return absl::FailedPreconditionError(
        fmt::format("{} is not a Neuron device node (it is {})", name, target));
  }
  return host;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceNodes>> DeviceNodes::Open(int first, int last) {
  std::unique_ptr<DeviceNodes> nodes(new DeviceNodes());
  for (int v = first; v <= last; ++v) {
    const std::string name = fmt::format("/dev/neuron{}", v);
    UniqueFd fd(::open(name.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd) {
      const int err = errno;
      if (err == EBUSY) {
        return absl::ResourceExhaustedError(fmt::format(
            "nd{}: pid {} failed to open: 16 processes already use the device", v, ::getpid()));
      }
      return absl::FailedPreconditionError(fmt::format(
          "open {}: {}{}", name, std::strerror(err),
          err == ENOENT ? " (no Neuron driver here; simulated nodes need neuron-sim exec)" : ""));
    }
    absl::StatusOr<int> host = HostIndexOf(fd.get(), name);
    if (!host.ok()) return host.status();
    nodes->host_of_view_[v] = *host;
    nodes->fd_of_host_[*host] = std::move(fd);
  }
  return nodes;
}

DeviceNodes::~DeviceNodes() {
  for (auto& [host, fd] : fd_of_host_) fd.Reset();  // in host order
}

absl::StatusOr<CoreRange> DeviceNodes::ToHost(CoreRange view, int cores_per_device) const {
  if (view.count <= 0) return view;
  const int first_dev = view.first / cores_per_device;
  const int last_dev = view.last() / cores_per_device;
  for (int v = first_dev; v <= last_dev; ++v) {
    const auto it = host_of_view_.find(v);
    const auto first = host_of_view_.find(first_dev);
    if (it == host_of_view_.end() || first == host_of_view_.end() ||
        it->second != first->second + (v - first_dev)) {
      return absl::InvalidArgumentError(
          fmt::format("NeuronCores nc{}-nc{} span devices that are not consecutive on the host",
                      view.first, view.last()));
    }
  }
  const int offset = (host_of_view_.at(first_dev) - first_dev) * cores_per_device;
  return CoreRange{view.first + offset, view.count};
}

void DeviceNodes::KeepOnly(int first_host, int last_host) {
  for (auto it = fd_of_host_.begin(); it != fd_of_host_.end();) {
    if (it->first >= first_host && it->first <= last_host) {
      ++it;
      continue;
    }
    it = fd_of_host_.erase(it);  // closes the fd
  }
}

int DeviceNodes::FdOfHost(int host_device) const {
  const auto it = fd_of_host_.find(host_device);
  return it == fd_of_host_.end() ? -1 : it->second.get();
}

}  // namespace neuron::nrt

#pragma once
// Device index -> PCI address ("0000:10:1c.0"). The neuron class device has no `device` link,
// so sysfs cannot answer this (DRIVER-INTERFACE §1); two back ends behind one interface:
//   - node.json: the simulator's ROOT/run/neuron/node.json (deviation D7);
//   - driver ioctl: NEURON_IOCTL_DEVICE_BDF_EXT (106) on ROOT/dev/neuronN opened O_WRONLY, the
//     driver's "free access" mode, which attaches no process and takes none of the 16 slots.
// Resolvers are not thread-safe: one owner (a Discovery scan).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/node_info.h"
#include "core/sysfs_names.h"

namespace neuron {

class BdfResolver {
 public:
  virtual ~BdfResolver() = default;
  // NotFound when the back end has no address for the device; other errors name the source.
  virtual absl::StatusOr<std::string> Resolve(int index) = 0;
  virtual std::string_view name() const = 0;
};

// From an already parsed node.json.
std::unique_ptr<BdfResolver> MakeNodeInfoBdfResolver(NodeInfo info);
// Asks the driver. Opens RootPaths::DevNeuron(index) and refuses anything that is not a
// character device, so simulator placeholders (D8) are never sent an ioctl.
std::unique_ptr<BdfResolver> MakeIoctlBdfResolver(const RootPaths& root);
// node.json when it was read successfully (the simulator), else the driver ioctl.
std::unique_ptr<BdfResolver> MakeBdfResolver(const RootPaths& root,
                                             const absl::StatusOr<NodeInfo>& node_info);

// NEURON_IOCTL_DEVICE_BDF_EXT as the driver encodes it (neuron_ioctl.h): _IOR('N', 106, <pointer>),
// i.e. direction read, size 8 (a pointer's, not the 16-byte struct's), type 'N', number 106.
inline constexpr uint32_t kIoctlDeviceBdfExt = (2u << 30) | (8u << 16) | ('N' << 8) | 106u;

// "%04x:%02x:%02x.%x", the kernel's PCI device name.
std::string FormatBdf(unsigned domain, unsigned bus, unsigned slot, unsigned func);
// True for "dddd:bb:ss.f" in lower-case hex.
bool IsBdf(std::string_view text);

}  // namespace neuron

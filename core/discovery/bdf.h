#pragma once
// Device index -> PCI address ("0000:10:1c.0"). The neuron class device has no `device` link,
// so sysfs cannot answer this (docs/driver-interface.md#device-nodes); the driver does:
// NEURON_IOCTL_DEVICE_BDF_EXT (106) on ROOT/dev/neuronN opened O_WRONLY, the driver's "free access"
// mode, which attaches no process and takes none of the 16 slots. The simulated driver answers it
// the same way. Resolvers are not thread-safe: one owner (a Discovery scan).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/driver/sysfs_names.h"

namespace neuron {

class BdfResolver {
 public:
  virtual ~BdfResolver() = default;
  // NotFound when the back end has no address for the device; other errors name the source.
  virtual absl::StatusOr<std::string> Resolve(int index) = 0;
  virtual std::string_view name() const = 0;
};

// Asks the driver through RootPaths::DevNeuron(index). A device node no driver answers (a
// plain file: ENOTTY) is reported once, then NotFound for the other devices.
std::unique_ptr<BdfResolver> MakeIoctlBdfResolver(const RootPaths& root);
// From a table indexed by device (tests of discovery without a driver).
std::unique_ptr<BdfResolver> MakeTableBdfResolver(std::vector<std::string> bdfs);

// "%04x:%02x:%02x.%x", the kernel's PCI device name.
std::string FormatBdf(unsigned domain, unsigned bus, unsigned slot, unsigned func);
// True for "dddd:bb:ss.f" in lower-case hex.
bool IsBdf(std::string_view text);

}  // namespace neuron

#pragma once
// Owning handles for libudev objects. Private to core (discovery_udev.cc, events.cc): nothing
// outside core includes libudev (docs/style.md#one-interface-per-seam).

#include <libudev.h>

#include <memory>

namespace neuron::udev_util {

struct UdevUnref {
  void operator()(udev* p) const { udev_unref(p); }
  void operator()(udev_device* p) const { udev_device_unref(p); }
  void operator()(udev_enumerate* p) const { udev_enumerate_unref(p); }
  void operator()(udev_monitor* p) const { udev_monitor_unref(p); }
};

using Udev = std::unique_ptr<udev, UdevUnref>;
using UdevDevice = std::unique_ptr<udev_device, UdevUnref>;
using UdevEnumerate = std::unique_ptr<udev_enumerate, UdevUnref>;
using UdevMonitor = std::unique_ptr<udev_monitor, UdevUnref>;

}  // namespace neuron::udev_util

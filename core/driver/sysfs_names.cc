#include "core/driver/sysfs_names.h"

namespace neuron {

std::string_view DeviceStateName(DeviceState s) {
  switch (s) {
    case DeviceState::kReset:
      return "RESET";
    case DeviceState::kReady:
      return "READY";
    case DeviceState::kInvalid:
      return "INVALID";
  }
  return "UNKNOWN";
}

}  // namespace neuron

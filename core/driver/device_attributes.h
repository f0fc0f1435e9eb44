#pragma once
// The facts of a device that the agent publishes as the driver prints them: the DRA slice's
// attributes (plugin/dra/slice.cc) and neuron-ls's JSON object (top/ls_report.cc) iterate this
// table, discovery reads each row's file into the inventory (core/discovery/inventory.cc), the
// layout check expects the files every generation has (driver_generations.cc), and the simulator
// writes each row's file (driver-sim/driver/sim_tree.cc). A new attribute is a row here and a
// value there.
//
// Facts the agent computes with (core count, links, state, PCI address, NUMA node) stay typed
// fields of NeuronDevice; this table is for what is only passed on.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/driver/sysfs_files.h"

namespace neuron {

enum class AttributeType { kString, kInt };

struct DeviceAttributeSpec {
  std::string_view key;       // neuron-ls's JSON key: "serial_number"
  std::string_view dra_name;  // the DRA slice's attribute (a C identifier): "serialNumber"
  std::string_view file;      // relative to the device's sysfs directory: "info/serial_number"
  AttributeType type = AttributeType::kString;  // a kInt row's text must be an integer
  // Whether every driver generation has the file, so that the layout check expects it
  // (core/driver/driver_generations.cc); false for a file only newer drivers print.
  bool every_generation = true;
};

inline constexpr std::array kDeviceAttributes{
    // 16 hex digits; "\n" when the firmware read fails, which is absent, not empty.
    DeviceAttributeSpec{.key = "serial_number",
                        .dra_name = "serialNumber",
                        .file = sysfs::kSerialNumber,
                        .type = AttributeType::kString,
                        .every_generation = true},
};

// One device's values, in kDeviceAttributes' order; absent when the file is missing, empty or
// (a kInt row) not an integer, the last a discovery warning.
class DeviceAttributes {
 public:
  using Values = std::array<std::optional<std::string>, kDeviceAttributes.size()>;

  const Values& values() const { return values_; }
  // The value of the row named `key`; absent for an unknown key too.
  const std::optional<std::string>& Get(std::string_view key) const;
  // Row `row`'s value as a number (a kInt row's); absent when it is none.
  std::optional<int64_t> AsInt(size_t row) const;
  // Discovery's: row `row`'s value, its text checked already (inventory.cc).
  void Set(size_t row, std::optional<std::string> value) { values_.at(row) = std::move(value); }

  bool operator==(const DeviceAttributes&) const = default;

 private:
  Values values_;
};

}  // namespace neuron

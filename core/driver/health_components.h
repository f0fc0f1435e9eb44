#pragma once
// The hardware components a device's health names, in driver 2.30's vocabulary: the words its
// stats/hardware/health_status/unhealthy_components may list (SDK release notes of driver 2.30.2,
// docs/driver-interface.md#driver-generations). The agent names the component at fault with these
// words on every driver, mapping its older evidence onto them (core/node/device_health.h); the
// simulator writes them.
//
// Pure data and functions; thread-safe.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace neuron {

enum class HealthComponent : uint8_t {
  kHbm,
  kSram,
  kFirmwareServiceApi,
  kFirmwareServiceProcessor,
  kLinkIntraserver,
  kLinkHost,
  kLinkEfa,
  kLinkInterserver,
  kLinkSwitch,
  kAxiFabric,
};

// In the enum's order, as the release notes spell them.
inline constexpr std::array<std::string_view, 10> kHealthComponentNames{
    "hbm",
    "sram",
    "firmware_service_api",
    "firmware_service_processor",
    "link_intraserver",
    "link_host",
    "link_efa",
    "link_interserver",
    "link_switch",
    "axi_fabric"};

constexpr std::string_view HealthComponentName(HealthComponent c) {
  return kHealthComponentNames[static_cast<size_t>(c)];
}
std::optional<HealthComponent> HealthComponentNamed(std::string_view name);

// A set of components, ordered as the enum.
class HealthComponents {
 public:
  constexpr HealthComponents() = default;
  constexpr bool Has(HealthComponent c) const { return (bits_ & Bit(c)) != 0; }
  constexpr void Add(HealthComponent c) { bits_ |= Bit(c); }
  constexpr void Add(HealthComponents o) { bits_ |= o.bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  std::vector<HealthComponent> List() const;
  // "hbm,link_efa": the file's own format; "" when empty.
  std::string Join(std::string_view separator = ",") const;
  bool operator==(const HealthComponents&) const = default;

 private:
  static constexpr uint16_t Bit(HealthComponent c) {
    return static_cast<uint16_t>(1U << static_cast<unsigned>(c));
  }
  uint16_t bits_ = 0;
};

// unhealthy_components as read: the known words, and any word outside the vocabulary (kept, so
// that a newer driver's component is reported rather than dropped). Blank entries and
// whitespace around entries are ignored; "" and "\n" are the empty list.
struct ParsedComponents {
  HealthComponents known;
  std::vector<std::string> unknown;
};
ParsedComponents ParseHealthComponents(std::string_view text);

}  // namespace neuron

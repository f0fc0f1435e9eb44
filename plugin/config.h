#pragma once
// Configuration of neuron-device-plugin: defaults < config file (YAML) < environment < flags.
// plugin/README.md documents every key. Parsing never throws: yaml-cpp's exceptions are caught
// here and turned into InvalidArgument naming the file and line (STYLE 6, 8). Plain values;
// thread-compatible.

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/device_id.h"

namespace neuron::plugin {

enum class NonContiguousPolicy { kWarn, kReject };
enum class DiscoveryMode { kAuto, kDirectory, kUdev };
// How a pod sees its Neuron devices and cores (DESIGN decision 18, plugin/README.md "Device
// numbering"): kHost keeps the host's indices, kContainer renumbers them from 0.
enum class DeviceNumbering { kHost, kContainer };

// Which evidence makes a device or EFA interface Unhealthy (DESIGN decision 8).
struct HealthPolicy {
  bool absence = true;    // device or EFA interface gone
  bool state = true;      // device state not READY
  bool ecc = true;        // uncorrected ECC counters rose since the baseline
  bool hw_errors = true;  // a NEURON_HW_ERR= kernel record named the device since the baseline
  bool efa_port = true;   // EFA port not ACTIVE
  std::chrono::milliseconds poll_period{250};  // ECC counters
};

inline constexpr std::array<Resource, 4> kAllResources{Resource::kNeuron, Resource::kNeuronCore,
                                                       Resource::kEfa, Resource::kNeuronDevice};

struct Config {
  std::string root = "/";
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string config_file;
  // /healthz, /readyz, /metrics. 9410: a port of our own (tests pass port 0).
  std::string listen = "0.0.0.0:9410";
  int lnc = 0;  // 0: NEURON_LOGICAL_NC_CONFIG, then the instance default
  DiscoveryMode discovery = DiscoveryMode::kAuto;
  std::string log_level = "info";

  // Indexed by Resource; neurondevice is legacy and off by default.
  std::map<Resource, bool> resources{{Resource::kNeuron, true},
                                     {Resource::kNeuronCore, true},
                                     {Resource::kEfa, true},
                                     {Resource::kNeuronDevice, false}};
  NonContiguousPolicy noncontiguous = NonContiguousPolicy::kWarn;
  bool cdi = false;
  // Host until container numbering is checked on hardware (decision 18).
  DeviceNumbering device_numbering = DeviceNumbering::kHost;
  HealthPolicy health;
  // Socket names are "<short>-<suffix>.sock"; empty means the instance id (hostname without one).
  std::string socket_suffix;
  std::chrono::milliseconds podresources_period{1000};
  // How long an Allocate holding stays in the mask without PodResources showing it.
  std::chrono::milliseconds allocation_grace{30000};

  bool enabled(Resource r) const;
};

std::string_view NonContiguousPolicyName(NonContiguousPolicy p);
absl::StatusOr<NonContiguousPolicy> ParseNonContiguousPolicy(std::string_view text);
absl::StatusOr<DiscoveryMode> ParseDiscoveryMode(std::string_view text);
std::string_view DeviceNumberingName(DeviceNumbering n);
absl::StatusOr<DeviceNumbering> ParseDeviceNumbering(std::string_view text);
// "250ms", "1s", "2m" or a bare number of milliseconds.
absl::StatusOr<std::chrono::milliseconds> ParseDuration(std::string_view text);
// "neuron,neuroncore,efa": the short names of kResources (plus neurondevice); the listed ones are
// enabled and the rest disabled.
absl::Status ParseResourceList(std::string_view text, Config* config);
// "neuron" for aws.amazon.com/neuron, ...
std::string_view ShortName(Resource r);

// Applies the YAML text onto `config`; `source` names the file in errors ("FILE:LINE: ...").
// Unknown keys are errors, so a typo never silently falls back to a default.
absl::Status ApplyConfigYaml(std::string_view yaml, std::string_view source, Config* config);
absl::Status ApplyConfigFile(const std::string& path, Config* config);

// NEURON_ROOT, NEURON_LOGICAL_NC_CONFIG and NEURON_DP_* (README). `getenv` is injectable for
// tests. The config file path comes from NEURON_DP_CONFIG (before the file is read).
using GetEnvFn = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> RealGetEnv(const char* name);
absl::Status ApplyEnvironment(GetEnvFn getenv, Config* config);

// Values given on the command line; unset ones leave the lower layers alone.
struct Flags {
  std::optional<std::string> root, kubelet_dir, config_file, listen, log_level, socket_suffix,
      resources, noncontiguous, discovery, device_numbering;
  std::optional<int> lnc;
  std::optional<bool> cdi;
};

// Defaults, then the config file (--config, else NEURON_DP_CONFIG), then the environment, then
// the flags. Errors name their source (file and line, variable, or flag).
absl::StatusOr<Config> ResolveConfig(const Flags& flags, GetEnvFn getenv);

}  // namespace neuron::plugin

#pragma once
// Configuration of neuron-device-plugin: defaults < config file (YAML) < environment < flags.
// plugin/README.md documents every key. Parsing never throws: yaml-cpp's exceptions are caught
// here and turned into InvalidArgument naming the file and line
// (docs/style.md#status-across-modules, #bad-input). Plain values; thread-compatible.

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/duration.h"
#include "core/discovery/make_discovery.h"
#include "core/model/device_id.h"
#include "core/model/node_flags.h"
#include "core/node/device_health.h"

namespace neuron::plugin {

enum class NonContiguousPolicy { kWarn, kReject };
// Which kubelet API the plugin serves (docs/kubelet-api.md#dra): the device-plugin API, or the
// DRA kubelet plugin API. Never both: the kubelet would count every device twice.
enum class Api { kDevicePlugin, kDra };
using ::neuron::DiscoveryMode;  // core/discovery/make_discovery.h chooses the back end
// How a pod sees its Neuron devices and cores (docs/architecture.md#device-numbering,
// plugin/README.md#device-numbering): kHost keeps the host's indices, kContainer renumbers them
// from 0.
enum class DeviceNumbering { kHost, kContainer };

// What the plugin does about a class of evidence (docs/OPERATIONS.md#remediation), from the least
// to the most: nothing; the device Unhealthy to the kubelet and, under DRA, tainted NoSchedule
// (None for degraded evidence where the API server takes it); the same with NoExecute under DRA,
// and the Node condition in device-plugin mode, which has no device taints; `taint` and then a
// device reset proved by the active check (plugin/remediation.h); `taint` and the Node condition
// that AWS's node-recovery replaces the node on.
enum class Action : uint8_t { kIgnore, kTaint, kEvict, kReset, kNode };
std::string_view ActionName(Action a);  // "ignore", "taint", "evict", "reset", "node"
absl::StatusOr<Action> ParseAction(std::string_view text);

// Which evidence makes a device or EFA interface Unhealthy, and what the plugin does about it
// (docs/architecture.md#health, docs/OPERATIONS.md#remediation): an action per class of evidence
// (core/node/device_health.h), `ignore` for a class that decides nothing. The config file's older
// spelling, `health.<class>: false`, is `ignore` (true keeps the class's action).
struct HealthPolicy {
  // What cannot notify (ECC counters, EFA port states, the withheld marks), kMinPollPeriod..
  // kMaxPollPeriod. 1 s keeps a counted fault Unhealthy within a second of the driver showing it,
  // at about 150 syscalls a second on a trn1.32xlarge (bench/README.md#idle-cost); device states
  // and presence are events, not polls (core/events/events.h).
  std::chrono::milliseconds poll_period{1000};
  // healthcheck_heartbeat's period: not published, 1 s assumed (core/node/health_evidence.h);
  // kMinPollPeriod..kMaxPollPeriod.
  std::chrono::milliseconds heartbeat_period{1000};
  // Evidence older than this is stale: the DRA face stops sending it again, so the kubelet takes
  // the devices as UNKNOWN after this (health_check_timeout_seconds), and the plugin's
  // neuron_plugin_health_evidence_stale says 1. kMinStaleAfter..kMaxStaleAfter.
  std::chrono::milliseconds stale_after{30000};

  // health.policy: the action per class. The default is argued in docs/OPERATIONS.md#remediation:
  // what the plugin did before the policy existed; `reset` is the operator's choice, because it
  // returns a device only when the active check has reference programs to prove it with.
  std::map<EvidenceClass, Action> actions{
      {EvidenceClass::kAbsence, Action::kTaint},   {EvidenceClass::kState, Action::kTaint},
      {EvidenceClass::kEcc, Action::kNode},        {EvidenceClass::kHwErrors, Action::kNode},
      {EvidenceClass::kEfaPort, Action::kTaint},   {EvidenceClass::kComponents, Action::kNode},
      {EvidenceClass::kHeartbeat, Action::kTaint}, {EvidenceClass::kEccCorrected, Action::kTaint}};
  // dra.taint_effect: NoExecute, the older spelling of `evict`: every `taint` evicts.
  bool taint_evicts = false;
  // The `reset` action (plugin/remediation.h): tries before the device stays withheld, the active
  // check's command (docs/OPERATIONS.md#active-check) and where it finds its programs ("": its
  // own default) and keeps its baseline.
  int reset_tries = 3;
  std::string check_command = "neuron-ls";
  std::string check_programs;
  std::string state_dir = "/var/lib/neuron-node-agent";

  // What the plugin does about `c`.
  Action ActionFor(EvidenceClass c) const;
  // The classes of evidence that decide health (core/node/device_health.h): every one not ignored.
  EvidenceClasses Counted() const;
  // The classes whose action is `a`.
  EvidenceClasses WithAction(Action a) const;
};

// health.poll_period's range (plugin/README.md#config-file). At least 100 ms: each poll reads up to
// six counter files per device (96 on a trn2.48xlarge), and reads them all however few changed;
// 0 would spin a core. At most a minute: a longer
// one leaves an ECC failure unreported for longer than a pod takes to start on the device, and
// catches "250m" (minutes) written for "250ms".
inline constexpr std::chrono::milliseconds kMinPollPeriod{100};
inline constexpr std::chrono::milliseconds kMaxPollPeriod{60000};
// health.stale_after's range: at least 3 s (the health stream re-sends fresh evidence every third
// of it, and the watcher reads it every poll_period); at most 10 minutes, beyond which a wedged
// watcher would leave a failed device HEALTHY at the kubelet for longer than a training step
// takes to notice it. 30 s is the kubelet's own DefaultHealthTimeout.
inline constexpr std::chrono::milliseconds kMinStaleAfter{3000};
inline constexpr std::chrono::milliseconds kMaxStaleAfter{600000};

inline constexpr std::array<Resource, 4> kAllResources{Resource::kNeuron, Resource::kNeuronCore,
                                                       Resource::kEfa, Resource::kNeuronDevice};

struct Config {
  std::string root = "/";
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string config_file;
  // /healthz, /readyz, /metrics: "host:port" (9410 is ours; tests pass port 0) or "unix:PATH"
  // (the DaemonSet: no network port, docs/architecture.md#privilege-split). Loopback by default:
  // a privileged process does not face the network unless told to.
  std::string listen = "127.0.0.1:9410";
  // exporter-toolkit web config (TLS, basic auth) for that server, as the exporter's
  // --web.config.file; "" for none.
  std::string web_config_file;
  int lnc = 0;  // 0: NEURON_LOGICAL_NC_CONFIG, then the instance default
  DiscoveryMode discovery = DiscoveryMode::kAuto;
  std::string log_level = "info";
  std::string log_format = "text";  // text|json (core/base/log_setup.h)

  // Indexed by Resource; neurondevice is legacy and off by default.
  std::map<Resource, bool> resources{{Resource::kNeuron, true},
                                     {Resource::kNeuronCore, true},
                                     {Resource::kEfa, true},
                                     {Resource::kNeuronDevice, false}};
  NonContiguousPolicy noncontiguous = NonContiguousPolicy::kWarn;
  bool cdi = false;
  // Host until container numbering is checked on hardware (docs/architecture.md#device-numbering).
  DeviceNumbering device_numbering = DeviceNumbering::kHost;
  HealthPolicy health;
  // Socket names are "<short>-<suffix>.sock"; empty means the instance id (hostname without one).
  std::string socket_suffix;
  std::chrono::milliseconds podresources_period{1000};
  // How long an Allocate holding stays in the mask without PodResources showing it.
  std::chrono::milliseconds allocation_grace{30000};

  Api api = Api::kDevicePlugin;
  // DRA mode (plugin/README.md#dra): the pool and node name of our ResourceSlice (the DaemonSet
  // passes spec.nodeName as NODE_NAME), where CDI specs go, where neuron-dra-api answers for
  // claims, the effect of an unhealthy device's taint, and whether the pool offers NeuronCores
  // (and the UltraServer node) beside whole devices through shared counters.
  std::string node_name;
  std::string cdi_dir = "/var/run/cdi";
  std::string dra_claims = "unix:/run/neuron-node-agent/dra-api.sock";
  std::string dra_taint_effect = "NoSchedule";  // or NoExecute
  bool dra_partitionable = false;
  // The EFA interfaces as devices of driver efa.neuron.aws.com (registered and published beside
  // neuron.aws.com); false where AWS's EFA DRA driver serves them.
  bool dra_efa = true;
  // The pod's UID (POD_UID from the downward API): the DRA sockets are named after it, so that
  // two instances of a rolling update serve side by side (docs/kubelet-api.md#dra-upgrades).
  // "" (under systemd): the fixed names.
  std::string pod_uid;

  bool enabled(Resource r) const;
};

std::string_view ApiName(Api a);
absl::StatusOr<Api> ParseApi(std::string_view text);
std::string_view NonContiguousPolicyName(NonContiguousPolicy p);
absl::StatusOr<NonContiguousPolicy> ParseNonContiguousPolicy(std::string_view text);
absl::StatusOr<DiscoveryMode> ParseDiscoveryMode(std::string_view text);
std::string_view DeviceNumberingName(DeviceNumbering n);
absl::StatusOr<DeviceNumbering> ParseDeviceNumbering(std::string_view text);
// "250ms", "1s", "2m" or a bare number of milliseconds (core/base/duration.h).
using neuron::ParseDuration;
// A duration within kMinPollPeriod..kMaxPollPeriod; the error names the allowed range.
absl::StatusOr<std::chrono::milliseconds> ParsePollPeriod(std::string_view text);
absl::StatusOr<std::chrono::milliseconds> ParseStaleAfter(std::string_view text);
absl::StatusOr<std::chrono::milliseconds> ParseHeartbeatPeriod(std::string_view text);
// "neuron,neuroncore,efa": the short names of kResources (plus neurondevice); the listed ones are
// enabled and the rest disabled.
absl::Status ParseResourceList(std::string_view text, Config* config);
// "neuron" for aws.amazon.com/neuron, ...
std::string_view ShortName(Resource r);

// Applies the YAML text onto `config`; `source` names the file in errors ("FILE:LINE: ...").
// Unknown keys are errors, so a typo never silently falls back to a default.
absl::Status ApplyConfigYaml(std::string_view yaml, std::string_view source, Config* config);
absl::Status ApplyConfigFile(const std::string& path, Config* config);

// NEURON_DP_* (README). `getenv` (core/model/node_flags.h) is injectable for tests. The config
// file path comes from NEURON_DP_CONFIG (before the file is read); NEURON_ROOT and
// NEURON_LOGICAL_NC_CONFIG are read with --root and --lnc (ResolveNodeFlags), as every tool does.
absl::Status ApplyEnvironment(GetEnvFn getenv, Config* config);

// Values given on the command line; unset ones leave the lower layers alone.
struct Flags {
  std::optional<std::string> root, kubelet_dir, config_file, listen, web_config_file, log_level,
      log_format, socket_suffix, resources, noncontiguous, discovery, device_numbering, lnc, api,
      node_name, cdi_dir, dra_claims, dra_taint_effect;
  std::optional<bool> cdi, dra_partitionable, dra_efa;
};

// Defaults, then the config file (--config, else NEURON_DP_CONFIG), then the environment, then
// the flags. Errors name their source (file and line, variable, or flag).
absl::StatusOr<Config> ResolveConfig(const Flags& flags, const GetEnvFn& getenv);

}  // namespace neuron::plugin

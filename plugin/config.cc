#include "plugin/config.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "core/base/duration.h"
#include "core/base/path_component.h"
#include "fmt/format.h"
#include "plugin/dra/slice.h"

namespace neuron::plugin {
namespace {

absl::Status Bad(std::string_view source, const YAML::Mark& mark, std::string_view what) {
  // yaml-cpp lines are 0-based; editors count from 1.
  return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source, mark.line + 1, what));
}

std::string ScalarOf(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : std::string(); }

absl::StatusOr<bool> ParseBool(std::string_view text) {
  if (text == "true" || text == "yes" || text == "on" || text == "1") return true;
  if (text == "false" || text == "no" || text == "off" || text == "0") return false;
  return absl::InvalidArgumentError(fmt::format("'{}' is not a boolean (true or false)", text));
}

// Reads one scalar of a map entry with `parse`, reporting the value's line on failure.
template <typename T, typename Parse>
absl::Status Get(const YAML::Node& value, std::string_view source, std::string_view key,
                 Parse parse, T* out) {
  if (!value.IsScalar()) return Bad(source, value.Mark(), fmt::format("{}: expected a value", key));
  absl::StatusOr<T> parsed = parse(value.Scalar());
  if (!parsed.ok()) {
    return Bad(source, value.Mark(),
               fmt::format("{}: {}", key, std::string{parsed.status().message()}));
  }
  *out = *parsed;
  return absl::OkStatus();
}

absl::StatusOr<std::string> AnyString(std::string_view text) { return std::string(text); }

// The socket suffix names files the plugin creates and removes: one path component, or empty for
// the default.
absl::StatusOr<std::string> SocketSuffix(std::string_view text) {
  if (text.empty()) return std::string();
  if (absl::Status s = CheckPathComponent("the socket suffix", text); !s.ok()) return s;
  return std::string(text);
}

// A pod UID names socket files: one path component, as a UUID is.
absl::StatusOr<std::string> PodUid(std::string_view text) {
  if (text.empty()) return std::string();
  if (absl::Status s = CheckPathComponent("the pod UID", text); !s.ok()) return s;
  return std::string(text);
}

// Parses the value of an environment variable or a flag into *out; an error names the variable
// or the flag ("NEURON_DP_CDI: 'maybe' is not a boolean ...", "--discovery: ...").
template <typename T, typename Parse>
absl::Status ParseNamed(std::string_view name, std::string_view text, Parse parse, T* out) {
  absl::StatusOr<T> parsed = parse(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", name, std::string{parsed.status().message()}));
  }
  *out = *std::move(parsed);
  return absl::OkStatus();
}

// ParseResourceList as a value, for ParseNamed.
absl::StatusOr<std::map<Resource, bool>> ResourceSet(std::string_view text) {
  Config c;
  if (absl::Status s = ParseResourceList(text, &c); !s.ok()) return s;
  return c.resources;
}

// Walks a map, calling `each(key, value)`; a non-map or a non-scalar key is an error.
template <typename Each>
absl::Status ForEachEntry(const YAML::Node& map, std::string_view source, std::string_view what,
                          Each each) {
  if (map.IsNull()) return absl::OkStatus();
  if (!map.IsMap()) return Bad(source, map.Mark(), fmt::format("{} must be a map", what));
  for (const auto& entry : map) {
    const std::string key = ScalarOf(entry.first);
    if (absl::Status s = each(key, entry.second, entry.first.Mark()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Unknown(std::string_view source, const YAML::Mark& mark, std::string_view section,
                     std::string_view key, std::string_view known) {
  return Bad(source, mark, fmt::format("unknown key '{}{}' (known: {})", section, key, known));
}

absl::Status ApplyResources(const YAML::Node& node, std::string_view source, Config* c) {
  return ForEachEntry(
      node, source, "resources",
      [&](const std::string& key, const YAML::Node& v, const YAML::Mark& mark) -> absl::Status {
        for (Resource r : kAllResources) {
          if (key == ShortName(r)) {
            return Get(v, source, "resources." + key, ParseBool, &c->resources[r]);
          }
        }
        return Unknown(source, mark, "resources.", key, "neuron, neuroncore, efa, neurondevice");
      });
}

// --dra.taint-effect, checked here so that a typo is a usage error (exit 2), not a start failure.
absl::StatusOr<std::string> TaintEffectText(std::string_view text) {
  absl::StatusOr<dra::TaintEffect> effect = dra::ParseTaintEffect(text);
  if (!effect.ok()) return effect.status();
  return std::string(dra::TaintEffectName(*effect));
}

absl::Status ApplyDra(const YAML::Node& node, std::string_view source, Config* c) {
  return ForEachEntry(
      node, source, "dra",
      [&](const std::string& key, const YAML::Node& v, const YAML::Mark& mark) -> absl::Status {
        if (key == "claims") return Get(v, source, "dra.claims", AnyString, &c->dra_claims);
        if (key == "taint_effect") {
          return Get(v, source, "dra.taint_effect", TaintEffectText, &c->dra_taint_effect);
        }
        if (key == "partitionable") {
          return Get(v, source, "dra.partitionable", ParseBool, &c->dra_partitionable);
        }
        if (key == "efa") return Get(v, source, "dra.efa", ParseBool, &c->dra_efa);
        return Unknown(source, mark, "dra.", key, "claims, taint_effect, partitionable, efa");
      });
}

std::optional<EvidenceClass> ClassNamed(std::string_view name) {
  for (int i = 0; i < kEvidenceClassCount; ++i) {
    const auto c = static_cast<EvidenceClass>(i);
    if (EvidenceClassName(c) == name) return c;
  }
  return std::nullopt;
}

// "absence, state, ...": every class's name, for the errors that list the keys.
std::string ClassNames() {
  std::vector<std::string_view> names;
  names.reserve(kEvidenceClassCount);
  for (int i = 0; i < kEvidenceClassCount; ++i) {
    names.push_back(EvidenceClassName(static_cast<EvidenceClass>(i)));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// health.<class>: the policy's older spelling, false for `ignore`; true keeps the class's action.
absl::Status ApplyClassFlag(EvidenceClass c, const YAML::Node& v, std::string_view source,
                            const std::string& name, HealthPolicy* h) {
  bool on = true;
  if (absl::Status s = Get(v, source, name, ParseBool, &on); !s.ok()) return s;
  if (!on) h->actions[c] = Action::kIgnore;
  return absl::OkStatus();
}

absl::StatusOr<int> ResetTries(std::string_view text) {
  int n = 0;
  if (!absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &n) || n < 1 || n > 10) {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not a number of tries from 1 to 10", text));
  }
  return n;
}

// health.policy: {class: action}. `written` collects the classes it names, so that a file giving a
// class both spellings is refused rather than one silently winning.
absl::Status ApplyPolicy(const YAML::Node& node, std::string_view source, HealthPolicy* h,
                         EvidenceClasses* written) {
  return ForEachEntry(
      node, source, "health.policy",
      [&](const std::string& key, const YAML::Node& v, const YAML::Mark& mark) -> absl::Status {
        const std::optional<EvidenceClass> c = ClassNamed(key);
        if (!c) return Unknown(source, mark, "health.policy.", key, ClassNames());
        Action a = Action::kIgnore;
        if (absl::Status s = Get(v, source, "health.policy." + key, ParseAction, &a); !s.ok()) {
          return s;
        }
        h->actions[*c] = a;
        written->Add(*c);
        return absl::OkStatus();
      });
}

// The remediation keys beside the policy: tries, the check's command, programs and state.
std::optional<absl::Status> ApplyRemediationKey(const std::string& key, const YAML::Node& v,
                                                std::string_view source, HealthPolicy* h) {
  const std::string name = "health." + key;
  if (key == "reset_tries") return Get(v, source, name, ResetTries, &h->reset_tries);
  if (key == "check_command") return Get(v, source, name, AnyString, &h->check_command);
  if (key == "check_programs") return Get(v, source, name, AnyString, &h->check_programs);
  if (key == "state_dir") return Get(v, source, name, AnyString, &h->state_dir);
  return std::nullopt;
}

absl::Status ApplyHealth(const YAML::Node& node, std::string_view source, HealthPolicy* h) {
  EvidenceClasses as_flag;
  EvidenceClasses as_policy;
  absl::Status status = ForEachEntry(
      node, source, "health",
      [&](const std::string& key, const YAML::Node& v, const YAML::Mark& mark) -> absl::Status {
        const std::string name = "health." + key;
        if (const std::optional<EvidenceClass> c = ClassNamed(key)) {
          as_flag.Add(*c);
          return ApplyClassFlag(*c, v, source, name, h);
        }
        if (key == "policy") return ApplyPolicy(v, source, h, &as_policy);
        if (std::optional<absl::Status> s = ApplyRemediationKey(key, v, source, h)) return *s;
        if (key == "poll_period") return Get(v, source, name, ParsePollPeriod, &h->poll_period);
        if (key == "heartbeat_period") {
          return Get(v, source, name, ParseHeartbeatPeriod, &h->heartbeat_period);
        }
        if (key == "stale_after") return Get(v, source, name, ParseStaleAfter, &h->stale_after);
        return Unknown(source, mark, "health.", key,
                       fmt::format("{}, policy, reset_tries, check_command, check_programs, "
                                   "state_dir, poll_period, heartbeat_period, stale_after",
                                   ClassNames()));
      });
  if (!status.ok()) return status;
  for (int i = 0; i < kEvidenceClassCount; ++i) {
    const auto c = static_cast<EvidenceClass>(i);
    if (as_flag.Has(c) && as_policy.Has(c)) {
      return Bad(source, node.Mark(),
                 fmt::format("health.{0} and health.policy.{0} both given: write health.policy.{0} "
                             "only (health.{0}: false is health.policy.{0}: ignore)",
                             EvidenceClassName(c)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kIgnore:
      return "ignore";
    case Action::kTaint:
      return "taint";
    case Action::kEvict:
      return "evict";
    case Action::kReset:
      return "reset";
    case Action::kNode:
      return "node";
  }
  return "ignore";
}

absl::StatusOr<Action> ParseAction(std::string_view text) {
  for (Action a :
       {Action::kIgnore, Action::kTaint, Action::kEvict, Action::kReset, Action::kNode}) {
    if (text == ActionName(a)) return a;
  }
  return absl::InvalidArgumentError(
      fmt::format("'{}' is not an action (ignore, taint, evict, reset or node)", text));
}

Action HealthPolicy::ActionFor(EvidenceClass c) const {
  const auto it = actions.find(c);
  const Action a = it == actions.end() ? Action::kTaint : it->second;
  return a == Action::kTaint && taint_evicts ? Action::kEvict : a;
}

EvidenceClasses HealthPolicy::Counted() const {
  EvidenceClasses out;
  for (int i = 0; i < kEvidenceClassCount; ++i) {
    const auto c = static_cast<EvidenceClass>(i);
    if (ActionFor(c) != Action::kIgnore) out.Add(c);
  }
  return out;
}

EvidenceClasses HealthPolicy::WithAction(Action a) const {
  EvidenceClasses out;
  for (int i = 0; i < kEvidenceClassCount; ++i) {
    const auto c = static_cast<EvidenceClass>(i);
    if (ActionFor(c) == a) out.Add(c);
  }
  return out;
}

bool Config::enabled(Resource r) const {
  const auto it = resources.find(r);
  return it != resources.end() && it->second;
}

std::string_view ShortName(Resource r) {
  switch (r) {
    case Resource::kNeuron:
      return "neuron";
    case Resource::kNeuronCore:
      return "neuroncore";
    case Resource::kEfa:
      return "efa";
    case Resource::kNeuronDevice:
      return "neurondevice";
  }
  return "unknown";
}

std::string_view ApiName(Api a) { return a == Api::kDra ? "dra" : "device-plugin"; }

absl::StatusOr<Api> ParseApi(std::string_view text) {
  if (text == "device-plugin") return Api::kDevicePlugin;
  if (text == "dra") return Api::kDra;
  return absl::InvalidArgumentError(fmt::format("'{}' is not device-plugin or dra", text));
}

std::string_view NonContiguousPolicyName(NonContiguousPolicy p) {
  return p == NonContiguousPolicy::kWarn ? "warn" : "reject";
}

absl::StatusOr<NonContiguousPolicy> ParseNonContiguousPolicy(std::string_view text) {
  if (text == "warn") return NonContiguousPolicy::kWarn;
  if (text == "reject") return NonContiguousPolicy::kReject;
  return absl::InvalidArgumentError(fmt::format("'{}' is not warn or reject", text));
}

absl::StatusOr<DiscoveryMode> ParseDiscoveryMode(std::string_view text) {
  if (text == "auto") return DiscoveryMode::kAuto;
  if (text == "directory") return DiscoveryMode::kDirectory;
  if (text == "udev") return DiscoveryMode::kUdev;
  return absl::InvalidArgumentError(fmt::format("'{}' is not auto, directory or udev", text));
}

std::string_view DeviceNumberingName(DeviceNumbering n) {
  return n == DeviceNumbering::kHost ? "host" : "container";
}

absl::StatusOr<DeviceNumbering> ParseDeviceNumbering(std::string_view text) {
  if (text == "host") return DeviceNumbering::kHost;
  if (text == "container") return DeviceNumbering::kContainer;
  return absl::InvalidArgumentError(fmt::format("'{}' is not host or container", text));
}

absl::StatusOr<std::chrono::milliseconds> ParsePollPeriod(std::string_view text) {
  return ParseDurationIn(text, kMinPollPeriod, kMaxPollPeriod,
                         fmt::format("the ECC poll period must be {}ms to {}s",
                                     kMinPollPeriod.count(), kMaxPollPeriod.count() / 1000));
}

absl::StatusOr<std::chrono::milliseconds> ParseHeartbeatPeriod(std::string_view text) {
  return ParseDurationIn(text, kMinPollPeriod, kMaxPollPeriod,
                         fmt::format("the driver's heartbeat period must be {}ms to {}s",
                                     kMinPollPeriod.count(), kMaxPollPeriod.count() / 1000));
}

absl::StatusOr<std::chrono::milliseconds> ParseStaleAfter(std::string_view text) {
  return ParseDurationIn(
      text, kMinStaleAfter, kMaxStaleAfter,
      fmt::format("health evidence goes stale after {}s to {}m", kMinStaleAfter.count() / 1000,
                  kMaxStaleAfter.count() / 60000));
}

absl::Status ParseResourceList(std::string_view text, Config* config) {
  std::map<Resource, bool> chosen;
  for (Resource r : kAllResources) chosen[r] = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) {
      bool found = false;
      for (Resource r : kAllResources) {
        if (item == ShortName(r) || item == ResourceName(r)) chosen[r] = found = true;
      }
      if (!found) {
        return absl::InvalidArgumentError(fmt::format(
            "unknown resource '{}' (known: neuron, neuroncore, efa, neurondevice)", item));
      }
    }
    start = end + 1;
  }
  config->resources = chosen;
  return absl::OkStatus();
}

absl::Status ApplyConfigYaml(std::string_view yaml, std::string_view source, Config* config) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Bad(source, e.mark, e.msg);
  }
  if (root.IsNull()) return absl::OkStatus();  // an empty file changes nothing
  Config c = *config;                          // applied whole or not at all
  absl::Status status = ForEachEntry(
      root, source, "the top level",
      [&](const std::string& key, const YAML::Node& v, const YAML::Mark& mark) -> absl::Status {
        if (key == "resources") return ApplyResources(v, source, &c);
        if (key == "health") return ApplyHealth(v, source, &c.health);
        if (key == "dra") return ApplyDra(v, source, &c);
        if (key == "api") return Get(v, source, key, ParseApi, &c.api);
        if (key == "node_name") return Get(v, source, key, AnyString, &c.node_name);
        if (key == "cdi_dir") return Get(v, source, key, AnyString, &c.cdi_dir);
        if (key == "noncontiguous") {
          return Get(v, source, key, ParseNonContiguousPolicy, &c.noncontiguous);
        }
        if (key == "cdi") return Get(v, source, key, ParseBool, &c.cdi);
        if (key == "socket_suffix") return Get(v, source, key, SocketSuffix, &c.socket_suffix);
        if (key == "listen") return Get(v, source, key, AnyString, &c.listen);
        if (key == "web_config_file") {
          return Get(v, source, key, AnyString, &c.web_config_file);
        }
        if (key == "log_level") return Get(v, source, key, AnyString, &c.log_level);
        if (key == "log_format") return Get(v, source, key, AnyString, &c.log_format);
        if (key == "discovery") return Get(v, source, key, ParseDiscoveryMode, &c.discovery);
        if (key == "device_numbering") {
          return Get(v, source, key, ParseDeviceNumbering, &c.device_numbering);
        }
        if (key == "podresources_period") {
          return Get(v, source, key, ParseDuration, &c.podresources_period);
        }
        if (key == "allocation_grace") {
          return Get(v, source, key, ParseDuration, &c.allocation_grace);
        }
        return Unknown(
            source, mark, "", key,
            "resources, health, noncontiguous, cdi, socket_suffix, listen, web_config_file, "
            "log_level, log_format, discovery, device_numbering, podresources_period, "
            "allocation_grace, api, node_name, cdi_dir, dra");
      });
  if (!status.ok()) return status;
  *config = std::move(c);
  return absl::OkStatus();
}

absl::Status ApplyConfigFile(const std::string& path, Config* config) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("cannot read config file {}", path));
  std::stringstream text;
  text << in.rdbuf();
  return ApplyConfigYaml(text.str(), path, config);
}

absl::Status ApplyEnvironment(GetEnvFn getenv, Config* config) {
  Config c = *config;  // applied whole or not at all
  // An unset or empty variable leaves the lower layers alone.
  auto apply = [&](const char* name, auto parse, auto* out) -> absl::Status {
    const std::optional<std::string> v = getenv(name);
    if (!v || v->empty()) return absl::OkStatus();
    return ParseNamed(name, *v, parse, out);
  };
  for (const absl::Status& s :
       {apply("NEURON_DP_KUBELET_DIR", AnyString, &c.kubelet_dir),
        apply("NEURON_DP_LISTEN", AnyString, &c.listen),
        apply("NEURON_DP_WEB_CONFIG_FILE", AnyString, &c.web_config_file),
        apply("NEURON_DP_LOG_LEVEL", AnyString, &c.log_level),
        apply("NEURON_DP_LOG_FORMAT", AnyString, &c.log_format),
        apply("NEURON_DP_SOCKET_SUFFIX", SocketSuffix, &c.socket_suffix),
        apply("NEURON_DP_RESOURCES", ResourceSet, &c.resources),
        apply("NEURON_DP_NONCONTIGUOUS", ParseNonContiguousPolicy, &c.noncontiguous),
        apply("NEURON_DP_CDI", ParseBool, &c.cdi),
        apply("NEURON_DP_DISCOVERY", ParseDiscoveryMode, &c.discovery),
        apply("NEURON_DP_DEVICE_NUMBERING", ParseDeviceNumbering, &c.device_numbering),
        apply("NEURON_DP_API", ParseApi, &c.api), apply("NODE_NAME", AnyString, &c.node_name),
        apply("NEURON_DP_CDI_DIR", AnyString, &c.cdi_dir),
        apply("NEURON_DP_DRA_CLAIMS", AnyString, &c.dra_claims),
        apply("NEURON_DP_DRA_TAINT_EFFECT", TaintEffectText, &c.dra_taint_effect),
        apply("NEURON_DP_DRA_PARTITIONABLE", ParseBool, &c.dra_partitionable),
        apply("NEURON_DP_DRA_EFA", ParseBool, &c.dra_efa), apply("POD_UID", PodUid, &c.pod_uid)}) {
    if (!s.ok()) return s;
  }
  *config = std::move(c);
  return absl::OkStatus();
}

absl::StatusOr<Config> ResolveConfig(const Flags& flags, const GetEnvFn& getenv) {
  Config c;
  std::optional<std::string> file = flags.config_file;
  if (!file) file = getenv("NEURON_DP_CONFIG");
  if (file && !file->empty()) {
    c.config_file = *file;
    if (absl::Status s = ApplyConfigFile(*file, &c); !s.ok()) return s;
  }
  if (absl::Status s = ApplyEnvironment(getenv, &c); !s.ok()) return s;
  const absl::StatusOr<NodeFlags> node = ResolveNodeFlags({flags.root, flags.lnc}, getenv);
  if (!node.ok()) return node.status();
  c.root = node->root;
  c.lnc = node->lnc;
  if (flags.kubelet_dir) c.kubelet_dir = *flags.kubelet_dir;
  if (flags.listen) c.listen = *flags.listen;
  if (flags.web_config_file) c.web_config_file = *flags.web_config_file;
  if (flags.log_level) c.log_level = *flags.log_level;
  if (flags.log_format) c.log_format = *flags.log_format;
  if (flags.cdi) c.cdi = *flags.cdi;
  if (flags.dra_partitionable) c.dra_partitionable = *flags.dra_partitionable;
  if (flags.dra_efa) c.dra_efa = *flags.dra_efa;
  // An unset flag leaves the lower layers alone.
  auto apply = [](std::string_view flag, const std::optional<std::string>& value, auto parse,
                  auto* out) -> absl::Status {
    if (!value) return absl::OkStatus();
    return ParseNamed(fmt::format("--{}", flag), *value, parse, out);
  };
  for (const absl::Status& s :
       {apply("socket-suffix", flags.socket_suffix, SocketSuffix, &c.socket_suffix),
        apply("resources", flags.resources, ResourceSet, &c.resources),
        apply("noncontiguous", flags.noncontiguous, ParseNonContiguousPolicy, &c.noncontiguous),
        apply("discovery", flags.discovery, ParseDiscoveryMode, &c.discovery),
        apply("device-numbering", flags.device_numbering, ParseDeviceNumbering,
              &c.device_numbering),
        apply("api", flags.api, ParseApi, &c.api),
        apply("node-name", flags.node_name, AnyString, &c.node_name),
        apply("cdi-dir", flags.cdi_dir, AnyString, &c.cdi_dir),
        apply("dra.claims", flags.dra_claims, AnyString, &c.dra_claims),
        apply("dra.taint-effect", flags.dra_taint_effect, TaintEffectText, &c.dra_taint_effect)}) {
    if (!s.ok()) return s;
  }
  c.health.taint_evicts = c.dra_taint_effect == "NoExecute";
  if (c.kubelet_dir.empty()) return absl::InvalidArgumentError("--kubelet-dir: empty");
  if (c.api == Api::kDra && c.node_name.empty()) {
    return absl::InvalidArgumentError(
        "--api dra needs the node's name: --node-name, or NODE_NAME from the downward API");
  }
  if (c.api == Api::kDra && c.cdi_dir.empty()) {
    return absl::InvalidArgumentError("--cdi-dir: empty");
  }
  return c;
}

}  // namespace neuron::plugin

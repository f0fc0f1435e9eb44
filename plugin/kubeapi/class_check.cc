#include "plugin/kubeapi/class_check.h"

#include <optional>
#include <utility>

#include "core/base/component_log.h"
#include "fmt/format.h"
#include "plugin/dra/device_kinds.h"

namespace neuron::kubeapi {

namespace {

using nlohmann::json;
using plugin::dra::DeviceKind;
using plugin::dra::kDriverName;
using plugin::dra::KindSpec;

constexpr char kClassPath[] = "/apis/resource.k8s.io/v1/deviceclasses/neuron.aws.com";
constexpr char kCannotTell[] = "cannot tell whether DeviceClass neuron.aws.com selects NeuronCores";

std::string ResourceType(const json& device) {
  return device.value("/attributes/resourceType/string"_json_pointer, std::string());
}

// The first device of `slices` whose resourceType is that of `kind`; null when none.
const json* FirstOf(const std::vector<json>& slices, DeviceKind kind) {
  for (const json& slice : slices) {
    const auto devices = slice.find("devices");
    if (devices == slice.end() || !devices->is_array()) continue;
    for (const json& device : *devices) {
      if (ResourceType(device) == KindSpec(kind).resource_type) return &device;
    }
  }
  return nullptr;
}

// An attribute value as the slice types it: exactly one of string, int, bool, version.
std::optional<cel::AttributeValue> AttributeOf(const json& v) {
  if (v.contains("string") && v["string"].is_string()) return v["string"].get<std::string>();
  if (v.contains("int") && v["int"].is_number_integer()) return v["int"].get<int64_t>();
  if (v.contains("bool") && v["bool"].is_boolean()) return v["bool"].get<bool>();
  if (v.contains("version") && v["version"].is_string()) {
    absl::StatusOr<cel::Semver> version = cel::ParseSemver(v["version"].get<std::string>());
    if (version.ok()) return *std::move(version);
  }
  return std::nullopt;
}

// The class's selectors, compiled; InvalidArgument naming the first that is not CEL or falls
// outside the subset.
absl::StatusOr<std::vector<cel::CelExpression>> CompileSelectors(const json& device_class) {
  std::vector<cel::CelExpression> out;
  const json selectors = device_class.value("/spec/selectors"_json_pointer, json::array());
  for (size_t k = 0; k < selectors.size(); ++k) {
    const json expression = selectors[k].value("/cel/expression"_json_pointer, json());
    if (!expression.is_string()) {
      return absl::InvalidArgumentError(
          fmt::format("its selector {} is not a CEL expression: {}", k, selectors[k].dump()));
    }
    absl::StatusOr<cel::CelExpression> compiled =
        cel::CelExpression::Compile(expression.get<std::string>());
    if (!compiled.ok()) {
      return absl::InvalidArgumentError(fmt::format("its selector `{}`: {}",
                                                    expression.get<std::string>(),
                                                    std::string{compiled.status().message()}));
    }
    out.push_back(*std::move(compiled));
  }
  return out;
}

// Whether the selectors select `device`, taken in order as kube-scheduler's allocator takes them
// (selectorsMatch): false at the first that does not match, the error of the first that fails to
// evaluate before that. No selector selects every device.
absl::StatusOr<bool> Selects(const std::vector<cel::CelExpression>& selectors,
                             const cel::DeviceView& device) {
  for (const cel::CelExpression& e : selectors) {
    absl::StatusOr<bool> match = e.Matches(device);
    if (!match.ok()) {
      return absl::FailedPreconditionError(fmt::format("its selector `{}` on {}: {}", e.text(),
                                                       device.driver,
                                                       std::string{match.status().message()}));
    }
    if (!*match) return false;
  }
  return true;
}

std::string Listed(const std::vector<cel::CelExpression>& selectors) {
  if (selectors.empty()) return "none, so every device";
  std::string out;
  for (const cel::CelExpression& e : selectors) {
    out += fmt::format("{}`{}`", out.empty() ? "" : "; ", e.text());
  }
  return out;
}

ClassFinding Unknown(std::string_view why) {
  return {
      .verdict = ClassVerdict::kUnknown,
      .message = fmt::format("{}: {}; check by hand that it restricts resourceType to "
                             "neuron_device/neuron_node (deploy/overlays/dra/deviceclasses.yaml)",
                             kCannotTell, why)};
}

// The finding when the API server could not give the class.
ClassFinding Unread(const absl::Status& s) {
  if (absl::IsNotFound(s)) {
    return {.verdict = ClassVerdict::kAbsent,
            .message =
                "no DeviceClass neuron.aws.com in the cluster: requests naming it find "
                "nothing until one is installed (deploy/overlays/dra/deviceclasses.yaml)"};
  }
  if (absl::IsPermissionDenied(s)) {
    return {.verdict = ClassVerdict::kUnknown,
            .message = fmt::format(
                "{}: RBAC does not let neuron-dra-api get deviceclasses (the ClusterRole "
                "neuron-dra-api of deploy/overlays/dra/rbac.yaml grants it), so the check cannot "
                "be made: {}",
                kCannotTell, std::string{s.message()})};
  }
  return Unknown(fmt::format("reading it: {}", std::string{s.message()}));
}

// The finding for selectors that do not select `core`: what they do with the Neuron device.
ClassFinding NotCores(const std::vector<cel::CelExpression>& selectors, const json& core,
                      const json* device) {
  std::string on_device = "the document has no Neuron device to try them on";
  if (device != nullptr) {
    const std::string name = device->value("name", "");
    absl::StatusOr<bool> selected = Selects(selectors, DeviceViewOf(*device, kDriverName));
    on_device = !selected.ok() ? fmt::format("whether it selects {} is unknown: {}", name,
                                             std::string{selected.status().message()})
                : *selected    ? fmt::format("it selects {}", name)
                               : fmt::format(
                                     "nor does it select {}: requests naming it find no "
                                        "Neuron device",
                                     name);
  }
  return {.verdict = ClassVerdict::kFine,
          .message = fmt::format("DeviceClass neuron.aws.com does not select NeuronCores ({} "
                                 "not selected by its selectors: {}); {}",
                                 core.value("name", ""), Listed(selectors), on_device)};
}

}  // namespace

cel::DeviceView DeviceViewOf(const json& device, std::string_view driver) {
  cel::DeviceView view{.driver = std::string(driver), .attributes = {}};
  const json attributes = device.value("attributes", json::object());  // items() needs an lvalue
  for (const auto& [key, value] : attributes.items()) {
    const size_t slash = key.find('/');
    const std::string domain =
        slash == std::string::npos ? std::string(driver) : key.substr(0, slash);
    const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
    if (std::optional<cel::AttributeValue> v = AttributeOf(value)) {
      view.attributes[domain][name] = *std::move(v);
    }
  }
  return view;
}

ClassFinding JudgeDeviceClass(const absl::StatusOr<json>& device_class,
                              const std::vector<json>& slices) {
  const json* core = FirstOf(slices, DeviceKind::kNeuronCore);
  if (core == nullptr) return {};
  if (!device_class.ok()) return Unread(device_class.status());
  absl::StatusOr<std::vector<cel::CelExpression>> selectors = CompileSelectors(*device_class);
  if (!selectors.ok()) return Unknown(std::string{selectors.status().message()});
  absl::StatusOr<bool> on_core = Selects(*selectors, DeviceViewOf(*core, kDriverName));
  if (!on_core.ok()) return Unknown(std::string{on_core.status().message()});
  if (!*on_core) return NotCores(*selectors, *core, FirstOf(slices, DeviceKind::kNeuronDevice));
  return {.verdict = ClassVerdict::kSelectsCores,
          .message = fmt::format(
              "DeviceClass neuron.aws.com selects NeuronCores (its selectors: {}; they select {}): "
              "with --dra.partitionable a request of that class may get cores, and AWS's "
              "All-mode or count templates find no allocation as cores and devices share "
              "counters; restrict it to resourceType neuron_device/neuron_node "
              "(deploy/overlays/dra/deviceclasses.yaml), or run the plugin with "
              "--dra.partitionable=false",
              Listed(*selectors), core->value("name", ""))};
}

ClassCheck::ClassCheck(const Client& client, std::chrono::milliseconds resync)
    : client_(client), resync_(resync), log_(ComponentLogger("dra-api.class")) {}

ClassVerdict ClassCheck::verdict() const {
  std::lock_guard<std::mutex> lock(mu_);
  return verdict_;
}

uint64_t ClassCheck::gets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gets_;
}

void ClassCheck::Observe(const std::vector<json>& slices, bool due) {
  std::set<std::string> kinds;
  for (const json& slice : slices) {
    for (const json& device : slice.value("devices", json::array())) {
      kinds.insert(ResourceType(device));
    }
  }
  const bool changed = !observed_ || kinds != kinds_;
  observed_ = true;
  kinds_ = std::move(kinds);
  if (!changed && !due) return;
  if (!kinds_.contains(std::string(KindSpec(DeviceKind::kNeuronCore).resource_type))) {
    Report({});
    return;
  }
  const absl::StatusOr<json> device_class = client_.Get(kClassPath);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++gets_;
  }
  // nlohmann-json throws on a value of an unexpected type: a class we cannot read is unknown.
  try {
    Report(JudgeDeviceClass(device_class, slices));
  } catch (const json::exception& e) {
    Report(Unknown(fmt::format("unexpected JSON: {}", e.what())));
  }
}

void ClassCheck::Report(const ClassFinding& f) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    verdict_ = f.verdict;
  }
  if (f.verdict == last_.verdict && f.message == last_.message) return;
  const int64_t seconds = resync_.count() / 1000;
  switch (f.verdict) {
    case ClassVerdict::kNotChecked:
      log_->info(
          "no NeuronCore is published now: DeviceClass neuron.aws.com is no longer "
          "checked");
      break;
    case ClassVerdict::kFine:
    case ClassVerdict::kAbsent:
      log_->info("{} (checked again every {} s)", f.message, seconds);
      break;
    case ClassVerdict::kSelectsCores:
      log_->error("{} (checked again every {} s)", f.message, seconds);
      break;
    case ClassVerdict::kUnknown:
      log_->warn("{} (checked again every {} s)", f.message, seconds);
      break;
  }
  last_ = f;
}

}  // namespace neuron::kubeapi

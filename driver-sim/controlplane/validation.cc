#include "driver-sim/controlplane/validation.h"

#include <cctype>
#include <set>

#include "driver-sim/controlplane/quantity.h"

// Leases (coordination.k8s.io/v1, neuron-dra-api's lock): pkg/apis/coordination/validation
// (ValidateLeaseSpec) and the decoder of metav1.MicroTime (RFC3339Micro) for the rules at Lease.
//
// Sources (the Kubernetes API reference for resource.k8s.io/v1, v1.34, "ResourceSlice",
// "ResourceClaim", "DeviceClass"; API conventions for names):
//   ResourceSliceSpec.driver: a DNS subdomain; pool.name: at most 252 characters, DNS
//     subdomains separated by '/'; exactly one of nodeName, nodeSelector, allNodes,
//     perDeviceNodeSelection; devices: at most 128 entries.
//   Device.name: a DNS label; attributes and capacity: at most 32 combined; taints: at most 4.
//   Attribute and capacity names (QualifiedName): an optional DNS subdomain and '/', then a C
//     identifier of at most 32 characters (DeviceMaxIDLength).
//   DeviceAttribute: exactly one of int, bool, string, version; string at most 64 characters;
//     version a semver 2.0.0 string of at most 64 characters.
//   DeviceTaint: key a label key (qualified name), value at most 63 characters, effect
//     NoSchedule or NoExecute.
//   metadata.name: a DNS subdomain (ResourceSlice, ResourceClaim, DeviceClass).
// Partitionable devices, from kubernetes/kubernetes staging/src/k8s.io/api/resource/v1/types.go
// (ResourceSliceSpec.SharedCounters, CounterSet, Device.ConsumesCounters,
// DeviceCounterConsumption, the ResourceSliceMax* constants) and pkg/apis/resource/validation/
// validation.go (validateResourceSliceSpec, validateCounterSet, validateDevice,
// validateDeviceCounterConsumption, validateSet, validateMap, validateResourcePool):
//   only one of devices and sharedCounters ("spec": "only one of `sharedCounters` or `devices`
//     is allowed"); at most 64 devices when any device has taints or consumes counters;
//   sharedCounters: at most 8 sets (ResourceSliceMaxCounterSets), names unique DNS labels,
//     counters required, at most 32 a set (ResourceSliceMaxCountersPerCounterSet), each name a
//     DNS label; any quantity that parses is a valid value (validateDeviceCounter);
//   consumesCounters: at most 2 per device (ResourceSliceMaxDeviceCounterConsumptionsPerDevice),
//     one per counterSet, counterSet a DNS label, counters required, at most 32
//     (ResourceSliceMaxCountersPerDeviceCounterConsumption), each name a DNS label;
//   pool.resourceSliceCount > 0 and pool.generation >= 0.
// A list over its limit is one TooMany error and its items are not checked (validateSet's
// short-circuit "for DOS protection"); duplicates are FieldValueDuplicate at the second one.

namespace neuron::sim::apiserver {

namespace {

using nlohmann::json;

constexpr size_t kMaxDevices = 128;
constexpr size_t kMaxDevicesWithTaintsOrCounters = 64;
constexpr size_t kMaxCounterSets = 8;
constexpr size_t kMaxCountersPerSet = 32;
constexpr size_t kMaxConsumptionsPerDevice = 2;
constexpr size_t kMaxCountersPerConsumption = 32;
constexpr size_t kMaxAttributesAndCapacities = 32;
constexpr size_t kMaxTaints = 4;
constexpr size_t kMaxIdLength = 32;
constexpr size_t kMaxValueLength = 64;
constexpr size_t kMaxPoolName = 252;

bool IsCIdentifier(std::string_view s) {
  if (s.empty() || s.size() > kMaxIdLength) return false;
  if (std::isdigit(static_cast<unsigned char>(s[0])) != 0) return false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

// "domain/identifier" or "identifier".
bool IsQualifiedName(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return IsCIdentifier(s);
  return IsDnsSubdomain(s.substr(0, slash)) && IsCIdentifier(s.substr(slash + 1));
}

// Label keys (taint keys): [prefix/]name, name <= 63 of [A-Za-z0-9._-], alphanumeric ends.
bool IsLabelKey(std::string_view s) {
  const size_t slash = s.rfind('/');
  std::string_view name = s;
  if (slash != std::string_view::npos) {
    if (!IsDnsSubdomain(s.substr(0, slash))) return false;
    name = s.substr(slash + 1);
  }
  if (name.empty() || name.size() > 63) return false;
  if (std::isalnum(static_cast<unsigned char>(name.front())) == 0 ||
      std::isalnum(static_cast<unsigned char>(name.back())) == 0) {
    return false;
  }
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

class Errors {
 public:
  explicit Errors(const FeatureGates& gates = {}) : gates_(gates) {}
  // What the server's version and gates accept (CheckTaints: effect None from 1.35).
  const FeatureGates& gates() const { return gates_; }
  void Add(std::string field, std::string reason, std::string message) {
    out_.push_back({std::move(field), std::move(reason), std::move(message)});
  }
  void Invalid(const std::string& field, const json& value, std::string_view why) {
    Add(field, "FieldValueInvalid", Cat("Invalid value: ", value.dump(), ": ", why));
  }
  void Required(const std::string& field) { Add(field, "FieldValueRequired", "Required value"); }
  void TooMany(const std::string& field, size_t have, size_t max) {
    Add(field, "FieldValueTooMany", Cat("Too many: ", have, ": must have at most ", max, " items"));
  }
  void Duplicate(const std::string& field, const json& value) {
    Add(field, "FieldValueDuplicate", Cat("Duplicate value: ", value.dump()));
  }
  std::vector<FieldError> Take() { return std::move(out_); }

 private:
  FeatureGates gates_;
  std::vector<FieldError> out_;
};

const json* Member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

void CheckName(const json& object, Errors& e) {
  const json* name = object.contains("metadata") ? Member(object["metadata"], "name") : nullptr;
  if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
    e.Required("metadata.name");
  } else if (!IsDnsSubdomain(name->get<std::string>())) {
    e.Invalid("metadata.name", *name,
              "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
              "characters, '-' or '.', and must start and end with an alphanumeric character");
  }
}

void CheckAttribute(const std::string& field, const json& value, Errors& e) {
  int set = 0;
  for (const char* k : {"int", "bool", "string", "version"}) set += Member(value, k) ? 1 : 0;
  if (set != 1) {
    e.Invalid(field, value, "exactly one value must be specified");
    return;
  }
  if (const json* s = Member(value, "string")) {
    if (!s->is_string()) {
      e.Invalid(field + ".string", *s, "must be a string");
    } else if (s->get<std::string>().size() > kMaxValueLength) {
      e.Add(field + ".string", "FieldValueTooLong",
            Cat("Too long: may not be more than ", kMaxValueLength, " bytes"));
    }
  } else if (const json* v = Member(value, "version")) {
    if (!v->is_string() || !IsSemver(v->get<std::string>())) {
      e.Invalid(field + ".version", *v, "must be a string compatible with semver.org spec 2.0.0");
    } else if (v->get<std::string>().size() > kMaxValueLength) {
      e.Add(field + ".version", "FieldValueTooLong",
            Cat("Too long: may not be more than ", kMaxValueLength, " bytes"));
    }
  } else if (const json* i = Member(value, "int"); i != nullptr && !i->is_number_integer()) {
    e.Invalid(field + ".int", *i, "must be an integer");
  } else if (const json* b = Member(value, "bool"); b != nullptr && !b->is_boolean()) {
    e.Invalid(field + ".bool", *b, "must be a boolean");
  }
}

void CheckTaints(const std::string& field, const json& taints, Errors& e) {
  if (!taints.is_array()) return e.Invalid(field, taints, "must be a list");
  if (taints.size() > kMaxTaints) e.TooMany(field, taints.size(), kMaxTaints);
  for (size_t i = 0; i < taints.size(); ++i) {
    const std::string f = Cat(field, "[", i, "]");
    const json& t = taints[i];
    const json* key = Member(t, "key");
    if (key == nullptr || !key->is_string() || !IsLabelKey(key->get<std::string>())) {
      e.Invalid(f + ".key", key ? *key : json(), "must be a qualified name");
    }
    const json* value = Member(t, "value");
    if (value != nullptr && (!value->is_string() || value->get<std::string>().size() > 63)) {
      e.Invalid(f + ".value", *value, "must be no more than 63 characters");
    }
    const json* effect = Member(t, "effect");
    if (effect == nullptr) {
      e.Required(f + ".effect");
    } else if (*effect != "NoSchedule" && *effect != "NoExecute" &&
               !(*effect == "None" && e.gates().taint_effect_none)) {
      e.Add(f + ".effect", "FieldValueNotSupported",
            Cat("Unsupported value: ", effect->dump(), ": supported values: ",
                e.gates().taint_effect_none ? "\"None\", " : "", "\"NoExecute\", \"NoSchedule\""));
    }
  }
}

constexpr char kLabelMessage[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character";

// A counters map (of a counter set or of a consumption): required, at most `max` entries (else
// one TooMany), each name a DNS label.
void CheckCounters(const std::string& field, const json* counters, size_t max, Errors& e) {
  if (counters == nullptr || (counters->is_object() && counters->empty())) {
    return e.Required(field);
  }
  if (!counters->is_object()) return e.Invalid(field, *counters, "must be a map");
  if (counters->size() > max) return e.TooMany(field, counters->size(), max);
  for (const auto& [name, value] : counters->items()) {
    if (!IsDnsLabel(name)) e.Invalid(Cat(field, "[", name, "]"), name, kLabelMessage);
  }
}

// A CounterSet ({name, counters}) or a DeviceCounterConsumption ({counterSet, counters}).
void CheckNamedCounters(const std::string& field, const json& item, const char* key, size_t max,
                        Errors& e) {
  const json* name = Member(item, key);
  const std::string f = Cat(field, ".", key);
  if (name == nullptr || (name->is_string() && name->get<std::string>().empty())) {
    e.Required(f);
  } else if (!name->is_string() || !IsDnsLabel(name->get<std::string>())) {
    e.Invalid(f, *name, kLabelMessage);
  }
  CheckCounters(field + ".counters", Member(item, "counters"), max, e);
}

// sharedCounters or consumesCounters: at most `max` items (else one TooMany, the items
// unchecked), each checked, then `key` unique (validateSet).
void CheckCounterList(const std::string& field, const json& list, size_t max, const char* key,
                      size_t max_counters, Errors& e) {
  if (!list.is_array()) return e.Invalid(field, list, "must be a list");
  if (list.size() > max) return e.TooMany(field, list.size(), max);
  for (size_t i = 0; i < list.size(); ++i) {
    CheckNamedCounters(Cat(field, "[", i, "]"), list[i], key, max_counters, e);
  }
  std::set<json> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const json name = list[i].is_object() ? list[i].value(key, json()) : json();
    if (!seen.insert(name).second) e.Duplicate(Cat(field, "[", i, "]"), name);
  }
}

bool AnyDeviceHas(const json& devices, const char* list) {
  for (const json& d : devices) {
    const json* l = Member(d, list);
    if (l != nullptr && l->is_array() && !l->empty()) return true;
  }
  return false;
}

void CheckDevice(const std::string& field, const json& d, Errors& e) {
  const json* name = Member(d, "name");
  if (name == nullptr) {
    e.Required(field + ".name");
  } else if (!name->is_string() || !IsDnsLabel(name->get<std::string>())) {
    e.Invalid(field + ".name", *name, kLabelMessage);
  }
  size_t count = 0;
  for (const char* map : {"attributes", "capacity"}) {
    const json* m = Member(d, map);
    if (m == nullptr) continue;
    if (!m->is_object()) {
      e.Invalid(Cat(field, ".", map), *m, "must be a map");
      continue;
    }
    count += m->size();
    for (const auto& [key, value] : m->items()) {
      const std::string f = Cat(field, ".", map, "[", key, "]");
      if (!IsQualifiedName(key)) {
        e.Invalid(f, key,
                  "a valid C identifier of at most 32 characters, optionally "
                  "prefixed by a DNS subdomain and '/'");
      }
      if (std::string_view(map) == "attributes") CheckAttribute(f, value, e);
    }
  }
  if (count > kMaxAttributesAndCapacities) {
    e.TooMany(field, count, kMaxAttributesAndCapacities);
  }
  if (const json* taints = Member(d, "taints")) CheckTaints(field + ".taints", *taints, e);
  if (const json* uses = Member(d, "consumesCounters")) {
    CheckCounterList(field + ".consumesCounters", *uses, kMaxConsumptionsPerDevice, "counterSet",
                     kMaxCountersPerConsumption, e);
  }
}

void CheckPool(const json& spec, Errors& e) {
  const json* pool = Member(spec, "pool");
  const json* pool_name = pool != nullptr ? Member(*pool, "name") : nullptr;
  if (pool_name == nullptr) {
    e.Required("spec.pool.name");
  } else {
    bool ok = pool_name->is_string() && pool_name->get<std::string>().size() <= kMaxPoolName;
    if (ok) {
      const std::string whole = pool_name->get<std::string>();  // outlives Split's views
      for (std::string_view part : Split(whole, '/')) {
        ok = ok && IsDnsSubdomain(part);
      }
    }
    if (!ok) e.Invalid("spec.pool.name", *pool_name, "must be DNS subdomains joined by '/'");
  }
  if (pool == nullptr) return;
  const json count = pool->value("resourceSliceCount", json(0));
  if (!count.is_number_integer() || count.get<int64_t>() <= 0) {
    e.Invalid("spec.pool.resourceSliceCount", count, "must be greater than zero");
  }
  const json generation = pool->value("generation", json(0));
  if (!generation.is_number_integer() || generation.get<int64_t>() < 0) {
    e.Invalid("spec.pool.generation", generation, "must be greater than or equal to zero");
  }
}

void CheckSliceSpec(const json& spec, Errors& e) {
  const json* driver = Member(spec, "driver");
  if (driver == nullptr) {
    e.Required("spec.driver");
  } else if (!driver->is_string() || !IsDnsSubdomain(driver->get<std::string>())) {
    e.Invalid("spec.driver", *driver, "must be a DNS subdomain");
  }
  CheckPool(spec, e);
  int where = 0;
  for (const char* k : {"nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"}) {
    const json* v = Member(spec, k);
    const bool set =
        v != nullptr && *v != false && !(v->is_string() && v->get<std::string>().empty());
    where += set ? 1 : 0;
  }
  if (where != 1) {
    e.Invalid("spec", json(),
              "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
              "`perDeviceNodeSelection` is required");
  }
  const json* devices = Member(spec, "devices");
  const json* counters = Member(spec, "sharedCounters");
  if (devices != nullptr && counters != nullptr) {
    e.Invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed");
  }
  if (devices != nullptr && !devices->is_array()) {
    e.Invalid("spec.devices", *devices, "must be a list");
  } else if (devices != nullptr) {
    const size_t max =
        AnyDeviceHas(*devices, "taints") || AnyDeviceHas(*devices, "consumesCounters")
            ? kMaxDevicesWithTaintsOrCounters
            : kMaxDevices;
    if (devices->size() > max) {
      e.TooMany("spec.devices", devices->size(), max);
    } else {
      for (size_t i = 0; i < devices->size(); ++i) {
        CheckDevice(Cat("spec.devices[", i, "]"), (*devices)[i], e);
      }
    }
  }
  if (counters != nullptr) {
    CheckCounterList("spec.sharedCounters", *counters, kMaxCounterSets, "name", kMaxCountersPerSet,
                     e);
  }
}

// coordination.k8s.io/v1 LeaseSpec (pkg/apis/coordination/validation, ValidateLeaseSpec): a
// duration, when given, above 0; transitions, when given, not below 0.
// DeviceClassSpec.extendedResourceName (KEP-5004; validation's validateDeviceClassSpec, with
// IsExtendedResourceName): a qualified name with a domain prefix, outside the kubernetes.io
// domains that native and the implicit deviceclass.resource.kubernetes.io/ names use.
void CheckDeviceClassSpec(const json* spec, Errors& e) {
  const json* name = spec == nullptr ? nullptr : Member(*spec, "extendedResourceName");
  if (name == nullptr) return;
  const std::string text = name->is_string() ? name->get<std::string>() : "";
  const size_t slash = text.find('/');
  const bool qualified = slash != std::string::npos && IsQualifiedName(text);
  if (!qualified || text.substr(0, slash).find("kubernetes.io") != std::string::npos) {
    e.Invalid("spec.extendedResourceName", *name,
              "must be a fully qualified extended resource name (a domain outside kubernetes.io, "
              "'/', a name), e.g. aws.amazon.com/neuron");
  }
}

void CheckLeaseSpec(const json* spec, Errors& e) {
  if (spec == nullptr) return;
  const json* duration = Member(*spec, "leaseDurationSeconds");
  if (duration != nullptr && duration->is_number_integer() && duration->get<int64_t>() <= 0) {
    e.Invalid("spec.leaseDurationSeconds", *duration, "must be greater than 0");
  }
  const json* transitions = Member(*spec, "leaseTransitions");
  if (transitions != nullptr && transitions->is_number_integer() &&
      transitions->get<int64_t>() < 0) {
    e.Invalid("spec.leaseTransitions", *transitions, "must be greater than or equal to 0");
  }
}

}  // namespace

bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (std::string_view label : Split(s, '.')) {
    // Subdomain labels follow the label grammar; their length is bounded by the whole's.
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
  }
  return true;
}

bool IsSemver(std::string_view s) {
  const size_t plus = s.find('+');
  std::string_view core = s.substr(0, plus);
  std::string_view pre;
  if (const size_t dash = core.find('-'); dash != std::string_view::npos) {
    pre = core.substr(dash + 1);
    core = core.substr(0, dash);
    if (pre.empty()) return false;
  }
  const auto ident_ok = [](std::string_view part, bool numeric_no_zero) {
    if (part.empty()) return false;
    bool digits = true;
    for (char c : part) {
      if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-') return false;
      digits = digits && std::isdigit(static_cast<unsigned char>(c)) != 0;
    }
    return !(numeric_no_zero && digits && part.size() > 1 && part[0] == '0');
  };
  std::vector<std::string_view> nums = Split(core, '.');
  if (nums.size() != 3) return false;
  for (std::string_view n : nums) {
    if (n.empty() || (n.size() > 1 && n[0] == '0')) return false;
    for (char c : n) {
      if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
    }
  }
  if (!pre.empty()) {
    for (std::string_view p : Split(pre, '.')) {
      if (!ident_ok(p, true)) return false;
    }
  }
  if (plus != std::string_view::npos) {
    for (std::string_view b : Split(s.substr(plus + 1), '.')) {
      if (!ident_ok(b, false)) return false;
    }
  }
  return true;
}

namespace {

// A core v1 Event's namespace (pkg/apis/core/validation/events.go, legacyValidateEvent): an event
// about a cluster-scoped object (involvedObject.namespace empty, as a Node's) lives in "default"
// (or no namespace), one about a namespaced object in that object's namespace.
void CheckEventNamespace(const json& event, Errors& e) {
  const std::string ns = event.value("/metadata/namespace"_json_pointer, std::string());
  const json* involved = Member(event, "involvedObject");
  const std::string involved_ns =
      involved != nullptr && involved->is_object() ? involved->value("namespace", "") : "";
  const bool fits = involved_ns.empty() ? (ns.empty() || ns == "default") : ns == involved_ns;
  if (!fits) {
    e.Invalid("involvedObject.namespace", involved_ns, "does not match event.namespace");
  }
}

}  // namespace

std::vector<FieldError> Validate(std::string_view kind, const nlohmann::json& object,
                                 const FeatureGates& gates) {
  Errors e(gates);
  CheckName(object, e);
  if (kind == "ResourceSlice") {
    const json* spec = Member(object, "spec");
    if (spec == nullptr) {
      e.Required("spec");
    } else {
      CheckSliceSpec(*spec, e);
    }
  } else if (kind == "Lease") {
    CheckLeaseSpec(Member(object, "spec"), e);
  } else if (kind == "DeviceClass") {
    CheckDeviceClassSpec(Member(object, "spec"), e);
  } else if (kind == "Event") {
    CheckEventNamespace(object, e);
  }
  return e.Take();
}

namespace {

// The first quantity under `counters` (a map of {value}) that does not parse: its field, or "".
std::string BadQuantity(const std::string& field, const json& counters) {
  if (!counters.is_object()) return "";
  for (const auto& [name, counter] : counters.items()) {
    const json value = counter.is_object() ? counter.value("value", json()) : json();
    if (!value.is_null() && !Quantity::FromJson(value).ok()) {
      return Cat(field, "[", name, "].value");
    }
  }
  return "";
}

std::string FirstBadQuantity(const json& spec) {
  const json sets = spec.value("sharedCounters", json::array());
  for (size_t i = 0; sets.is_array() && i < sets.size(); ++i) {
    const std::string f = Cat("spec.sharedCounters[", i, "].counters");
    if (std::string bad = BadQuantity(f, sets[i].value("counters", json())); !bad.empty()) {
      return bad;
    }
  }
  const json devices = spec.value("devices", json::array());
  for (size_t i = 0; devices.is_array() && i < devices.size(); ++i) {
    const json& d = devices[i];
    if (!d.is_object()) continue;
    const std::string f = Cat("spec.devices[", i, "]");
    if (std::string bad = BadQuantity(f + ".capacity", d.value("capacity", json())); !bad.empty()) {
      return bad;
    }
    const json uses = d.value("consumesCounters", json::array());
    for (size_t j = 0; uses.is_array() && j < uses.size(); ++j) {
      const std::string g = Cat(f, ".consumesCounters[", j, "].counters");
      if (std::string bad = BadQuantity(g, uses[j].value("counters", json())); !bad.empty()) {
        return bad;
      }
    }
  }
  return "";
}

bool UsesPartitionableDevices(const json* slice) {
  if (slice == nullptr || !slice->contains("spec")) return false;
  const json& spec = (*slice)["spec"];
  const json* sets = Member(spec, "sharedCounters");
  if ((sets != nullptr && sets->is_array() && !sets->empty()) ||
      Member(spec, "perDeviceNodeSelection") != nullptr) {
    return true;
  }
  for (const json& d : spec.value("devices", json::array())) {
    for (const char* f : {"nodeName", "nodeSelector", "allNodes"}) {
      if (Member(d, f) != nullptr) return true;
    }
  }
  return AnyDeviceHas(spec.value("devices", json::array()), "consumesCounters");
}

}  // namespace

std::string CheckQuantities(std::string_view kind, const json& object) {
  if (kind != "ResourceSlice" || !object.contains("spec") || !object["spec"].is_object()) return "";
  const std::string field = FirstBadQuantity(object["spec"]);
  if (field.empty()) return "";
  // The decoder's message (the stand-in adds the field, which the real one does not name).
  return Cat(kind, " in version \"v1\" cannot be handled as a ", kind,
             ": quantities must match the regular expression "
             "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (",
             field, ")");
}

namespace {

// RFC3339Micro, the only form metav1.MicroTime decodes: "2026-12-06T23:50:01.123456Z" (exactly six
// digits of fraction; "Z" or an offset).
bool IsMicroTime(const std::string& text) {
  const size_t dot = text.find('.');
  if (dot == std::string::npos || text.size() < dot + 8) return false;
  for (size_t i = dot + 1; i < dot + 7; ++i) {
    if (std::isdigit(static_cast<unsigned char>(text[i])) == 0) return false;
  }
  const char zone = text[dot + 7];
  if (zone != 'Z' && zone != '+' && zone != '-') return false;
  absl::Time t;
  std::string error;
  return absl::ParseTime(absl::RFC3339_full, text, &t, &error);
}

// The first LeaseSpec field the decoder cannot read into its Go type, as its message says it.
std::string BadLeaseField(const json& spec) {
  for (const char* f : {"holderIdentity", "preferredHolder", "strategy"}) {
    const json* v = Member(spec, f);
    if (v != nullptr && !v->is_string()) return Cat("spec.", f, " of type string");
  }
  for (const char* f : {"leaseDurationSeconds", "leaseTransitions"}) {
    const json* v = Member(spec, f);
    if (v != nullptr && !v->is_number_integer()) return Cat("spec.", f, " of type int32");
  }
  for (const char* f : {"acquireTime", "renewTime"}) {
    const json* v = Member(spec, f);
    if (v != nullptr && (!v->is_string() || !IsMicroTime(v->get<std::string>()))) {
      return Cat("spec.", f, " of type MicroTime (RFC 3339 with microseconds, ",
                 "\"2006-01-02T15:04:05.000000Z07:00\")");
    }
  }
  return "";
}

}  // namespace

std::string CheckDecoding(std::string_view kind, const json& object) {
  if (kind != "Lease") return CheckQuantities(kind, object);
  const json* spec = Member(object, "spec");
  if (spec == nullptr) return "";
  const std::string field = spec->is_object() ? BadLeaseField(*spec) : "spec of type LeaseSpec";
  if (field.empty()) return "";
  return Cat("Lease in version \"v1\" cannot be handled as a Lease: cannot decode ", field);
}

void DropDisabledFields(const FeatureGates& gates, json& slice, const json* old) {
  if (gates.partitionable_devices || UsesPartitionableDevices(old) || !slice.contains("spec") ||
      !slice["spec"].is_object()) {
    return;
  }
  json& spec = slice["spec"];
  spec.erase("sharedCounters");
  spec.erase("perDeviceNodeSelection");
  if (!spec.contains("devices") || !spec["devices"].is_array()) return;
  for (json& d : spec["devices"]) {
    if (!d.is_object()) continue;
    for (const char* f : {"consumesCounters", "nodeName", "nodeSelector", "allNodes"}) d.erase(f);
  }
}

void DefaultTaintTimes(json& slice, absl::Time now) {
  json* devices =
      slice.contains("spec") && slice["spec"].is_object() && slice["spec"].contains("devices")
          ? &slice["spec"]["devices"]
          : nullptr;
  if (devices == nullptr || !devices->is_array()) return;
  const std::string stamp = absl::FormatTime(
      "%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(absl::ToUnixSeconds(now)), absl::UTCTimeZone());
  for (json& device : *devices) {
    if (!device.is_object() || !device.contains("taints") || !device["taints"].is_array()) continue;
    for (json& taint : device["taints"]) {
      // A JSON null decodes as an unset pointer, as an absent field does.
      if (taint.is_object() && taint.value("timeAdded", json()).is_null()) {
        taint["timeAdded"] = stamp;
      }
    }
  }
}

}  // namespace neuron::sim::apiserver

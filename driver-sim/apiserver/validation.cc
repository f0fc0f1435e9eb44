#include "driver-sim/apiserver/validation.h"

#include <cctype>

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

namespace neuron::sim::apiserver {

namespace {

using nlohmann::json;

constexpr size_t kMaxDevices = 128;
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
  std::vector<FieldError> Take() { return std::move(out_); }

 private:
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
    } else if (*effect != "NoSchedule" && *effect != "NoExecute") {
      e.Add(f + ".effect", "FieldValueNotSupported",
            Cat("Unsupported value: ", effect->dump(),
                ": supported values: \"NoExecute\", \"NoSchedule\""));
    }
  }
}

void CheckDevice(const std::string& field, const json& d, Errors& e) {
  const json* name = Member(d, "name");
  if (name == nullptr) {
    e.Required(field + ".name");
  } else if (!name->is_string() || !IsDnsLabel(name->get<std::string>())) {
    e.Invalid(field + ".name", *name,
              "a lowercase RFC 1123 label must consist of lower case "
              "alphanumeric characters or '-', and must start and end "
              "with an alphanumeric character");
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
}

void CheckSliceSpec(const json& spec, Errors& e) {
  const json* driver = Member(spec, "driver");
  if (driver == nullptr) {
    e.Required("spec.driver");
  } else if (!driver->is_string() || !IsDnsSubdomain(driver->get<std::string>())) {
    e.Invalid("spec.driver", *driver, "must be a DNS subdomain");
  }
  const json* pool_name = Member(spec, "pool") ? Member(spec["pool"], "name") : nullptr;
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
  if (devices == nullptr) return;
  if (!devices->is_array()) return e.Invalid("spec.devices", *devices, "must be a list");
  if (devices->size() > kMaxDevices) e.TooMany("spec.devices", devices->size(), kMaxDevices);
  for (size_t i = 0; i < devices->size(); ++i) {
    CheckDevice(Cat("spec.devices[", i, "]"), (*devices)[i], e);
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

std::vector<FieldError> Validate(std::string_view kind, const nlohmann::json& object) {
  Errors e;
  CheckName(object, e);
  if (kind == "ResourceSlice") {
    const json* spec = Member(object, "spec");
    if (spec == nullptr) {
      e.Required("spec");
    } else {
      CheckSliceSpec(*spec, e);
    }
  }
  return e.Take();
}

}  // namespace neuron::sim::apiserver

#include "driver-sim/controlplane/store.h"

#include <random>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "driver-sim/controlplane/validation.h"

namespace neuron::sim::apiserver {

namespace {

using nlohmann::json;

constexpr size_t kHistory = 1000;  // watch events kept (the real server keeps a time window)

// The field selectors the API server offers for slices: k8s.io/api resource/v1 types.go,
// ResourceSliceSelectorNodeName ("spec.nodeName") and ResourceSliceSelectorDriver
// ("spec.driver"); kubelet's own slice clean-up lists by both.
const std::vector<Kind>& Kinds() {
  static const auto* kinds = new std::vector<Kind>{
      {"resource.k8s.io/v1",
       "resourceslices",
       "ResourceSlice",
       false,
       false,
       {"spec.nodeName", "spec.driver"}},
      {"resource.k8s.io/v1", "resourceclaims", "ResourceClaim", true, true, {}},
      {"resource.k8s.io/v1", "deviceclasses", "DeviceClass", false, false, {}},
      {"v1", "nodes", "Node", false, true, {}},
      // neuron-dra-api's Events about its Node's NeuronHealth condition.
      {"v1", "events", "Event", true, false, {}},
      // neuron-dra-api's one-writer-per-node lock (plugin/kubeapi/lease.h).
      {"coordination.k8s.io/v1", "leases", "Lease", true, false, {}},
  };
  return *kinds;
}

std::string NewUid() {
  static std::mt19937_64 rng{std::random_device{}()};
  static absl::Mutex mu;
  absl::MutexLock lock(&mu);
  const uint64_t a = rng();
  const uint64_t b = rng();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     0x8000 | ((b >> 48) & 0x3fff), b & 0xffffffffffffULL);
}

std::string Group(const Kind& kind) {
  const size_t slash = kind.api_version.find('/');
  return slash == std::string::npos ? "" : kind.api_version.substr(0, slash);
}

// "resourceslices.resource.k8s.io", or "nodes" in the core group, as the API's messages say it.
std::string QualifiedResource(const Kind& kind) {
  return Group(kind).empty() ? kind.resource : Cat(kind.resource, ".", Group(kind));
}

// The value of a dotted field path ("spec.nodeName") as a string; "" when absent.
std::string FieldValue(const json& object, std::string_view path) {
  const json* cur = &object;
  for (std::string_view part : Split(path, '.')) {
    if (!cur->is_object()) return "";
    const auto it = cur->find(std::string(part));
    if (it == cur->end()) return "";
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : (cur->is_null() ? "" : cur->dump());
}

struct Requirement {
  std::string key;
  std::string op;  // "=", "!=", "exists", "!exists"
  std::string value;
};

bool ParseSelector(std::string_view selector, bool fields, std::vector<Requirement>* out) {
  if (selector.empty()) return true;
  for (std::string_view term : Split(selector, ',')) {
    Requirement r;
    if (size_t p = term.find("!="); p != std::string_view::npos) {
      r = {std::string(term.substr(0, p)), "!=", std::string(term.substr(p + 2))};
    } else if (size_t q = term.find("=="); q != std::string_view::npos) {
      r = {std::string(term.substr(0, q)), "=", std::string(term.substr(q + 2))};
    } else if (size_t e = term.find('='); e != std::string_view::npos) {
      r = {std::string(term.substr(0, e)), "=", std::string(term.substr(e + 1))};
    } else if (!fields && !term.empty() && term[0] == '!') {
      r = {std::string(term.substr(1)), "!exists", ""};
    } else if (!fields) {
      r = {std::string(term), "exists", ""};
    } else {
      return false;  // field selectors have no existence tests
    }
    if (r.key.empty()) return false;
    out->push_back(std::move(r));
  }
  return true;
}

bool Satisfied(const Requirement& r, const std::optional<std::string>& have) {
  if (r.op == "exists") return have.has_value();
  if (r.op == "!exists") return !have.has_value();
  if (r.op == "=") return have.has_value() && *have == r.value;
  return !have.has_value() || *have != r.value;
}

json ListOf(const Kind& kind, json items, uint64_t rv) {
  return json{{"apiVersion", kind.api_version},
              {"kind", kind.kind + "List"},
              {"metadata", {{"resourceVersion", std::to_string(rv)}}},
              {"items", std::move(items)}};
}

ApiAnswer Invalid(const Kind& kind, const std::string& name,
                  const std::vector<FieldError>& errors) {
  json causes = json::array();
  std::string message =
      Cat(kind.kind, Group(kind).empty() ? "" : ".", Group(kind), " \"", name, "\" is invalid: ");
  for (size_t i = 0; i < errors.size(); ++i) {
    causes.push_back(
        {{"reason", errors[i].reason}, {"message", errors[i].message}, {"field", errors[i].field}});
    message += Cat(i == 0 ? "" : ", ", errors[i].field, ": ", errors[i].message);
  }
  return StatusAnswer(
      422, "Invalid", std::move(message),
      {{"name", name}, {"group", Group(kind)}, {"kind", kind.kind}, {"causes", std::move(causes)}});
}

ApiAnswer NotFound(const Kind& kind, const std::string& name) {
  return StatusAnswer(404, "NotFound", Cat(QualifiedResource(kind), " \"", name, "\" not found"),
                      {{"name", name}, {"group", Group(kind)}, {"kind", kind.resource}});
}

}  // namespace

const Kind* FindKind(std::string_view api_prefix, std::string_view resource) {
  for (const Kind& k : Kinds()) {
    const bool core = k.api_version.find('/') == std::string::npos;
    const std::string prefix =
        core ? Cat("/api/", k.api_version, "/") : Cat("/apis/", k.api_version, "/");
    if (k.resource == resource && prefix == api_prefix) return &k;
  }
  return nullptr;
}

ApiAnswer StatusAnswer(int code, std::string_view reason, std::string message, json details) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = std::move(details);
  return {code, std::move(s)};
}

std::string CheckSelectors(const Kind& kind, std::string_view label_selector,
                           std::string_view field_selector) {
  std::vector<Requirement> labels;
  std::vector<Requirement> fields;
  if (!ParseSelector(label_selector, false, &labels)) {
    return Cat("unable to parse requirement: ", label_selector);
  }
  if (!ParseSelector(field_selector, true, &fields)) {
    return Cat("invalid field selector: ", field_selector);
  }
  for (const Requirement& f : fields) {
    const bool known = f.key == "metadata.name" ||
                       (kind.namespaced && f.key == "metadata.namespace") ||
                       std::find(kind.field_labels.begin(), kind.field_labels.end(), f.key) !=
                           kind.field_labels.end();
    if (!known) {
      return Cat("\"", f.key, "\" is not a known field selector: only \"metadata.name\", ",
                 kind.namespaced ? "\"metadata.namespace\"" : "",
                 kind.field_labels.empty() ? "" : " and the kind's field labels");
    }
  }
  return "";
}

bool Matches(const json& object, std::string_view label_selector, std::string_view field_selector) {
  std::vector<Requirement> labels;
  std::vector<Requirement> fields;
  if (!ParseSelector(label_selector, false, &labels) ||
      !ParseSelector(field_selector, true, &fields)) {
    return false;
  }
  const json* object_labels = nullptr;
  if (object.contains("metadata") && object["metadata"].contains("labels")) {
    object_labels = &object["metadata"]["labels"];
  }
  for (const Requirement& r : labels) {
    std::optional<std::string> have;
    if (object_labels != nullptr && object_labels->contains(r.key)) {
      have = (*object_labels)[r.key].get<std::string>();
    }
    if (!Satisfied(r, have)) return false;
  }
  for (const Requirement& r : fields) {
    if (!Satisfied(r, FieldValue(object, r.key))) return false;
  }
  return true;
}

void Store::Record(const Kind& kind, const std::string& ns, std::string type, const json& object) {
  history_.push_back(Event{rv_, kind.resource, ns, std::move(type), object});
  while (history_.size() > kHistory) {
    oldest_rv_ = history_.front().rv;
    history_.pop_front();
  }
}

ApiAnswer Store::Create(const Kind& kind, const std::string& ns, json object) {
  if (!object.is_object()) return StatusAnswer(400, "BadRequest", "the body is not an object");
  object["apiVersion"] = kind.api_version;
  object["kind"] = kind.kind;
  const std::string name = object.value("/metadata/name"_json_pointer, std::string());
  if (std::string bad = CheckDecoding(kind.kind, object); !bad.empty()) {
    return StatusAnswer(400, "BadRequest", bad);
  }
  if (kind.kind == "ResourceSlice") DefaultTaintTimes(object, absl::Now());
  absl::MutexLock lock(&mu_);
  if (kind.kind == "ResourceSlice") DropDisabledFields(gates_, object, nullptr);
  if (std::vector<FieldError> errors = Validate(kind.kind, object, gates_); !errors.empty()) {
    return Invalid(kind, name, errors);
  }
  const Key key{kind.resource, ns, name};
  if (objects_.contains(key)) {
    return StatusAnswer(409, "AlreadyExists",
                        Cat(QualifiedResource(kind), " \"", name, "\" already exists"),
                        {{"name", name}, {"group", Group(kind)}, {"kind", kind.resource}});
  }
  json& meta = object["metadata"];
  if (kind.namespaced) meta["namespace"] = ns;
  meta["uid"] = NewUid();
  meta["generation"] = 1;
  meta["creationTimestamp"] =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  ++rv_;
  meta["resourceVersion"] = std::to_string(rv_);
  if (kind.status_subresource) object.erase("status");  // a create sets no status
  objects_[key] = object;
  Record(kind, ns, "ADDED", object);
  return {201, object};
}

ApiAnswer Store::Get(const Kind& kind, const std::string& ns, const std::string& name) const {
  absl::MutexLock lock(&mu_);
  const auto it = objects_.find(Key{kind.resource, ns, name});
  if (it == objects_.end()) return NotFound(kind, name);
  return {200, it->second};
}

ApiAnswer Store::List(const Kind& kind, const std::string& ns, std::string_view label_selector,
                      std::string_view field_selector) const {
  if (std::string bad = CheckSelectors(kind, label_selector, field_selector); !bad.empty()) {
    return StatusAnswer(400, "BadRequest", bad);
  }
  absl::MutexLock lock(&mu_);
  json items = json::array();
  for (const auto& [key, object] : objects_) {
    if (std::get<0>(key) != kind.resource || (!ns.empty() && std::get<1>(key) != ns)) continue;
    if (Matches(object, label_selector, field_selector)) items.push_back(object);
  }
  return {200, ListOf(kind, std::move(items), rv_)};
}

ApiAnswer Store::Update(const Kind& kind, const std::string& ns, const std::string& name,
                        json object, bool status) {
  if (!object.is_object()) return StatusAnswer(400, "BadRequest", "the body is not an object");
  if (std::string bad = CheckDecoding(kind.kind, object); !bad.empty()) {
    return StatusAnswer(400, "BadRequest", bad);
  }
  if (kind.kind == "ResourceSlice" && !status) DefaultTaintTimes(object, absl::Now());
  if (object.value("/metadata/name"_json_pointer, std::string()) != name) {
    return StatusAnswer(400, "BadRequest",
                        "the name of the object does not match the name on "
                        "the URL");
  }
  absl::MutexLock lock(&mu_);
  const auto it = objects_.find(Key{kind.resource, ns, name});
  if (it == objects_.end()) return NotFound(kind, name);
  json& current = it->second;
  const std::string rv = object.value("/metadata/resourceVersion"_json_pointer, std::string());
  // An update without resourceVersion is unconditional, as for these kinds in the real server.
  if (!rv.empty() && rv != current["metadata"]["resourceVersion"].get<std::string>()) {
    return StatusAnswer(
        409, "Conflict",
        Cat("Operation cannot be fulfilled on ", QualifiedResource(kind), " \"", name,
            "\": the object has been modified; please "
            "apply your changes to the latest version and try again"),
        {{"name", name}, {"group", Group(kind)}, {"kind", kind.resource}});
  }
  json next = current;
  if (status) {
    next["status"] = object.value("status", json::object());
  } else {
    next["spec"] = object.value("spec", json::object());
    for (const char* m : {"labels", "annotations", "ownerReferences"}) {
      if (object["metadata"].contains(m)) {
        next["metadata"][m] = object["metadata"][m];
      } else {
        next["metadata"].erase(m);
      }
    }
  }
  if (kind.kind == "ResourceSlice" && !status) DropDisabledFields(gates_, next, &current);
  if (std::vector<FieldError> errors = Validate(kind.kind, next, gates_); !errors.empty()) {
    return Invalid(kind, name, errors);
  }
  if (kind.kind == "ResourceSlice") {
    for (const char* f : {"driver", "nodeName"}) {
      if (next["spec"].value(f, json()) != current["spec"].value(f, json())) {
        return Invalid(kind, name, {{Cat("spec.", f), "FieldValueInvalid", "field is immutable"}});
      }
    }
  }
  if (next == current) return {200, current};  // a no-op update keeps resourceVersion
  if (next["spec"] != current["spec"]) {
    next["metadata"]["generation"] = current["metadata"].value("generation", 1) + 1;
  }
  ++rv_;
  next["metadata"]["resourceVersion"] = std::to_string(rv_);
  current = next;
  Record(kind, ns, "MODIFIED", current);
  return {200, current};
}

ApiAnswer Store::Delete(const Kind& kind, const std::string& ns, const std::string& name,
                        const json& preconditions) {
  absl::MutexLock lock(&mu_);
  const auto it = objects_.find(Key{kind.resource, ns, name});
  if (it == objects_.end()) return NotFound(kind, name);
  // DeleteOptions.preconditions (metav1.Preconditions): the registry refuses the delete with a
  // Conflict naming both values when the object is no longer the one the caller saw.
  for (const auto& [field, label] :
       {std::pair{"uid", "UID"}, {"resourceVersion", "ResourceVersion"}}) {
    const json want = preconditions.is_object() ? preconditions.value(field, json()) : json();
    const json have = it->second["metadata"].value(field, json());
    if (want.is_string() && want != have) {
      return StatusAnswer(
          409, "Conflict",
          Cat("Operation cannot be fulfilled on ", QualifiedResource(kind), " \"", name,
              "\": Precondition failed: ", label, " in precondition: ", want.get<std::string>(),
              ", ", label, " in object meta: ", have.is_string() ? have.get<std::string>() : ""),
          {{"name", name}, {"group", Group(kind)}, {"kind", kind.resource}});
    }
  }
  json object = std::move(it->second);
  objects_.erase(it);
  ++rv_;
  object["metadata"]["resourceVersion"] = std::to_string(rv_);
  Record(kind, ns, "DELETED", object);
  return {200, object};
}

ApiAnswer Store::Watch(const Kind& kind, const std::string& ns, uint64_t since,
                       std::string_view label_selector, std::string_view field_selector,
                       std::chrono::milliseconds wait) const {
  if (std::string bad = CheckSelectors(kind, label_selector, field_selector); !bad.empty()) {
    return StatusAnswer(400, "BadRequest", bad);
  }
  const auto relevant = [&](const Event& e) {
    return e.rv > since && e.resource == kind.resource && (ns.empty() || e.ns == ns) &&
           Matches(e.object, label_selector, field_selector);
  };
  absl::MutexLock lock(&mu_);
  if (since == 0) {
    // No resourceVersion (or "0"): the current state as synthetic ADDED events, as the real
    // server starts such a watch (API concepts, "Semantics for watch").
    json events = json::array();
    for (const auto& [key, object] : objects_) {
      if (std::get<0>(key) != kind.resource || (!ns.empty() && std::get<1>(key) != ns)) continue;
      if (Matches(object, label_selector, field_selector)) {
        events.push_back({{"type", "ADDED"}, {"object", object}});
      }
    }
    return {200, std::move(events)};
  }
  if (since < oldest_rv_) {
    return StatusAnswer(410, "Expired",
                        Cat("too old resource version: ", since, " (", oldest_rv_, ")"));
  }
  const auto has_event = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const Event& e : history_) {
      if (relevant(e)) return true;
    }
    return false;
  };
  mu_.AwaitWithTimeout(absl::Condition(&has_event), absl::FromChrono(wait));
  json events = json::array();
  for (const Event& e : history_) {
    if (relevant(e)) events.push_back({{"type", e.type}, {"object", e.object}});
  }
  return {200, std::move(events)};
}

}  // namespace neuron::sim::apiserver

// claim_allocator.h: candidates per request, then a depth-first search that keeps every
// matchAttribute constraint, as the reference allocator's does.
#include "driver-sim/scheduler/claim_allocator.h"

#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "core/base/text.h"
#include "driver-sim/scheduler/cel_subset.h"

namespace neuron::sim::scheduler {

namespace {

using nlohmann::json;

struct Candidate {
  std::string driver, pool, name;
  DeviceView view;
  json taints;  // the device's taints, [] when none
  auto Key() const { return std::tie(driver, pool, name); }
};

// Attribute values of a slice: exactly one of string, int, bool, version.
absl::StatusOr<AttributeValue> AttributeOf(const json& v) {
  if (v.contains("string") && v["string"].is_string()) return v["string"].get<std::string>();
  if (v.contains("int") && v["int"].is_number_integer()) return v["int"].get<int64_t>();
  if (v.contains("bool") && v["bool"].is_boolean()) return v["bool"].get<bool>();
  if (v.contains("version") && v["version"].is_string()) {
    return ParseSemver(v["version"].get<std::string>());
  }
  return absl::InvalidArgumentError(Cat("an attribute value without a type: ", v.dump()));
}

absl::StatusOr<Candidate> CandidateOf(const std::string& driver, const std::string& pool,
                                      const json& device) {
  Candidate c{
      driver, pool, device.value("name", ""), {driver, {}}, device.value("taints", json::array())};
  const json attributes = device.value("attributes", json::object());  // items() needs an lvalue
  for (const auto& [key, value] : attributes.items()) {
    const size_t slash = key.find('/');
    const std::string domain = slash == std::string::npos ? driver : key.substr(0, slash);
    const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
    absl::StatusOr<AttributeValue> v = AttributeOf(value);
    if (!v.ok()) return v.status();
    c.view.attributes[domain][name] = *std::move(v);
  }
  return c;
}

// The node's devices: the newest generation of each complete pool, in slice and device order.
absl::StatusOr<std::vector<Candidate>> NodeDevices(const AllocationInput& in) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::vector<const json*>>> pools;
  for (const json& slice : in.slices) {
    const json& spec = slice.at("spec");
    if (spec.value("nodeName", "") != in.node_name && !spec.value("allNodes", false)) continue;
    auto& [generation, slices] = pools[{spec.at("driver"), spec.at("pool").at("name")}];
    const int64_t g = spec.at("pool").value("generation", int64_t{0});
    if (slices.empty() || g > generation) slices.clear(), generation = g;
    if (g == generation) slices.push_back(&slice);
  }
  std::vector<Candidate> out;
  for (const auto& [key, pool] : pools) {
    const size_t expected =
        pool.second.front()->at("spec").at("pool").value("resourceSliceCount", 1);
    if (pool.second.size() < expected) continue;  // incomplete: the reference skips it too
    for (const json* slice : pool.second) {
      for (const json& device : slice->at("spec").value("devices", json::array())) {
        absl::StatusOr<Candidate> c = CandidateOf(key.first, key.second, device);
        if (!c.ok()) return c.status();
        out.push_back(*std::move(c));
      }
    }
  }
  return out;
}

std::set<std::tuple<std::string, std::string, std::string>> InUse(const AllocationInput& in) {
  std::set<std::tuple<std::string, std::string, std::string>> used;
  for (const json& claim : in.allocated_claims) {
    const json results = claim.value("status", json::object())
                             .value("allocation", json::object())
                             .value("devices", json::object())
                             .value("results", json::array());
    for (const json& r : results) {
      used.insert(std::make_tuple(r.at("driver").get<std::string>(),
                                  r.at("pool").get<std::string>(),
                                  r.at("device").get<std::string>()));
    }
  }
  return used;
}

// A taint the request does not tolerate keeps the device out (NoSchedule and NoExecute alike).
bool Tolerated(const json& taint, const json& tolerations) {
  for (const json& t : tolerations) {
    const bool key = !t.contains("key") || t["key"] == taint.value("key", "");
    const bool effect = !t.contains("effect") || t["effect"] == taint.value("effect", "");
    const bool value = t.value("operator", "Equal") == "Exists" ||
                       t.value("value", "") == taint.value("value", "");
    if (key && effect && value) return true;
  }
  return false;
}

struct Request {
  std::string name, class_name;
  bool all = false;
  int64_t count = 1;
  std::vector<const Candidate*> candidates;
};

absl::StatusOr<std::vector<CelExpression>> Selectors(const json& selectors) {
  std::vector<CelExpression> out;
  for (const json& s : selectors) {
    if (!s.contains("cel")) return absl::InvalidArgumentError("a selector other than cel");
    absl::StatusOr<CelExpression> e = CelExpression::Compile(s["cel"].value("expression", ""));
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  return out;
}

const json* FindClass(const AllocationInput& in, const std::string& name) {
  for (const json& c : in.device_classes) {
    if (c.at("metadata").value("name", "") == name) return &c;
  }
  return nullptr;
}

// One request's candidates, in node order: free, tolerated, and matching every selector of its
// class and its own.
absl::StatusOr<Request> RequestOf(const json& r, const AllocationInput& in,
                                  const std::vector<Candidate>& devices, const auto& used) {
  for (const char* field : {"firstAvailable", "adminAccess"}) {
    if (r.contains(field) || r.value("exactly", json::object()).contains(field)) {
      return absl::InvalidArgumentError(Cat("request ", r.value("name", ""), ": ", field,
                                            " is not offered by the simulated scheduler"));
    }
  }
  const json& x = r.at("exactly");
  Request req{r.at("name"), x.at("deviceClassName"), false, 1, {}};
  req.all = x.value("allocationMode", "ExactCount") == "All";
  req.count = x.value("count", int64_t{1});
  const json* cls = FindClass(in, req.class_name);
  if (cls == nullptr) return absl::NotFoundError(Cat("DeviceClass ", req.class_name, " not found"));
  absl::StatusOr<std::vector<CelExpression>> selectors =
      Selectors(cls->at("spec").value("selectors", json::array()));
  if (!selectors.ok()) return selectors.status();
  absl::StatusOr<std::vector<CelExpression>> own = Selectors(x.value("selectors", json::array()));
  if (!own.ok()) return own.status();
  selectors->insert(selectors->end(), own->begin(), own->end());
  for (const Candidate& d : devices) {
    if (used.count({d.driver, d.pool, d.name})) continue;
    bool ok = true;
    for (const json& taint : d.taints) {
      ok = ok && Tolerated(taint, x.value("tolerations", json::array()));
    }
    for (const CelExpression& e : *selectors) {
      if (!ok) break;
      absl::StatusOr<bool> m = e.Matches(d.view);
      if (!m.ok()) return m.status();
      ok = *m;
    }
    if (ok) req.candidates.push_back(&d);
  }
  if (req.all) req.count = static_cast<int64_t>(req.candidates.size());
  return req;
}

struct Constraint {
  std::string domain, name;
  std::set<std::string> requests;  // empty: all
};

// Depth-first over (request, slot); each constraint's value is fixed by its first device.
class Search {
 public:
  Search(std::vector<Request> requests, std::vector<Constraint> constraints)
      : requests_(std::move(requests)),
        constraints_(std::move(constraints)),
        pinned_(constraints_.size()) {}

  bool Run() { return Place(0, 0, 0); }
  const std::vector<std::pair<const Request*, const Candidate*>>& chosen() const { return chosen_; }
  bool exhausted() const { return steps_ > kMaxSteps; }

 private:
  static constexpr int kMaxSteps = 1'000'000;

  bool Place(size_t r, int64_t slot, size_t from) {
    if (r == requests_.size()) return true;
    const Request& req = requests_[r];
    if (slot == req.count) return Place(r + 1, 0, 0);
    for (size_t k = from; k < req.candidates.size(); ++k) {
      if (++steps_ > kMaxSteps) return false;
      const Candidate* d = req.candidates[k];
      if (taken_.count(d) || !Pin(req, *d)) continue;
      taken_.insert(d);
      chosen_.emplace_back(&req, d);
      if (Place(r, slot + 1, k + 1)) return true;
      chosen_.pop_back();
      taken_.erase(d);
      Unpin();
      if (req.all) return false;  // All takes every candidate: no other choice exists
    }
    return false;
  }

  // Checks d against every constraint on req, fixing unpinned ones; remembers what it fixed.
  bool Pin(const Request& req, const Candidate& d) {
    std::vector<size_t> fixed;
    for (size_t c = 0; c < constraints_.size(); ++c) {
      const Constraint& k = constraints_[c];
      if (!k.requests.empty() && !k.requests.count(req.name)) continue;
      const auto domain = d.view.attributes.find(k.domain);
      const auto value = domain == d.view.attributes.end() ? decltype(domain->second.end()){}
                                                           : domain->second.find(k.name);
      if (domain == d.view.attributes.end() || value == domain->second.end() ||
          (pinned_[c] && !(*pinned_[c] == value->second))) {
        for (size_t f : fixed) pinned_[f].reset();
        return false;
      }
      if (!pinned_[c]) pinned_[c] = value->second, fixed.push_back(c);
    }
    pins_.push_back(std::move(fixed));
    return true;
  }
  void Unpin() {
    for (size_t f : pins_.back()) pinned_[f].reset();
    pins_.pop_back();
  }

  std::vector<Request> requests_;
  std::vector<Constraint> constraints_;
  std::vector<std::optional<AttributeValue>> pinned_;
  std::vector<std::vector<size_t>> pins_;
  std::set<const Candidate*> taken_;
  std::vector<std::pair<const Request*, const Candidate*>> chosen_;
  int steps_ = 0;
};

// matchAttribute is a fully qualified name (domain/name), as the API requires of it.
absl::StatusOr<std::vector<Constraint>> ConstraintsOf(const json& devices) {
  std::vector<Constraint> out;
  for (const json& c : devices.value("constraints", json::array())) {
    if (!c.contains("matchAttribute")) {
      return absl::InvalidArgumentError(Cat("a constraint other than matchAttribute: ", c.dump()));
    }
    const std::string attr = c["matchAttribute"];
    const size_t slash = attr.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == attr.size()) {
      return absl::InvalidArgumentError(
          Cat("matchAttribute ", attr, ": not a fully qualified name (domain/name)"));
    }
    Constraint k{attr.substr(0, slash), attr.substr(slash + 1), {}};
    for (const json& r : c.value("requests", json::array())) {
      k.requests.insert(r.get<std::string>());
    }
    out.push_back(std::move(k));
  }
  return out;
}

json ConfigOf(const json& devices, const std::vector<Request>& requests,
              const AllocationInput& in) {
  json config = json::array();
  for (const Request& r : requests) {  // the class's config first, as the reference orders it
    for (const json& c : FindClass(in, r.class_name)->at("spec").value("config", json::array())) {
      config.push_back(
          {{"source", "FromClass"}, {"requests", {r.name}}, {"opaque", c.at("opaque")}});
    }
  }
  for (const json& c : devices.value("config", json::array())) {
    config.push_back({{"source", "FromClaim"},
                      {"requests", c.value("requests", json::array())},
                      {"opaque", c.at("opaque")}});
  }
  return config;
}

}  // namespace

absl::StatusOr<json> AllocateClaim(const json& claim, const AllocationInput& input) try {
  const json devices_spec = claim.at("spec").value("devices", json::object());
  absl::StatusOr<std::vector<Candidate>> devices = NodeDevices(input);
  if (!devices.ok()) return devices.status();
  const auto used = InUse(input);
  std::vector<Request> requests;
  for (const json& r : devices_spec.value("requests", json::array())) {
    absl::StatusOr<Request> req = RequestOf(r, input, *devices, used);
    if (!req.ok()) return req.status();
    if (static_cast<int64_t>(req->candidates.size()) < req->count ||
        (req->all && req->count == 0)) {
      return absl::ResourceExhaustedError(Cat(
          "request ", req->name, ": ", req->candidates.size(), " matching free devices on node ",
          input.node_name, ", ", req->all ? "at least 1" : std::to_string(req->count), " needed"));
    }
    requests.push_back(*std::move(req));
  }
  absl::StatusOr<std::vector<Constraint>> constraints = ConstraintsOf(devices_spec);
  if (!constraints.ok()) return constraints.status();
  Search search(requests, *constraints);
  if (!search.Run()) {
    return absl::ResourceExhaustedError(Cat("no set of free devices on node ", input.node_name,
                                            " satisfies the claim's constraints",
                                            search.exhausted() ? " (search limit reached)" : ""));
  }
  json results = json::array();
  for (const auto& [req, d] : search.chosen()) {
    results.push_back(
        {{"request", req->name}, {"driver", d->driver}, {"pool", d->pool}, {"device", d->name}});
  }
  json selector = {
      {"nodeSelectorTerms",
       {{{"matchFields",
          {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {input.node_name}}}}}}}}};
  return json{
      {"devices", {{"results", results}, {"config", ConfigOf(devices_spec, requests, input)}}},
      {"nodeSelector", selector}};
} catch (const json::exception& e) {
  return absl::InvalidArgumentError(Cat("a malformed claim, slice or class: ", e.what()));
}

}  // namespace neuron::sim::scheduler

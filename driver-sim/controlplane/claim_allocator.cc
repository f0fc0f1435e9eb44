// claim_allocator.h: candidates per request, then a depth-first search that keeps every
// matchAttribute constraint, as the reference allocator's does.
#include "driver-sim/controlplane/claim_allocator.h"

#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "core/base/text.h"
#include "core/cel/cel_subset.h"
#include "driver-sim/controlplane/quantity.h"

namespace neuron::sim::scheduler {

namespace {

using apiserver::Quantity;
using cel::AttributeValue;
using cel::CelExpression;
using cel::DeviceView;
using cel::ParseSemver;
using nlohmann::json;

using DeviceKey = std::tuple<std::string, std::string, std::string>;  // driver, pool, device
using CounterKey = std::pair<std::string, std::string>;               // counter set, counter

struct CounterUse {
  CounterKey key;
  Quantity value;
};

// A pool of the node, as the reference's pool gathering (pools_experimental.go, buildPool)
// sees it: its counter sets, less what the devices of allocated claims consume
// (allocator_experimental.go, checkAvailableCounters), or why it cannot be allocated from.
struct Pool {
  std::string driver, name;
  std::map<CounterKey, Quantity> available;
  std::string invalid;
};

struct Candidate {
  std::string driver, pool, name;
  DeviceView view;
  json taints;  // the device's taints, [] when none
  size_t pool_index = 0;
  std::vector<CounterUse> consumes;
  auto Key() const { return std::tie(driver, pool, name); }
};

struct NodeInventory {
  std::vector<Pool> pools;
  std::vector<Candidate> devices;
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
      driver, pool, device.value("name", ""), {driver, {}}, device.value("taints", json::array()),
      0,      {}};
  const json attributes = device.value("attributes", json::object());  // items() needs an lvalue
  for (const auto& [key, value] : attributes.items()) {
    const size_t slash = key.find('/');
    const std::string domain = slash == std::string::npos ? driver : key.substr(0, slash);
    const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
    absl::StatusOr<AttributeValue> v = AttributeOf(value);
    if (!v.ok()) return v.status();
    c.view.attributes[domain][name] = *std::move(v);
  }
  for (const json& use : device.value("consumesCounters", json::array())) {
    const json counters = use.value("counters", json::object());
    for (const auto& [counter, value] : counters.items()) {
      absl::StatusOr<Quantity> q = Quantity::FromJson(value.value("value", json()));
      if (!q.ok()) return q.status();
      c.consumes.push_back({{use.value("counterSet", ""), counter}, *q});
    }
  }
  return c;
}

// The pool's counter sets (from its slices with sharedCounters), or why the pool is invalid.
absl::Status CounterSets(const std::vector<const json*>& slices, Pool& pool) {
  std::set<std::string> names;
  for (const json* slice : slices) {
    for (const json& set : slice->at("spec").value("sharedCounters", json::array())) {
      const std::string name = set.value("name", "");
      if (!names.insert(name).second) {
        pool.invalid = Cat("duplicate counter set name ", name);
        return absl::OkStatus();
      }
      const json counters = set.value("counters", json::object());
      for (const auto& [counter, value] : counters.items()) {
        absl::StatusOr<Quantity> q = Quantity::FromJson(value.value("value", json()));
        if (!q.ok()) return q.status();
        pool.available[{name, counter}] = *q;
      }
    }
  }
  return absl::OkStatus();
}

// Every counter a device consumes must exist in the pool (validateDeviceCounterConsumption).
std::string CheckConsumption(const Pool& pool, const Candidate& c) {
  for (const CounterUse& use : c.consumes) {
    if (pool.available.count(use.key)) continue;
    const bool set_known =
        std::any_of(pool.available.begin(), pool.available.end(),
                    [&](const auto& kv) { return kv.first.first == use.key.first; });
    return set_known ? Cat("counter ", use.key.second, " not found in counter set ", use.key.first)
                     : Cat("counter set ", use.key.first, " not found");
  }
  return "";
}

// One complete pool's devices; `used` devices' consumption comes off its counters.
absl::Status AddPool(const std::string& driver, const std::string& name,
                     const std::vector<const json*>& slices, const std::set<DeviceKey>& used,
                     NodeInventory& node) {
  Pool pool{driver, name, {}, {}};
  if (absl::Status s = CounterSets(slices, pool); !s.ok()) return s;
  std::vector<Candidate> devices;
  std::set<std::string> names;
  for (const json* slice : slices) {
    for (const json& device : slice->at("spec").value("devices", json::array())) {
      absl::StatusOr<Candidate> c = CandidateOf(driver, name, device);
      if (!c.ok()) return c.status();
      if (pool.invalid.empty() && !names.insert(c->name).second) {
        pool.invalid = Cat("duplicate device name ", c->name);
      }
      if (pool.invalid.empty()) pool.invalid = CheckConsumption(pool, *c);
      c->pool_index = node.pools.size();
      devices.push_back(*std::move(c));
    }
  }
  if (pool.invalid.empty()) {
    for (Candidate& c : devices) {
      if (!used.count({c.driver, c.pool, c.name})) continue;
      for (const CounterUse& use : c.consumes) pool.available[use.key] -= use.value;
    }
    for (Candidate& c : devices) node.devices.push_back(std::move(c));
  }
  node.pools.push_back(std::move(pool));
  return absl::OkStatus();
}

// The node's devices: the newest generation of each complete pool, in slice and device order.
absl::StatusOr<NodeInventory> NodeDevices(const AllocationInput& in,
                                          const std::set<DeviceKey>& used) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::vector<const json*>>> pools;
  for (const json& slice : in.slices) {
    const json& spec = slice.at("spec");
    if (spec.value("nodeName", "") != in.node_name && !spec.value("allNodes", false)) continue;
    auto& [generation, slices] = pools[{spec.at("driver"), spec.at("pool").at("name")}];
    const int64_t g = spec.at("pool").value("generation", int64_t{0});
    if (slices.empty() || g > generation) slices.clear(), generation = g;
    if (g == generation) slices.push_back(&slice);
  }
  NodeInventory node;
  for (const auto& [key, pool] : pools) {
    const size_t expected =
        pool.second.front()->at("spec").at("pool").value("resourceSliceCount", 1);
    if (pool.second.size() < expected) continue;  // incomplete: the reference skips it too
    if (absl::Status s = AddPool(key.first, key.second, pool.second, used, node); !s.ok()) {
      return s;
    }
  }
  return node;
}

std::set<DeviceKey> InUse(const AllocationInput& in) {
  std::set<DeviceKey> used;
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

// Can the device be allocated on its own, given what allocated claims consume?
bool CountersSuffice(const NodeInventory& node, const Candidate& d) {
  const Pool& pool = node.pools[d.pool_index];
  for (const CounterUse& use : d.consumes) {
    Quantity left = pool.available.at(use.key);
    left -= use.value;
    if (left.negative()) return false;
  }
  return true;
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

// One request's candidates, in node order: free (not held, and the counters it consumes not
// used up by allocated claims), tolerated, and matching every selector of its class and its own.
absl::StatusOr<Request> RequestOf(const json& r, const AllocationInput& in,
                                  const NodeInventory& node, const std::set<DeviceKey>& used) {
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
  for (const Candidate& d : node.devices) {
    if (used.count({d.driver, d.pool, d.name}) || !CountersSuffice(node, d)) continue;
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

// Depth-first over (request, slot); each constraint's value is fixed by its first device, and
// each device that consumes counters takes them from its pool for as long as it is chosen.
class Search {
 public:
  Search(const NodeInventory& node, std::vector<Request> requests,
         std::vector<Constraint> constraints)
      : node_(node),
        requests_(std::move(requests)),
        constraints_(std::move(constraints)),
        pinned_(constraints_.size()),
        consumed_(node.pools.size()) {}

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
      if (taken_.count(d) || !Consume(*d)) continue;
      if (!Pin(req, *d)) {
        Release(*d);
        continue;
      }
      taken_.insert(d);
      chosen_.emplace_back(&req, d);
      if (Place(r, slot + 1, k + 1)) return true;
      chosen_.pop_back();
      taken_.erase(d);
      Unpin();
      Release(*d);
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

  // Adds d's consumption to its pool's, then checks every counter of the pool, as the
  // reference's checkAvailableCounters does; false (and nothing added) when one is exceeded.
  bool Consume(const Candidate& d) {
    if (d.consumes.empty()) return true;
    auto& consumed = consumed_[d.pool_index];
    for (const CounterUse& use : d.consumes) consumed[use.key] += use.value;
    for (const auto& [key, available] : node_.pools[d.pool_index].available) {
      const auto it = consumed.find(key);
      if (it != consumed.end() && available < it->second) {
        Release(d);
        return false;
      }
    }
    return true;
  }
  void Release(const Candidate& d) {
    for (const CounterUse& use : d.consumes) consumed_[d.pool_index][use.key] -= use.value;
  }

  const NodeInventory& node_;
  std::vector<Request> requests_;
  std::vector<Constraint> constraints_;
  std::vector<std::optional<AttributeValue>> pinned_;
  std::vector<std::vector<size_t>> pins_;
  std::vector<std::map<CounterKey, Quantity>> consumed_;  // by this claim's picks, per pool
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

// Why pools of the node cannot be allocated from, for a failure's text ("" when all can).
std::string InvalidPools(const NodeInventory& node) {
  std::string out;
  for (const Pool& p : node.pools) {
    if (!p.invalid.empty()) {
      out += Cat("; pool ", p.driver, "/", p.name, " is invalid: ", p.invalid);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<json> AllocateClaim(const json& claim, const AllocationInput& input) try {
  const json devices_spec = claim.at("spec").value("devices", json::object());
  const std::set<DeviceKey> used = InUse(input);
  absl::StatusOr<NodeInventory> node = NodeDevices(input, used);
  if (!node.ok()) return node.status();
  std::vector<Request> requests;
  for (const json& r : devices_spec.value("requests", json::array())) {
    absl::StatusOr<Request> req = RequestOf(r, input, *node, used);
    if (!req.ok()) return req.status();
    if (static_cast<int64_t>(req->candidates.size()) < req->count ||
        (req->all && req->count == 0)) {
      return absl::ResourceExhaustedError(Cat(
          "request ", req->name, ": ", req->candidates.size(), " matching free devices on node ",
          input.node_name, ", ", req->all ? "at least 1" : std::to_string(req->count), " needed",
          InvalidPools(*node)));
    }
    requests.push_back(*std::move(req));
  }
  absl::StatusOr<std::vector<Constraint>> constraints = ConstraintsOf(devices_spec);
  if (!constraints.ok()) return constraints.status();
  Search search(*node, requests, *constraints);
  if (!search.Run()) {
    return absl::ResourceExhaustedError(
        Cat("no set of free devices on node ", input.node_name,
            " satisfies the claim's constraints and the shared counters",
            search.exhausted() ? " (search limit reached)" : "", InvalidPools(*node)));
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

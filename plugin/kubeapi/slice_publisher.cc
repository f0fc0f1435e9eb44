#include "plugin/kubeapi/slice_publisher.h"

#include <algorithm>

#include "core/base/component_log.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "http/local_client.h"

namespace neuron::kubeapi {

namespace {

using nlohmann::json;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

bool ApiDown(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

bool NonEmpty(const json& spec, const char* key) {
  const auto it = spec.find(key);
  return it != spec.end() && it->is_array() && !it->empty();
}

bool IsWholeDevice(const json& device) {
  return device.value("/attributes/resourceType/string"_json_pointer, std::string()) ==
         plugin::dra::KindSpec(plugin::dra::DeviceKind::kNeuronDevice).resource_type;
}

// The counters a device consumes, as "set/counter".
std::vector<std::string> CountersOf(const json& device) {
  std::vector<std::string> out;
  for (const json& use : device.value("consumesCounters", json::array())) {
    const json counters = use.value("counters", json::object());  // items() needs an lvalue
    for (const auto& [counter, value] : counters.items()) {
      out.push_back(fmt::format("{}/{}", use.value("counterSet", ""), counter));
    }
  }
  return out;
}

// `devices` less what the plan leaves out (PlanPool); `claimed` collects the counters of the
// whole devices kept without their consumesCounters.
json KeptDevices(const json& devices, bool without_counters, const std::set<std::string>& refused,
                 std::set<std::string>& claimed) {
  json kept = json::array();
  for (json device : devices) {
    if (refused.contains(device.value("name", ""))) continue;
    if (without_counters && NonEmpty(device, "consumesCounters")) {
      if (!IsWholeDevice(device)) continue;
      const std::vector<std::string> counters = CountersOf(device);
      if (std::any_of(counters.begin(), counters.end(),
                      [&](const std::string& c) { return claimed.contains(c); })) {
        continue;
      }
      claimed.insert(counters.begin(), counters.end());
      device.erase("consumesCounters");
    }
    kept.push_back(std::move(device));
  }
  return kept;
}

// Device names of `spec` that were sent with consumesCounters and came back without.
std::set<std::string> Stripped(const json& sent, const json& stored) {
  std::set<std::string> with;
  for (const json& d : stored.value("devices", json::array())) {
    if (NonEmpty(d, "consumesCounters")) with.insert(d.value("name", ""));
  }
  std::set<std::string> out;
  for (const json& d : sent.value("devices", json::array())) {
    if (NonEmpty(d, "consumesCounters") && !with.contains(d.value("name", ""))) {
      out.insert(d.value("name", ""));
    }
  }
  return out;
}

// The taints' timeAdded that `stored` holds, copied into `desired` where the device name and the
// taint's key, value and effect match (the library's copyTaintTimeAdded). The server defaults a
// missing timeAdded to the time of each write, so a spec sent without it would differ from the
// stored one at every resync, be written again and move the time.
void KeepTaintTimes(json& desired, const json& stored) {
  const auto stored_devices = stored.find("devices");
  const auto desired_devices = desired.find("devices");
  if (stored_devices == stored.end() || desired_devices == desired.end()) return;
  std::map<std::string, const json*> by_name;
  for (const json& d : *stored_devices) by_name[d.value("name", "")] = &d;
  for (json& d : *desired_devices) {
    const auto old = by_name.find(d.value("name", ""));
    if (old == by_name.end() || !d.contains("taints")) continue;
    const json old_taints = old->second->value("taints", json::array());
    for (json& t : d["taints"]) {
      if (t.contains("timeAdded")) continue;
      for (const json& o : old_taints) {
        const bool same = o.value("key", "") == t.value("key", "") &&
                          o.value("value", "") == t.value("value", "") &&
                          o.value("effect", "") == t.value("effect", "");
        if (same && o.contains("timeAdded")) {
          t["timeAdded"] = o["timeAdded"];
          break;
        }
      }
    }
  }
}

bool Differs(const PlannedSlice& p, const json& object, const json& owners) {
  return object.value("spec", json()) != p.spec ||
         object.value("/metadata/ownerReferences"_json_pointer, json()) != owners;
}

// pool.generation as the library's controller sets it: the highest the server holds, kept when
// at most one existing slice must change and none is new (a consumer sees one write whole),
// else one more, so that a consumer ignores the pool's older slices while it is written.
void SetGeneration(std::vector<PlannedSlice>& plan, const std::map<std::string, json>& stored,
                   const json& owners) {
  int64_t generation = 0;
  for (const auto& [name, object] : stored) {
    generation =
        std::max(generation, object.value("/spec/pool/generation"_json_pointer, int64_t{0}));
  }
  size_t changed = 0;
  bool added = false;
  for (PlannedSlice& p : plan) {
    p.spec["pool"]["generation"] = generation;
    const auto it = stored.find(p.name);
    if (it == stored.end()) {
      added = true;
    } else if (Differs(p, it->second, owners)) {
      ++changed;
    }
  }
  if (!added && changed <= 1) return;
  for (PlannedSlice& p : plan) p.spec["pool"]["generation"] = generation + 1;
}

size_t DeviceCount(const std::vector<PlannedSlice>& plan) {
  size_t n = 0;
  for (const PlannedSlice& p : plan) n += p.spec.value("devices", json::array()).size();
  return n;
}

}  // namespace

std::string SliceName(const std::string& node_name, size_t index, std::string_view driver) {
  return index == 0 ? fmt::format("{}-{}", node_name, driver)
                    : fmt::format("{}-{}-{}", node_name, driver, index);
}

std::vector<PlannedSlice> PlanPool(const std::string& node_name, const std::vector<json>& slices,
                                   bool without_counters, const std::set<std::string>& refused,
                                   std::string_view driver) {
  std::vector<PlannedSlice> counters;
  std::vector<PlannedSlice> devices;
  std::set<std::string> claimed;
  for (size_t i = 0; i < slices.size(); ++i) {
    PlannedSlice p{SliceName(node_name, i, driver), slices[i]};
    if (NonEmpty(p.spec, "sharedCounters")) {
      if (!without_counters) counters.push_back(std::move(p));
      continue;
    }
    if (p.spec.contains("devices")) {
      p.spec["devices"] = KeptDevices(p.spec["devices"], without_counters, refused, claimed);
      if (i > 0 && p.spec["devices"].empty()) continue;
    }
    devices.push_back(std::move(p));
  }
  counters.insert(counters.end(), std::make_move_iterator(devices.begin()),
                  std::make_move_iterator(devices.end()));
  for (PlannedSlice& p : counters) p.spec["pool"]["resourceSliceCount"] = counters.size();
  return counters;
}

SlicePublisher::SlicePublisher(const Client& client, PublisherOptions options)
    : client_(client),
      options_(std::move(options)),
      log_(ComponentLogger("dra-api.slices")),
      class_check_(client, options_.resync) {
  for (std::string_view driver : kDriverNames) pools_.push_back({.driver = driver});
}

SlicePublisher::~SlicePublisher() { Stop(); }

std::optional<uint64_t> SlicePublisher::published_generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_generation_;
}

SlicePublisher::Writes SlicePublisher::writes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writes_;
}

absl::StatusOr<std::optional<std::vector<json>>> SlicePublisher::ReadPlugin(
    uint64_t* generation, std::optional<uint64_t> unless) const {
  LocalRequestOptions o;
  o.timeout = options_.plugin_timeout;
  const std::string path =
      unless ? fmt::format("/dra/resourceslice?unless={}", *unless) : "/dra/resourceslice";
  absl::StatusOr<LocalResponse> r = LocalGet(options_.plugin_address, path, o);
  if (!r.ok()) return r.status();
  if (r->status == 304 && unless) {
    *generation = *unless;
    return std::nullopt;
  }
  if (r->status == 503) {
    return absl::FailedPreconditionError("the plugin has not scanned the hardware yet (503)");
  }
  if (r->status != 200) {
    return absl::UnavailableError(fmt::format("the plugin answered {}", r->status));
  }
  const json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  const bool slices_ok = j.is_object() && j.contains("slices") && j["slices"].is_array() &&
                         !j["slices"].empty() &&
                         std::all_of(j["slices"].begin(), j["slices"].end(),
                                     [](const json& s) { return s.is_object(); });
  if (!slices_ok || !j.contains("generation") || !j["generation"].is_number_unsigned()) {
    return absl::DataLossError(
        "the plugin's /dra/resourceslice is not {generation, nodeName, slices: [spec, ...]}");
  }
  if (j.value("nodeName", "") != options_.node_name) {
    return absl::FailedPreconditionError(
        fmt::format("the plugin publishes for node \"{}\", this is \"{}\"", j.value("nodeName", ""),
                    options_.node_name));
  }
  *generation = j["generation"].get<uint64_t>();
  // One pool generation for all, or a consumer could take slices of two pools for one.
  for (size_t k = 0; k < j["slices"].size(); ++k) {
    const json g = j["slices"][k].value("/pool/generation"_json_pointer, json());
    if (!g.is_number_unsigned() || g.get<uint64_t>() != *generation) {
      return absl::DataLossError(
          fmt::format("the plugin's slices[{}] has pool generation {}, its document {}", k,
                      g.dump(), *generation));
    }
  }
  return std::optional<std::vector<json>>(j["slices"].get<std::vector<json>>());
}

absl::StatusOr<SlicePublisher::Stored> SlicePublisher::ListStored(std::string_view driver) const {
  absl::StatusOr<json> list =
      client_.Get(fmt::format("{}?fieldSelector=spec.nodeName%3D{}%2Cspec.driver%3D{}", kSlices,
                              options_.node_name, driver));
  if (!list.ok()) return list.status();
  Stored stored;
  for (json& item : (*list)["items"]) {
    std::string name = item.value("/metadata/name"_json_pointer, std::string());
    if (!name.empty()) stored.emplace(std::move(name), std::move(item));
  }
  return stored;
}

absl::StatusOr<json> SlicePublisher::Owners() {
  if (node_uid_.empty()) {
    absl::StatusOr<json> node = client_.Get(fmt::format("/api/v1/nodes/{}", options_.node_name));
    if (!node.ok()) return node.status();
    node_uid_ = node->value("/metadata/uid"_json_pointer, std::string());
    if (node_uid_.empty()) return absl::DataLossError("the Node object has no metadata.uid");
  }
  return json::array({{{"apiVersion", "v1"},
                       {"kind", "Node"},
                       {"name", options_.node_name},
                       {"uid", node_uid_},
                       {"controller", true}}});
}

absl::StatusOr<json> SlicePublisher::Write(const PlannedSlice& planned, const json& owners,
                                           const json* current) {
  json slice = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"name", planned.name}, {"ownerReferences", owners}}},
                {"spec", planned.spec}};
  // A 409 (AlreadyExists, or Aborted for a stale resourceVersion) ends the round: somebody else
  // wrote the slice since the list, and the next round lists again.
  if (current == nullptr) {
    absl::StatusOr<json> made = client_.Post(kSlices, slice);
    std::lock_guard<std::mutex> lock(mu_);
    if (made.ok()) ++writes_.creates;
    return made;
  }
  slice["metadata"]["resourceVersion"] =
      current->value("/metadata/resourceVersion"_json_pointer, std::string());
  absl::StatusOr<json> updated = client_.Put(fmt::format("{}/{}", kSlices, planned.name), slice);
  std::lock_guard<std::mutex> lock(mu_);
  if (updated.ok()) ++writes_.updates;
  return updated;
}

absl::Status SlicePublisher::DeleteOthers(const Pool& pool, const std::set<std::string>& keep,
                                          const Stored& stored) {
  for (const auto& [name, item] : stored) {
    if (keep.contains(name)) continue;
    const json options = {{"preconditions",
                           {{"uid", item.value("/metadata/uid"_json_pointer, std::string())},
                            {"resourceVersion", item.value("/metadata/resourceVersion"_json_pointer,
                                                           std::string())}}}};
    absl::StatusOr<json> gone = client_.Delete(fmt::format("{}/{}", kSlices, name), options);
    if (absl::IsNotFound(gone.status())) continue;  // gone already
    if (!gone.ok()) return gone.status();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++writes_.deletes;
    }
    if (pool.probes.contains(name)) continue;  // the gate's probe: said once by Learn
    log_->info("deleted ResourceSlice {}: not a slice of this driver's current pool for node {}",
               name, options_.node_name);
  }
  return absl::OkStatus();
}

absl::Status SlicePublisher::SyncOnce() {
  // nlohmann-json throws on a value of an unexpected type; nothing may leave this thread.
  try {
    return Sync();
  } catch (const nlohmann::json::exception& e) {
    plugin_failed_ = false;
    return absl::DataLossError(fmt::format("unexpected JSON: {}", e.what()));
  }
}

absl::StatusOr<SlicePublisher::Written> SlicePublisher::WritePlan(Pool& pool,
                                                                  std::vector<PlannedSlice> plan,
                                                                  Stored& stored) {
  absl::StatusOr<json> owners = Owners();
  if (!owners.ok()) return owners.status();
  for (PlannedSlice& p : plan) {
    if (const auto it = stored.find(p.name); it != stored.end()) {
      KeepTaintTimes(p.spec, it->second.value("spec", json::object()));
    }
  }
  SetGeneration(plan, stored, *owners);
  Written w;
  for (const PlannedSlice& p : plan) {
    const auto it = stored.find(p.name);
    if (it == stored.end() || Differs(p, it->second, *owners)) {
      absl::StatusOr<json> object = Write(p, *owners, it == stored.end() ? nullptr : &it->second);
      if (!object.ok()) return object.status();
      stored[p.name] = *std::move(object);
    }
    const json stored_spec = stored[p.name].value("spec", json::object());
    if (NonEmpty(p.spec, "sharedCounters")) {
      if (!NonEmpty(stored_spec, "sharedCounters")) {
        w.counters_dropped = true;
        pool.probes.insert(p.name);
        return w;  // no device slice is written against counters the server does not keep
      }
      w.counters_kept = true;
    }
    const std::set<std::string> stripped = Stripped(p.spec, stored_spec);
    w.stripped.insert(stripped.begin(), stripped.end());
  }
  return w;
}

void SlicePublisher::Learn(Pool& pool, const Written& w) {
  if (w.counters_dropped && !pool.counters_refused) {
    log_->error(
        "the API server dropped sharedCounters from the ResourceSlices of node {}: its feature "
        "gate DRAPartitionableDevices is off. NeuronCores and neuron-node are not published (a "
        "core and its device could both be allocated); the Neuron devices are published without "
        "consumesCounters. Checked again every {} s",
        options_.node_name, options_.resync.count() / 1000);
  } else if (w.counters_kept && pool.counters_refused) {
    log_->info(
        "the API server keeps sharedCounters now (DRAPartitionableDevices on): publishing "
        "NeuronCores and neuron-node");
  }
  if (w.counters_dropped) pool.counters_refused = true;
  if (w.counters_kept) pool.counters_refused = false;
  if (!w.stripped.empty()) {
    log_->error(
        "the API server returned devices {} without their consumesCounters: not "
        "publishing them (they could be allocated beside what shares their counters)",
        fmt::join(w.stripped, ", "));
    pool.refused_devices.insert(w.stripped.begin(), w.stripped.end());
  }
}

// Whether a write failed on a device taint's effect None: an API server before 1.35 lists the
// effects it supports, and None is not among them.
bool RefusesEffectNone(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument &&
         s.message().find("Unsupported value: \"None\"") != absl::string_view::npos;
}

// Every taint of effect None written NoSchedule instead, for a server that refuses None.
void NoneAsNoSchedule(std::vector<PlannedSlice>* plan) {
  for (PlannedSlice& p : *plan) {
    if (!p.spec.contains("devices")) continue;
    for (json& device : p.spec["devices"]) {
      if (!device.contains("taints")) continue;
      for (json& taint : device["taints"]) {
        if (taint.value("effect", "") == "None") taint["effect"] = "NoSchedule";
      }
    }
  }
}

absl::StatusOr<std::set<std::string>> SlicePublisher::PublishPool(Pool& pool,
                                                                  const std::vector<json>& slices,
                                                                  bool probe, Stored& stored) {
  // Each narrowing is one more round; four cover the counters, the devices and effect None.
  for (int round = 0; round < 4; ++round) {
    const bool with_counters = !pool.counters_refused || probe;
    std::vector<PlannedSlice> plan =
        PlanPool(options_.node_name, slices, !with_counters, pool.refused_devices, pool.driver);
    if (pool.none_refused) NoneAsNoSchedule(&plan);
    probe = false;
    absl::StatusOr<Written> w = WritePlan(pool, plan, stored);
    if (!w.ok() && !pool.none_refused && RefusesEffectNone(w.status())) {
      log_->error(
          "the API server refuses device taint effect None (Kubernetes before 1.35): degraded "
          "devices are tainted NoSchedule instead, until neuron-dra-api restarts");
      pool.none_refused = true;
      continue;
    }
    if (!w.ok()) return w.status();
    Learn(pool, *w);
    if (w->counters_dropped || !w->stripped.empty()) continue;
    std::set<std::string> names;
    for (const PlannedSlice& p : plan) names.insert(p.name);
    if (slices != pool.last_slices && !plan.empty()) {
      log_->info("published {} ResourceSlice(s) of pool {} of {} (generation {}, {} devices)",
                 plan.size(), options_.node_name, pool.driver,
                 stored[plan.front().name].value("/spec/pool/generation"_json_pointer, int64_t{0}),
                 DeviceCount(plan));
    }
    return names;
  }
  return absl::InternalError("the API server kept changing what it stores of the pool");
}

absl::Status SlicePublisher::Sync() {
  const auto now = std::chrono::steady_clock::now();
  const bool due = now - last_verified_ >= options_.resync;
  uint64_t generation = 0;
  absl::StatusOr<std::optional<std::vector<json>>> read =
      ReadPlugin(&generation, due ? std::nullopt : published_generation());
  plugin_failed_ = !read.ok();
  if (!read.ok()) return read.status();
  if (!read->has_value()) return absl::OkStatus();  // 304: unchanged, and no re-check is due
  std::map<std::string, std::vector<json>, std::less<>> by_driver;
  for (json& s : **read) by_driver[s.value("driver", "")].push_back(std::move(s));
  for (Pool& pool : pools_) {
    const auto mine = by_driver.find(pool.driver);
    std::vector<json> slices =
        mine == by_driver.end() ? std::vector<json>{} : std::move(mine->second);
    if (absl::Status s = SyncPool(pool, std::move(slices), due); !s.ok()) return s;
  }
  // Once the pools are written (the class is worth reading while the API server answers), and
  // only the NeuronCores published: none where the server drops the counters.
  const auto neuron = std::find_if(pools_.begin(), pools_.end(),
                                   [](const Pool& p) { return p.driver == kDriverName; });
  class_check_.Observe(neuron->counters_refused ? std::vector<json>{} : neuron->last_slices, due);
  last_verified_ = now;
  std::lock_guard<std::mutex> lock(mu_);
  published_generation_ = generation;
  return absl::OkStatus();
}

absl::Status SlicePublisher::SyncPool(Pool& pool, std::vector<json> slices, bool due) {
  if (slices == pool.last_slices && !due) return absl::OkStatus();
  pool.probes.clear();
  // The resync is this check: one list, and writes only where the server differs.
  absl::StatusOr<Stored> stored = ListStored(pool.driver);
  if (!stored.ok()) return stored.status();
  absl::StatusOr<std::set<std::string>> names =
      PublishPool(pool, slices, pool.counters_refused && due, *stored);
  if (!names.ok()) return names.status();
  // After the pool is written, so that the node is never without its slices.
  if (absl::Status s = DeleteOthers(pool, *names, *stored); !s.ok()) return s;
  pool.last_slices = std::move(slices);
  return absl::OkStatus();
}

void SlicePublisher::Report(const absl::Status& s) {
  State now = State::kOk;
  if (!s.ok()) now = plugin_failed_ ? State::kPlugin : ApiDown(s) ? State::kApiDown : State::kApi;
  const std::string message(s.message());
  if (now == state_ && message == last_message_) return;
  // Down is one state however its message varies (refused, timed out): logged once.
  if (now == state_ && now == State::kApiDown) return;
  switch (now) {
    case State::kOk:
      log_->info("{}; the ResourceSlices of node {} are current",
                 state_ == State::kApiDown  ? "the API server is reachable again"
                 : state_ == State::kPlugin ? "the plugin's slices are readable again"
                                            : "publishing works again",
                 options_.node_name);
      break;
    case State::kPlugin:
      log_->warn("cannot read the plugin's slices: {}", message);
      break;
    case State::kApiDown:
      log_->warn("the API server cannot be reached: {}; retrying with back-off up to {} ms",
                 message, options_.backoff_max.count());
      break;
    case State::kApi:
      log_->error("publishing the ResourceSlices of node {}: {}; retrying with back-off",
                  options_.node_name, message);
      break;
  }
  state_ = now;
  last_message_ = message;
}

void SlicePublisher::Start() {
  loop_.Start([this] {
    const absl::Status s = SyncOnce();
    Report(s);
    // The plugin is local and cheap to ask: its failures wait the poll period. The API server's
    // (down, or refusing what we send) back off.
    return pacing_.After(!s.ok() && !plugin_failed_);
  });
}

void SlicePublisher::Stop() { loop_.Stop(); }

}  // namespace neuron::kubeapi

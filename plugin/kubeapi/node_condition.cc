#include "plugin/kubeapi/node_condition.h"

#include "absl/time/time.h"
#include "core/base/component_log.h"
#include "fmt/format.h"
#include "http/local_client.h"
#include "plugin/kubeapi/slice_publisher.h"

namespace neuron::kubeapi {

namespace {

using nlohmann::json;
using Time = std::chrono::system_clock::time_point;

bool ServerDown(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

// metav1.Time as the API writes it: RFC 3339 in UTC, whole seconds.
std::string FormatTime(Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromChrono(t), absl::UTCTimeZone());
}

std::optional<Time> ParseTime(const json& value) {
  absl::Time t;
  std::string error;
  if (!value.is_string() ||
      !absl::ParseTime(absl::RFC3339_full, value.get<std::string>(), &t, &error)) {
    return std::nullopt;
  }
  return absl::ToChronoTime(t);
}

// Whether `reason` fits `status` as node-problem-detector writes them.
bool Fits(const NodeCondition& c) {
  if (c.status == "True") {
    return c.reason.starts_with(kNodeConditionErrorPrefix) && IsOurReason(c.reason);
  }
  if (c.status == "False") return c.reason == kNodeConditionNoError;
  return c.status == "Unknown" && IsOurReason(c.reason);
}

// The NeuronHealth entry of the Node's status.conditions; null when there is none.
const json* FindCondition(const json& node) {
  const json* conditions = nullptr;
  if (node.contains("status") && node["status"].is_object()) {
    const auto it = node["status"].find("conditions");
    if (it != node["status"].end() && it->is_array()) conditions = &*it;
  }
  if (conditions == nullptr) return nullptr;
  for (const json& c : *conditions) {
    if (c.is_object() && c.value("type", "") == kNodeConditionType) return &c;
  }
  return nullptr;
}

NodeCondition ConditionOf(const json& c) {
  return {c.value("status", ""), c.value("reason", ""), c.value("message", "")};
}

NodeCondition UnknownCondition(std::string message) {
  return {"Unknown", std::string{kNodeConditionUnknown}, std::move(message)};
}

std::string Seconds(std::chrono::milliseconds d) {
  return fmt::format("{:g} s", static_cast<double>(d.count()) / 1000.0);
}

}  // namespace

bool IsOurReason(std::string_view reason) {
  if (reason == kNodeConditionNoError || reason == kNodeConditionUnknown) return true;
  if (!reason.starts_with(kNodeConditionErrorPrefix)) return false;
  const std::string_view type = reason.substr(kNodeConditionErrorPrefix.size());
  return !type.empty() &&
         type.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == std::string_view::npos;
}

absl::StatusOr<HealthDocument> ParseHealthDocument(std::string_view body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const auto bad = [](const std::string& what) {
    return absl::DataLossError(fmt::format("the plugin's /health: {}", what));
  };
  if (!j.is_object() || !j.contains("generation") || !j["generation"].is_number_unsigned()) {
    return bad("not an object with an unsigned generation");
  }
  HealthDocument d;
  d.generation = j["generation"].get<uint64_t>();
  if (j.contains("evidence_time")) {
    d.evidence_time = ParseTime(j["evidence_time"]);
    if (!d.evidence_time) return bad("evidence_time is not an RFC 3339 time");
  }
  const json c = j.value("node_condition", json());
  if (!c.is_object() || !c.value("status", json()).is_string() ||
      !c.value("reason", json()).is_string()) {
    return bad("no node_condition {status, reason, message}");
  }
  d.condition = {c["status"], c["reason"], c.value("message", "")};
  for (const json& dev : j.value("devices", json::array())) {
    if (!dev.is_object() || !dev.value("device", json()).is_number_integer()) continue;
    const json r = dev.value("remediation", json::object());
    const json reasons = dev.value("reasons", json::array());
    const std::string reason =
        !reasons.empty() && reasons[0].is_string() ? reasons[0].get<std::string>() : "";
    d.remediations[dev["device"].get<int>()] = {dev.value("action", "ignore"), reason,
                                                r.value("phase", ""), r.value("tries", 0),
                                                r.value("message", "")};
  }
  if (!Fits(d.condition)) {
    return bad(fmt::format("node_condition status {} with reason {} is not NeuronHealth's",
                           d.condition.status, d.condition.reason));
  }
  return d;
}

std::optional<RemediationEvent> EventOfRemediation(int device, const DeviceRemediation& before,
                                                   const DeviceRemediation& after) {
  const bool moved = after.phase != before.phase || after.tries != before.tries;
  if (moved && !after.phase.empty() && after.phase != "resetting" && after.phase != "checking") {
    // "refused" -> NeuronDeviceResetRefused, "gave_up" -> NeuronDeviceResetGaveUp, ...
    std::string word;
    bool upper = true;
    for (char ch : after.phase) {
      if (ch == '_') {
        upper = true;
        continue;
      }
      word += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
      upper = false;
    }
    return RemediationEvent{
        after.phase == "returned" ? "NeuronDeviceReturned" : "NeuronDeviceReset" + word,
        fmt::format("neuron{}: {}", device, after.message),
        after.phase == "returned" ? "Normal" : "Warning"};
  }
  if (after.action != before.action && after.action != "ignore" && !after.action.empty()) {
    std::string word = after.action;
    word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
    return RemediationEvent{"NeuronDevice" + word,
                            fmt::format("neuron{}: {} ({})", device, after.action, after.reason),
                            "Warning"};
  }
  return std::nullopt;
}

ConditionWriter::ConditionWriter(const Client& client, ConditionOptions options)
    : client_(client),
      options_(std::move(options)),
      log_(ComponentLogger("dra-api.condition")),
      started_(options_.now()) {}

ConditionWriter::~ConditionWriter() { Stop(); }

ConditionWriter::Stats ConditionWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::optional<NodeCondition> ConditionWriter::condition() const {
  std::lock_guard<std::mutex> lock(mu_);
  return condition_;
}

void ConditionWriter::ReadPlugin(Time now, bool full) {
  LocalRequestOptions o;
  o.timeout = options_.plugin_timeout;
  const bool unless = document_ && !full;
  const std::string path =
      unless ? fmt::format("/health?unless={}", document_->generation) : "/health";
  absl::StatusOr<LocalResponse> r = LocalGet(options_.plugin_address, path, o);
  absl::Status failed;
  if (!r.ok()) {
    failed = r.status();
  } else if (r->status == 304 && unless) {
    last_contact_ = now;
  } else if (r->status != 200) {
    failed = absl::UnavailableError(fmt::format("the plugin answered {}", r->status));
  } else if (absl::StatusOr<HealthDocument> d = ParseHealthDocument(r->body); !d.ok()) {
    failed = d.status();
  } else {
    document_ = *std::move(d);
    last_contact_ = now;
  }
  plugin_error_ = std::string{failed.message()};
  if (!failed.ok() && !plugin_down_) {
    log_->warn("cannot read the plugin's health: {}", plugin_error_);
  } else if (failed.ok() && plugin_down_) {
    log_->info("the plugin's health is readable again");
  }
  plugin_down_ = !failed.ok();
}

std::optional<NodeCondition> ConditionWriter::Desired(Time now) const {
  const auto stale = options_.stale;
  const Time since = document_ ? last_contact_ : started_;
  if (now - since > stale) {
    return UnknownCondition(fmt::format(
        "neuron-dra-api has had no answer from the plugin for over {}{}", Seconds(stale),
        plugin_error_.empty() ? "" : fmt::format(": {}", plugin_error_)));
  }
  if (!document_) return std::nullopt;
  if (!document_->evidence_time) {
    if (now - started_ <= stale) return std::nullopt;
    return UnknownCondition("the plugin has not read the devices' health evidence yet");
  }
  if (now - *document_->evidence_time > stale) {
    return UnknownCondition(
        fmt::format("the plugin last read the devices' health evidence at {}, over {} ago",
                    FormatTime(*document_->evidence_time), Seconds(stale)));
  }
  return document_->condition;
}

bool ConditionWriter::Foreign(const json* current, std::string* why) const {
  if (current == nullptr) return false;
  const NodeCondition c = ConditionOf(*current);
  const std::string heartbeat = current->value("lastHeartbeatTime", "");
  if (!IsOurReason(c.reason)) {
    *why = fmt::format("its reason {} is not one neuron-dra-api writes", c.reason);
    return true;
  }
  if (ours_) {
    if (c == ours_->condition && heartbeat == ours_->heartbeat) return false;
    *why = fmt::format("it changed since neuron-dra-api wrote it (now {} {}, heartbeat {})",
                       c.status, c.reason, heartbeat);
    return true;
  }
  // Not written by this writer yet: a heartbeat since it started is another writer's.
  const std::optional<Time> beat = ParseTime(current->value("lastHeartbeatTime", json()));
  if (beat && *beat >= std::chrono::time_point_cast<std::chrono::seconds>(started_)) {
    *why = fmt::format("its lastHeartbeatTime {} is since neuron-dra-api started, not its own",
                       heartbeat);
    return true;
  }
  return false;
}

void ConditionWriter::StandDown(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.stood_down) return;
    stats_.stood_down = true;
  }
  log_->warn(
      "node {}: condition {} is written by another writer ({}), most likely AWS's "
      "node-problem-detector: standing down, so that node-recovery keeps acting on its "
      "condition; checked again every {}",
      options_.node_name, kNodeConditionType, why, Seconds(options_.resync));
}

absl::Status ConditionWriter::Write(const NodeCondition& desired, const json* current,
                                    const std::string& rv, Time now) {
  const std::string time = FormatTime(now);
  json condition = {{"type", kNodeConditionType},
                    {"status", desired.status},
                    {"reason", desired.reason},
                    {"message", desired.message},
                    {"lastHeartbeatTime", time}};
  // A status that stays keeps its transition time (left out of the patch, the merge keeps it).
  if (current == nullptr || current->value("status", "") != desired.status) {
    condition["lastTransitionTime"] = time;
  }
  const json patch = {{"metadata", {{"resourceVersion", rv}}},
                      {"status", {{"conditions", json::array({condition})}}}};
  absl::StatusOr<json> node = client_.Patch(
      fmt::format("/api/v1/nodes/{}/status", options_.node_name), patch, kStrategicMergePatch);
  if (!node.ok()) return node.status();
  ours_ = Ours{desired, time, now};
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.patches;
  condition_ = desired;
  return absl::OkStatus();
}

void ConditionWriter::Record(const NodeCondition& c, Time now) {
  Post(c.reason, c.message, c.status == "True" ? "Warning" : "Normal", now);
}

void ConditionWriter::Post(std::string_view reason, std::string_view message, std::string_view type,
                           Time now) {
  const std::string time = FormatTime(now);
  const json event = {
      {"metadata",
       {{"name",
         fmt::format(
             "{}.{:x}", options_.node_name,
             std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count())},
        {"namespace", options_.event_namespace}}},
      {"involvedObject",
       {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", options_.node_name}, {"uid", node_uid_}}},
      {"reason", reason},
      {"message", message},
      {"type", type},
      {"source", {{"component", "neuron-dra-api"}, {"host", options_.node_name}}},
      {"reportingComponent", "neuron-dra-api"},
      {"reportingInstance", options_.node_name},
      {"firstTimestamp", time},
      {"lastTimestamp", time},
      {"count", 1}};
  absl::StatusOr<json> made =
      client_.Post(fmt::format("/api/v1/namespaces/{}/events", options_.event_namespace), event);
  if (!made.ok()) {
    log_->warn("could not record the Event {} on node {}: {}", reason, options_.node_name,
               std::string{made.status().message()});
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.events;
}

void ConditionWriter::RecordRemediations(const HealthDocument& d, Time now) {
  // The first document is where things stand, not a change: the writer before this one (or the
  // plugin's log) said how they came to be.
  if (!remediations_) {
    remediations_ = d.remediations;
    return;
  }
  for (const auto& [device, after] : d.remediations) {
    const auto it = remediations_->find(device);
    const DeviceRemediation before = it == remediations_->end() ? DeviceRemediation{} : it->second;
    if (const std::optional<RemediationEvent> e = EventOfRemediation(device, before, after)) {
      Post(e->reason, e->message, e->type, now);
    }
  }
  remediations_ = d.remediations;
}

absl::Status ConditionWriter::Reconcile(const NodeCondition& desired, Time now) {
  absl::StatusOr<json> node = client_.Get(fmt::format("/api/v1/nodes/{}", options_.node_name));
  if (!node.ok()) return node.status();
  last_node_read_ = now;
  node_uid_ = node->value("/metadata/uid"_json_pointer, std::string());
  const json* current = FindCondition(*node);
  std::string why;
  const bool foreign = Foreign(current, &why);
  const bool stood_down = stats().stood_down;
  if (foreign && stood_down) {
    // Taken back once its writer has stopped refreshing it; a reason of another kind never.
    const std::optional<Time> beat = ParseTime(current->value("lastHeartbeatTime", json()));
    if (!IsOurReason(ConditionOf(*current).reason) || !beat ||
        now - *beat < 2 * options_.heartbeat) {
      return absl::OkStatus();
    }
  } else if (foreign) {
    StandDown(why);
    return absl::OkStatus();
  }
  if (stood_down) {
    log_->info(
        "node {}: condition {} is no longer kept by another writer (gone, or not "
        "refreshed for {}): writing it again",
        options_.node_name, kNodeConditionType, Seconds(2 * options_.heartbeat));
    std::lock_guard<std::mutex> lock(mu_);
    stats_.stood_down = false;
  }
  const NodeCondition have = current != nullptr ? ConditionOf(*current) : NodeCondition{};
  const std::optional<Time> beat =
      current != nullptr ? ParseTime(current->value("lastHeartbeatTime", json())) : std::nullopt;
  if (current != nullptr && have == desired && beat && now - *beat < options_.heartbeat) {
    // Already so (written before this writer started, by an instance before it): taken over.
    ours_ = Ours{have, current->value("lastHeartbeatTime", ""), *beat};
    std::lock_guard<std::mutex> lock(mu_);
    condition_ = have;
    return absl::OkStatus();
  }
  const std::string rv = node->value("/metadata/resourceVersion"_json_pointer, std::string());
  if (absl::Status s = Write(desired, current, rv, now); !s.ok()) return s;
  if (current == nullptr || have.status != desired.status || have.reason != desired.reason) {
    const auto level = desired.status == "False" ? spdlog::level::info : spdlog::level::warn;
    log_->log(level, "node {}: {} {} ({}): {}", options_.node_name, kNodeConditionType,
              desired.status, desired.reason, desired.message);
    Record(desired, now);
  }
  return absl::OkStatus();
}

absl::Status ConditionWriter::Sync() {
  const Time now = options_.now();
  const bool due = last_node_read_ == Time{} || now - last_node_read_ >= options_.resync;
  // The evidence's time moves without a new generation: asked for whole before it goes stale.
  const bool aging =
      document_ && document_->evidence_time && now - *document_->evidence_time > options_.stale / 2;
  ReadPlugin(now, due || aging);
  if (document_ && !node_uid_.empty()) RecordRemediations(*document_, now);
  const std::optional<NodeCondition> desired = Desired(now);
  if (!desired) return absl::OkStatus();
  const bool heartbeat = ours_ && now - ours_->heartbeat_time >= options_.heartbeat;
  if (!due && !heartbeat && ours_ && ours_->condition == *desired && !stats().stood_down) {
    return absl::OkStatus();
  }
  if (!due && stats().stood_down) return absl::OkStatus();
  absl::Status s = Reconcile(*desired, now);
  // Another write came between the read and the patch: read again at the next poll.
  if (absl::IsAborted(s)) return absl::OkStatus();
  return s;
}

absl::Status ConditionWriter::SyncOnce() {
  try {
    return Sync();
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(fmt::format("unexpected JSON: {}", e.what()));
  }
}

// Logs a change of state, and an API error whose message changed; nothing else.
void ConditionWriter::Report(const absl::Status& s) {
  const bool down = !s.ok() && ServerDown(s);
  const std::string message(s.message());
  if (s.ok() && !api_error_.empty()) {
    log_->info("{}; node {}'s {} is written again",
               api_down_ ? "the API server is reachable again" : "writing works again",
               options_.node_name, kNodeConditionType);
  } else if (down && !api_down_) {
    log_->warn("the API server cannot be reached: {}; retrying with back-off up to {}", message,
               Seconds(options_.backoff_max));
  } else if (!s.ok() && !down && message != api_error_) {
    log_->error("writing node {}'s {}: {}; retrying with back-off", options_.node_name,
                kNodeConditionType, message);
  }
  api_down_ = down;
  api_error_ = message;
}

void ConditionWriter::Start() {
  loop_.Start([this] {
    const absl::Status s = SyncOnce();
    Report(s);
    return pacing_.After(!s.ok());
  });
}

void ConditionWriter::Stop() { loop_.Stop(); }

}  // namespace neuron::kubeapi

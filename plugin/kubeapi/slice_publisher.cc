#include "plugin/kubeapi/slice_publisher.h"

#include <algorithm>
#include <random>

#include "core/base/component_log.h"
#include "fmt/format.h"
#include "http/local_client.h"

namespace neuron::kubeapi {

namespace {

using nlohmann::json;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr int kConflictRetries = 3;

bool ApiDown(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

std::string SliceName(const std::string& node_name) {
  return fmt::format("{}-{}", node_name, kDriverName);
}

std::chrono::milliseconds Backoff(int failures, std::chrono::milliseconds initial,
                                  std::chrono::milliseconds max, double unit_random) {
  int64_t wait = initial.count();
  for (int i = 1; i < failures && wait < max.count(); ++i) wait *= 2;
  wait = std::min<int64_t>(wait, max.count());
  const auto jitter = static_cast<int64_t>(static_cast<double>(wait) * 0.5 * unit_random);
  return std::chrono::milliseconds(wait - jitter);
}

SlicePublisher::SlicePublisher(const Client& client, PublisherOptions options)
    : client_(client),
      options_(std::move(options)),
      name_(SliceName(options_.node_name)),
      log_(ComponentLogger("dra-api.slices")) {}

SlicePublisher::~SlicePublisher() { Stop(); }

std::optional<uint64_t> SlicePublisher::published_generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return published_generation_;
}

absl::StatusOr<json> SlicePublisher::ReadPlugin(uint64_t* generation) const {
  LocalRequestOptions o;
  o.timeout = options_.plugin_timeout;
  absl::StatusOr<LocalResponse> r = LocalGet(options_.plugin_address, "/dra/resourceslice", o);
  if (!r.ok()) return r.status();
  if (r->status == 503) {
    return absl::FailedPreconditionError("the plugin has not scanned the hardware yet (503)");
  }
  if (r->status != 200) {
    return absl::UnavailableError(fmt::format("the plugin answered {}", r->status));
  }
  const json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("spec") || !j["spec"].is_object() ||
      !j.contains("generation") || !j["generation"].is_number_unsigned()) {
    return absl::DataLossError("the plugin's /dra/resourceslice is not {generation, spec}");
  }
  if (j.value("nodeName", "") != options_.node_name) {
    return absl::FailedPreconditionError(
        fmt::format("the plugin publishes for node \"{}\", this is \"{}\"", j.value("nodeName", ""),
                    options_.node_name));
  }
  *generation = j["generation"].get<uint64_t>();
  return j["spec"];
}

absl::Status SlicePublisher::Publish(const json& spec) {
  if (node_uid_.empty()) {
    absl::StatusOr<json> node = client_.Get(fmt::format("/api/v1/nodes/{}", options_.node_name));
    if (!node.ok()) return node.status();
    node_uid_ = node->value("/metadata/uid"_json_pointer, std::string());
    if (node_uid_.empty()) return absl::DataLossError("the Node object has no metadata.uid");
  }
  json slice = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata",
                 {{"name", name_},
                  {"ownerReferences", json::array({{{"apiVersion", "v1"},
                                                    {"kind", "Node"},
                                                    {"name", options_.node_name},
                                                    {"uid", node_uid_},
                                                    {"controller", true}}})}}},
                {"spec", spec}};
  const std::string path = fmt::format("{}/{}", kSlices, name_);
  absl::Status last;
  for (int attempt = 0; attempt < kConflictRetries; ++attempt) {
    absl::StatusOr<json> current = client_.Get(path);
    if (absl::IsNotFound(current.status())) {
      absl::StatusOr<json> made = client_.Post(kSlices, slice);
      if (made.ok()) return absl::OkStatus();
      last = made.status();
      if (absl::IsAlreadyExists(last)) continue;  // made meanwhile: read it and update
      return last;
    }
    if (!current.ok()) return current.status();
    if (current->value("spec", json()) == spec &&
        current->value("/metadata/ownerReferences"_json_pointer, json()) ==
            slice["metadata"]["ownerReferences"]) {
      return absl::OkStatus();
    }
    slice["metadata"]["resourceVersion"] =
        current->value("/metadata/resourceVersion"_json_pointer, std::string());
    absl::StatusOr<json> updated = client_.Put(path, slice);
    if (updated.ok()) return absl::OkStatus();
    last = updated.status();
    if (!absl::IsAborted(last)) return last;  // 409: someone else wrote it; read again
    log_->info("slice {} changed under us ({}); reading it again", name_,
               std::string{last.message()});
  }
  return last;
}

absl::Status SlicePublisher::DeleteOthers() {
  absl::StatusOr<json> list =
      client_.Get(fmt::format("{}?fieldSelector=spec.nodeName%3D{}%2Cspec.driver%3D{}", kSlices,
                              options_.node_name, kDriverName));
  if (!list.ok()) return list.status();
  for (const json& item : list->value("items", json::array())) {
    const std::string name = item.value("/metadata/name"_json_pointer, std::string());
    if (name.empty() || name == name_) continue;
    absl::StatusOr<json> gone = client_.Delete(fmt::format("{}/{}", kSlices, name));
    if (!gone.ok() && !absl::IsNotFound(gone.status())) return gone.status();
    log_->info("deleted ResourceSlice {}: not this driver's current slice for node {}", name,
               options_.node_name);
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

absl::Status SlicePublisher::Sync() {
  uint64_t generation = 0;
  absl::StatusOr<json> spec = ReadPlugin(&generation);
  plugin_failed_ = !spec.ok();
  if (!spec.ok()) return spec.status();
  const auto now = std::chrono::steady_clock::now();
  if (*spec == last_spec_ && now - last_verified_ < options_.resync) return absl::OkStatus();
  if (absl::Status s = Publish(*spec); !s.ok()) return s;
  // After the publish, so that the node is never without a slice while it has devices.
  if (absl::Status s = DeleteOthers(); !s.ok()) return s;
  if (*spec != last_spec_) {
    log_->info("published ResourceSlice {} (plugin generation {}, {} devices)", name_, generation,
               spec->value("devices", json::array()).size());
  }
  last_spec_ = *std::move(spec);
  last_verified_ = now;
  std::lock_guard<std::mutex> lock(mu_);
  published_generation_ = generation;
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
      log_->info("{}; ResourceSlice {} is current",
                 state_ == State::kApiDown  ? "the API server is reachable again"
                 : state_ == State::kPlugin ? "the plugin's slice is readable again"
                                            : "publishing works again",
                 name_);
      break;
    case State::kPlugin:
      log_->warn("cannot read the plugin's slice: {}", message);
      break;
    case State::kApiDown:
      log_->warn("the API server cannot be reached: {}; retrying with back-off up to {} ms",
                 message, options_.backoff_max.count());
      break;
    case State::kApi:
      log_->error("publishing ResourceSlice {}: {}; retrying with back-off", name_, message);
      break;
  }
  state_ = now;
  last_message_ = message;
}

void SlicePublisher::Run() {
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (;;) {
    const absl::Status s = SyncOnce();
    Report(s);
    // The plugin is local and cheap to ask: its failures wait the poll period. The API server's
    // (down, or refusing what we send) back off.
    api_failures_ = s.ok() || plugin_failed_ ? 0 : api_failures_ + 1;
    const auto wait = api_failures_ == 0 ? options_.poll
                                         : Backoff(api_failures_, options_.backoff_initial,
                                                   options_.backoff_max, unit(rng));
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, wait, [this] { return stop_; })) return;
  }
}

void SlicePublisher::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void SlicePublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace neuron::kubeapi

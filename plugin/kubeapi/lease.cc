#include "plugin/kubeapi/lease.h"

#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/base/component_log.h"
#include "core/base/file_io.h"
#include "core/base/hash.h"
#include "fmt/format.h"

namespace neuron::kubeapi {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr char kLeasePrefix[] = "neuron-dra-api-";
constexpr size_t kMaxName = 253;  // a DNS subdomain
constexpr char kNamespaceFile[] = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
constexpr milliseconds kMinPeriod{100};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

const json& SpecOf(const json& lease) {
  static const json kEmpty = json::object();
  const auto it = lease.find("spec");
  return it != lease.end() && it->is_object() ? *it : kEmpty;
}

std::string HolderOf(const json& lease) {
  const json& spec = SpecOf(lease);
  const auto it = spec.find("holderIdentity");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Past renewTime + leaseDurationSeconds (the record's own duration: the holder's promise). A
// record without a renewTime that parses promises nothing: every holder writes one.
bool Expired(const json& lease, std::chrono::system_clock::time_point now, milliseconds fallback) {
  const json& spec = SpecOf(lease);
  const json seconds = spec.value("leaseDurationSeconds", json());
  const milliseconds duration = seconds.is_number_integer() && seconds.get<int64_t>() > 0
                                    ? milliseconds(seconds.get<int64_t>() * 1000)
                                    : fallback;
  const json renew = spec.value("renewTime", json());
  absl::Time renewed;
  std::string error;
  if (!renew.is_string() ||
      !absl::ParseTime(absl::RFC3339_full, renew.get<std::string>(), &renewed, &error)) {
    return true;
  }
  return absl::FromChrono(now) > renewed + absl::FromChrono(duration);
}

}  // namespace

absl::Status CheckLeaseTimes(const LeaseOptions& o) {
  const auto bad = [](const std::string& what) { return absl::InvalidArgumentError(what); };
  if (o.duration < std::chrono::seconds(1) || o.duration.count() % 1000 != 0) {
    return bad(
        fmt::format("--lease-duration {}ms: must be whole seconds, at least 1s (the Lease "
                    "holds leaseDurationSeconds)",
                    o.duration.count()));
  }
  if (o.retry < kMinPeriod || o.renew_deadline < kMinPeriod) {
    return bad(fmt::format("--lease-renew-deadline {}ms and --lease-retry {}ms: each at least {}ms",
                           o.renew_deadline.count(), o.retry.count(), kMinPeriod.count()));
  }
  if (o.renew_deadline >= o.duration) {
    return bad(fmt::format(
        "--lease-renew-deadline {}ms must be shorter than --lease-duration {}ms (a holder must "
        "stop writing before a candidate may take over)",
        o.renew_deadline.count(), o.duration.count()));
  }
  if (o.renew_deadline.count() * 10 <= o.retry.count() * 12) {
    return bad(fmt::format(
        "--lease-renew-deadline {}ms must be more than 1.2 x --lease-retry {}ms (a holder needs "
        "more than one try to renew before its deadline)",
        o.renew_deadline.count(), o.retry.count()));
  }
  if (o.name.empty() || o.identity.empty() || o.lease_namespace.empty()) {
    return bad("the lease needs a name, a namespace and this pod's identity");
  }
  return absl::OkStatus();
}

std::string LeaseName(const std::string& node_name) {
  std::string name = kLeasePrefix + node_name;
  if (name.size() <= kMaxName) return name;
  const std::string hash = fmt::format("{:016x}", Fnv1a64(node_name));
  name.resize(kMaxName - hash.size() - 1);
  // Cut at a label's end, the next label would start with '-' or '.': neither is allowed.
  while (!name.empty() && (name.back() == '-' || name.back() == '.')) name.pop_back();
  return name + "-" + hash;
}

std::string DefaultLeaseIdentity() {
  std::string pod = Env("POD_NAME");
  if (pod.empty()) {
    std::array<char, 256> host{};
    pod = ::gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "neuron-dra-api";
  }
  const std::string uid = Env("POD_UID");
  return uid.empty() ? pod : pod + "_" + uid;
}

std::string DefaultLeaseNamespace() {
  absl::StatusOr<std::string> ns = ReadAttribute(kNamespaceFile);
  if (ns.ok()) {
    std::string_view t = *ns;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
    if (!t.empty()) return std::string(t);
  }
  return "neuron-system";
}

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  const absl::Time micro = absl::FromUnixMicros(absl::ToUnixMicros(absl::FromChrono(t)));
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", micro, absl::UTCTimeZone());
}

LeaderLease::LeaderLease(const Client& client, LeaseOptions options)
    : client_(client), options_(std::move(options)), log_(ComponentLogger("dra-api.lease")) {}

LeaderLease::~LeaderLease() { Stop(); }

std::string LeaderLease::Path(bool item) const {
  std::string p =
      fmt::format("/apis/coordination.k8s.io/v1/namespaces/{}/leases", options_.lease_namespace);
  if (item) p += "/" + options_.name;
  return p;
}

json LeaderLease::Record(const json* current, std::chrono::system_clock::time_point now) const {
  json lease =
      current != nullptr
          ? *current
          : json{{"apiVersion", "coordination.k8s.io/v1"},
                 {"kind", "Lease"},
                 {"metadata", {{"name", options_.name}, {"namespace", options_.lease_namespace}}}};
  json spec = SpecOf(lease);
  const std::string stamp = FormatMicroTime(now);
  if (current == nullptr) {
    spec["leaseTransitions"] = 0;
    spec["acquireTime"] = stamp;
  } else if (HolderOf(*current) != options_.identity) {
    // A takeover, from a holder that released the lease or let it expire.
    const json transitions = spec.value("leaseTransitions", json());
    spec["leaseTransitions"] =
        (transitions.is_number_integer() ? transitions.get<int64_t>() : 0) + 1;
    spec["acquireTime"] = stamp;
  }
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = options_.duration.count() / 1000;
  spec["renewTime"] = stamp;
  lease["spec"] = std::move(spec);
  return lease;  // metadata.resourceVersion is the one read: the server refuses a stale write
}

bool LeaderLease::MayHold(const json& lease, std::chrono::system_clock::time_point now) const {
  const std::string holder = HolderOf(lease);
  if (holder.empty() || holder == options_.identity) return true;
  return Expired(lease, now, options_.duration);
}

absl::StatusOr<bool> LeaderLease::TryAcquireOrRenew() {
  // nlohmann-json throws on a value of an unexpected type; nothing may leave Run's thread.
  try {
    return AcquireOrRenew();
  } catch (const json::exception& e) {
    return absl::DataLossError(
        fmt::format("lease {}: unexpected JSON: {}", options_.name, e.what()));
  }
}

absl::Status LeaderLease::Release() {
  try {
    return GiveUp();
  } catch (const json::exception& e) {
    return absl::DataLossError(
        fmt::format("lease {}: unexpected JSON: {}", options_.name, e.what()));
  }
}

absl::StatusOr<bool> LeaderLease::AcquireOrRenew() {
  const auto now = std::chrono::system_clock::now();
  absl::StatusOr<json> current = client_.Get(Path(true));
  absl::StatusOr<json> written;
  if (absl::IsNotFound(current.status())) {
    written = client_.Post(Path(false), Record(nullptr, now));
  } else if (!current.ok()) {
    return current.status();
  } else {
    Observe(HolderOf(*current));
    if (!MayHold(*current, now)) {
      SetLeading(false);
      return false;
    }
    written = client_.Put(Path(true), Record(&*current, now));
  }
  if (!written.ok()) return written.status();
  Observe(HolderOf(*written));
  SetLeading(HolderOf(*written) == options_.identity);
  return leading();
}

absl::Status LeaderLease::GiveUp() {
  if (!leading()) return absl::OkStatus();
  absl::Status s;
  // One more read and write when another write came between ours (a 409).
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<json> current = client_.Get(Path(true));
    if (!current.ok()) return current.status();
    if (const std::string holder = HolderOf(*current); holder != options_.identity) {
      // Not ours any more: nothing to give.
      Observe(holder);
      SetLeading(false);
      return absl::OkStatus();
    }
    json lease = *current;
    json& spec = lease["spec"];
    const std::string stamp = FormatMicroTime(std::chrono::system_clock::now());
    // As client-go's release: no holder, the shortest duration, and the transitions kept.
    spec["holderIdentity"] = "";
    spec["leaseDurationSeconds"] = 1;
    spec["renewTime"] = stamp;
    s = client_.Put(Path(true), lease).status();
    if (!absl::IsAborted(s)) break;
  }
  if (s.ok()) {
    SetLeading(false);
    Observe("");
  }
  return s;
}

void LeaderLease::Start(std::function<void()> on_started, std::function<void()> on_stopped) {
  on_started_ = std::move(on_started);
  on_stopped_ = std::move(on_stopped);
  loop_.Start([this] { return Round(); });
}

void LeaderLease::Stop() {
  if (!loop_.Stop()) return;
  if (!leading()) return;
  // Our writes end before the lease is given up, so that the successor's are the only ones.
  if (on_stopped_) on_stopped_();
  const absl::Status s = Release();
  if (s.ok()) {
    log_->info("released lease {}/{}: the next neuron-dra-api of this node may write now",
               options_.lease_namespace, options_.name);
  } else {
    log_->warn(
        "could not release lease {}/{} ({}); the next holder takes it over {} ms after "
        "our last renewal",
        options_.lease_namespace, options_.name, std::string{s.message()},
        options_.duration.count());
  }
}

milliseconds LeaderLease::Round() {
  const bool was_leading = leading();
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<bool> held = TryAcquireOrRenew();
  // A 409 or an AlreadyExists: another candidate wrote between our read and our write. Read
  // again at once, to see who holds it now.
  if (absl::IsAborted(held.status()) || absl::IsAlreadyExists(held.status())) {
    held = TryAcquireOrRenew();
  }
  if (held.ok() && *held) {
    last_renewed_ = started;
    last_error_.clear();
    waiting_for_.clear();
    if (!was_leading) {
      log_->info("acquired lease {}/{} as {}: this process writes the node's ResourceSlices",
                 options_.lease_namespace, options_.name, options_.identity);
      if (on_started_) on_started_();
    }
    return options_.retry;
  }
  if (held.ok()) {
    if (was_leading) Lose(fmt::format("{} holds it now", holder()));
    if (const std::string h = holder(); h != waiting_for_) {
      log_->info(
          "lease {}/{} is held by {}: waiting for its release or expiry before writing "
          "ResourceSlices",
          options_.lease_namespace, options_.name, h);
      waiting_for_ = h;
    }
    return options_.retry;
  }
  if (const std::string m(held.status().message()); m != last_error_) {
    log_->warn("lease {}/{}: {}", options_.lease_namespace, options_.name, m);
    last_error_ = m;
  }
  if (!was_leading) return options_.retry;
  const auto deadline = last_renewed_ + options_.renew_deadline;
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline) {
    Lose(fmt::format("not renewed for {} ms", options_.renew_deadline.count()));
    return options_.retry;
  }
  // The next try no later than the deadline, so that losing is decided on time.
  return std::min(options_.retry, std::chrono::ceil<milliseconds>(deadline - now));
}

void LeaderLease::Lose(std::string_view why) {
  SetLeading(false);
  if (on_stopped_) on_stopped_();
  log_->error("lost lease {}/{} ({}): stopped writing ResourceSlices; trying again as a candidate",
              options_.lease_namespace, options_.name, why);
  waiting_for_.clear();
}

void LeaderLease::Observe(const std::string& holder) {
  std::lock_guard<std::mutex> lock(mu_);
  holder_ = holder;
}

void LeaderLease::SetLeading(bool leading) {
  std::lock_guard<std::mutex> lock(mu_);
  leading_ = leading;
}

bool LeaderLease::leading() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leading_;
}

std::string LeaderLease::holder() const {
  std::lock_guard<std::mutex> lock(mu_);
  return holder_;
}

}  // namespace neuron::kubeapi

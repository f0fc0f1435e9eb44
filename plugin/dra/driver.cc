#include "plugin/dra/driver.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <set>
#include <system_error>

#include "core/base/component_log.h"
#include "core/driver/sysfs_names.h"
#include "core/model/catalog.h"
#include "core/model/device_id.h"
#include "core/model/visible_cores.h"
#include "core/node/withhold.h"
#include "fmt/format.h"
#include "plugin/dra/cdi.h"
#include "plugin/dra/slice.h"
#include "plugin/dra/ultraserver_config.h"

namespace neuron::plugin::dra {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kCheckpointFile = "checkpoint.json";

// An exclusive flock for a scope: serialises the instances of a rolling update (driver.h).
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  const int fd_;
};
constexpr std::string_view kNeuronConfigKind = "NeuronConfig";

// One device of our slice, resolved against the node.
struct Resolved {
  std::string name;
  std::string request;
  DeviceRef ref;    // its kind and number (device_kinds.h)
  int device = -1;  // Neuron device index (for a core: its device)
  std::string efa;  // an EFA interface name
  std::optional<int> uverbs;
  bool admin = false;  // adminAccess: shared, holds nothing
  // neuron-node: every device and core of the node.
  bool node() const { return ref.kind == DeviceKind::kNeuronNode; }
};

// A result of a prioritized list (firstAvailable, GA in 1.36) names its subrequest as
// "<request>/<subrequest>"; the kubelet knows the claim's requests only, so the answer names the
// request (the library's kubeletplugin strips the same), and a config for the request applies to
// each of its subrequests.
std::string_view ParentRequest(std::string_view request) {
  return request.substr(0, request.find('/'));
}

bool ConfigApplies(const ClaimConfig& c, std::string_view request) {
  if (c.requests.empty()) return true;
  return std::any_of(c.requests.begin(), c.requests.end(), [&](const std::string& r) {
    return r == request || r == ParentRequest(request);
  });
}

// Claim uids name files (CDI specs): Kubernetes uids are UUIDs; anything else is refused.
absl::Status CheckUid(std::string_view uid) {
  const bool ok =
      !uid.empty() && uid.size() <= 64 && std::all_of(uid.begin(), uid.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
      });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("claim uid '{}' is not a Kubernetes uid", uid));
}

absl::StatusOr<Resolved> Resolve(const NodeView& view, const AllocationResult& r) {
  Resolved out;
  out.name = r.device;
  out.request = r.request;
  out.admin = r.admin_access;
  const std::string_view name = r.device;
  auto missing = [&] {
    return absl::NotFoundError(fmt::format("device {} is not on this node", r.device));
  };
  const std::optional<DeviceRef> ref = ParseDeviceName(name, kMaxDevices * kMaxCoresPerDevice);
  if (!ref) return missing();
  out.ref = *ref;
  switch (ref->kind) {
    case DeviceKind::kNeuronNode:
      // Whether the node may be had is Plan's question: a claim that holds it keeps holding
      // every device while the driver's UltraServer attributes are unreadable.
      return out;
    case DeviceKind::kEfa:
      for (const auto& [ifname, e] : view.efas) {
        if (EfaDeviceName(ifname) != name) continue;
        if (!e.present || !e.uverbs) return missing();
        out.efa = ifname;
        out.uverbs = e.uverbs;
        return out;
      }
      return missing();
    case DeviceKind::kNeuronCore:
      out.device = ref->number / view.allocator->cores_per_device();
      break;
    case DeviceKind::kNeuronDevice:
      if (ref->number >= kMaxDevices) return missing();
      out.device = ref->number;
      break;
  }
  const auto it = view.devices.find(out.device);
  if (it == view.devices.end() || !it->second.present) return missing();
  return out;
}

// What a device holds (device_kinds.h: its cores, or its EFA), as units no two claims may share.
std::set<std::string> Units(const Resolved& d, const NodeView& view) {
  std::set<std::string> out;
  if (!d.efa.empty()) out.insert("efa:" + d.efa);
  for (int core : HeldCores(d.ref, view.allocator->cores_per_device(), PresentDevices(view))) {
    out.insert(fmt::format("core:{}", core));
  }
  return out;
}

// NeuronConfig.logicalNeuronCore: accepted only when it equals the node's LNC (one LNC per node:
// docs/architecture.md#lnc).
absl::Status CheckLnc(const std::string& who, const nlohmann::json& parameters, int node_lnc) {
  const auto lnc = parameters.find("logicalNeuronCore");
  if (lnc == parameters.end()) return absl::OkStatus();
  if (!lnc->is_number_integer()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: NeuronConfig.logicalNeuronCore is not an integer", who));
  }
  if (lnc->get<int64_t>() == node_lnc) return absl::OkStatus();
  return absl::FailedPreconditionError(fmt::format(
      "{}: NeuronConfig.logicalNeuronCore {} differs from this node's LNC {}; the LNC is set per "
      "node (NEURON_LOGICAL_NC_CONFIG, --lnc), not per claim",
      who, lnc->get<int64_t>(),
      node_lnc == 0 ? std::string("(unknown)") : std::to_string(node_lnc)));
}

// Our opaque configs that apply to the claim's devices (docs/kubelet-api.md#dra-prepare):
// NeuronConfig on any device, UltraServerConfig on a neuron-node only. Returns the UltraServer
// environment for neuron-node (empty without an UltraServerConfig); a later config overrides an
// earlier one, as the API orders them (the class's, then the claim's).
absl::StatusOr<std::vector<std::string>> CheckConfig(const ResourceClaim& claim,
                                                     std::string_view driver,
                                                     const std::vector<Resolved>& devices,
                                                     const NodeView& view) {
  const std::string who = fmt::format("claim {}/{}", claim.namespace_, claim.name);
  std::vector<std::string> env;
  for (const ClaimConfig& c : claim.config) {
    if (c.driver != driver) continue;
    std::vector<const Resolved*> applies;
    for (const Resolved& d : devices) {
      if (ConfigApplies(c, d.request)) applies.push_back(&d);
    }
    if (applies.empty()) continue;
    const std::string kind = c.parameters.value("kind", "");
    if (kind == kNeuronConfigKind) {
      if (absl::Status s = CheckLnc(who, c.parameters, NodeLnc(view)); !s.ok()) return s;
    } else if (kind == kUltraServerConfigKind) {
      if (std::none_of(applies.begin(), applies.end(),
                       [](const Resolved* d) { return d->node(); })) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: UltraServerConfig applies only to a {} device (resourceType neuron_node), and "
            "none of its requests got one",
            who, kNodeDeviceName));
      }
      absl::StatusOr<std::vector<std::string>> us =
          UltraServerEnv(view.node.ultraserver, c.parameters);
      if (!us.ok()) {
        return absl::Status(us.status().code(),
                            fmt::format("{}: {}", who, std::string{us.status().message()}));
      }
      env = *std::move(us);
    } else {
      return absl::InvalidArgumentError(
          fmt::format("{}: opaque config kind '{}' is not supported (only {} and {})", who, kind,
                      kNeuronConfigKind, kUltraServerConfigKind));
    }
  }
  return env;
}

// The CDI devices of a claim: device nodes per device (neuron-node: all of them), and
// NEURON_RT_VISIBLE_CORES for all the claim's cores (one contiguous run, as the runtime requires)
// on each Neuron one; `ultraserver` env on neuron-node.
absl::StatusOr<std::vector<CdiDevice>> CdiDevices(const std::vector<Resolved>& devices,
                                                  const NodeView& view,
                                                  const std::vector<std::string>& ultraserver) {
  std::vector<int> cores;
  for (const Resolved& d : devices) {
    if (d.admin) continue;
    const std::vector<int> held =
        HeldCores(d.ref, view.allocator->cores_per_device(), PresentDevices(view));
    cores.insert(cores.end(), held.begin(), held.end());
  }
  std::sort(cores.begin(), cores.end());
  std::string env;
  if (!cores.empty()) {
    if (!Allocator::IsContiguous(cores)) {
      return absl::FailedPreconditionError(fmt::format(
          "the claim's NeuronCores {}..{} are not one contiguous run, which the Neuron runtime "
          "needs: ask for connected devices (matchAttribute resource.aws.com/devicegroup4_id) or "
          "for k cores in one run (matchAttribute neuron.aws.com/coregroup<k>_id)",
          cores.front(), cores.back()));
    }
    env = "NEURON_RT_VISIBLE_CORES=" +
          FormatVisibleCores({cores.front(), static_cast<int>(cores.size())});
  }
  std::vector<CdiDevice> out;
  for (const Resolved& d : devices) {
    CdiDevice c{.name = d.name, .device_nodes = {}, .env = {}};
    if (!d.efa.empty()) {
      c.device_nodes.push_back(fmt::format("/dev/infiniband/uverbs{}", *d.uverbs));
    } else {
      for (int index : d.node() ? PresentDevices(view) : std::vector<int>{d.device}) {
        c.device_nodes.push_back(RootPaths("/").DevNeuron(index).string());
      }
      // A monitoring pod's adminAccess device: its nodes, not the cores the runtime would run on.
      if (!d.admin && !env.empty()) c.env.push_back(env);
      if (d.node()) c.env.insert(c.env.end(), ultraserver.begin(), ultraserver.end());
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Double booking: no unit of `devices` is held by another prepared claim, or twice in this one.
absl::Status CheckFree(const PreparedClaims& claims, const std::vector<Resolved>& devices,
                       const NodeView& view) {
  std::map<std::string, std::string> held;  // unit -> holder
  for (const auto& [uid, c] : claims) {
    for (const PreparedDevice& p : c.devices) {
      if (p.admin_access) continue;  // shared with whoever holds it
      absl::StatusOr<Resolved> d =
          Resolve(view, {.request = "", .driver = "", .pool = "", .device = p.device});
      if (!d.ok()) continue;  // gone from the node: it can be given to no one else either
      for (const std::string& u : Units(*d, view)) {
        held[u] = fmt::format("claim {}/{} ({})", c.namespace_, c.name, p.device);
      }
    }
  }
  for (const Resolved& d : devices) {
    if (d.admin) continue;
    for (const std::string& u : Units(d, view)) {
      const auto [it, fresh] = held.emplace(u, fmt::format("this claim ({})", d.name));
      if (!fresh) {
        return absl::AlreadyExistsError(
            fmt::format("device {} is already held by {}", d.name, it->second));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int NodeLnc(const NodeView& view) {
  const absl::StatusOr<const InstanceSpec*> spec = FindInstance(view.node.instance_type);
  if (!spec.ok() || (*spec)->chip == nullptr || view.cores_per_device <= 0) return 0;
  const int physical = (*spec)->chip->physical_cores;
  return physical % view.cores_per_device == 0 ? physical / view.cores_per_device : 0;
}

Driver::Driver(DriverOptions options)
    : options_(std::move(options)),
      cdi_{.dir = options_.cdi_dir, .kind = CdiKindOf(options_.driver_name)},
      checkpoint_path_(options_.checkpoint_dir / kCheckpointFile) {}

absl::StatusOr<std::unique_ptr<Driver>> Driver::Create(DriverOptions options) {
  std::error_code ec;
  fs::create_directories(options.checkpoint_dir, ec);
  if (ec) {
    return absl::InternalError(
        fmt::format("cannot make {}: {}", options.checkpoint_dir.string(), ec.message()));
  }
  std::unique_ptr<Driver> d(new Driver(std::move(options)));
  const auto log = ComponentLogger("dra");
  const fs::path lock_path = d->options_.checkpoint_dir / "prepare.lock";
  d->lock_fd_.Reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!d->lock_fd_.valid()) {
    return absl::InternalError(
        fmt::format("cannot open {}: {}", lock_path.string(), std::strerror(errno)));
  }
  std::lock_guard<std::mutex> lock(d->mu_);
  const FileLock across(d->lock_fd_.get());
  d->seen_ = d->Stamp();
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(d->checkpoint_path_);
  if (loaded.ok()) {
    d->Recover(*std::move(loaded), /*at_start=*/true);
  } else if (absl::IsDataLoss(loaded.status())) {
    // Not trusted: its claims may be wrong. Kept aside for a person to read; the kubelet
    // prepares its pods' claims again.
    const fs::path aside = d->checkpoint_path_.string() + ".refused";
    fs::rename(d->checkpoint_path_, aside, ec);
    log->error("{}; refused, moved to {}: starting with no prepared claims",
               std::string{loaded.status().message()}, aside.string());
  }
  return d;
}

absl::StatusOr<ResourceClaim> Driver::Fetch(const ClaimRef& ref) const {
  if (absl::Status s = CheckUid(ref.uid); !s.ok()) return s;
  absl::StatusOr<ResourceClaim> claim = options_.claims->Get(ref.namespace_, ref.name);
  if (!claim.ok()) return claim.status();
  if (claim->uid != ref.uid) {
    return absl::FailedPreconditionError(
        fmt::format("claim {}/{} has uid {}, not {}: it was replaced", ref.namespace_, ref.name,
                    claim->uid, ref.uid));
  }
  if (!claim->allocated) {
    return absl::FailedPreconditionError(
        fmt::format("claim {}/{} is not allocated", ref.namespace_, ref.name));
  }
  return claim;
}

void Driver::Recover(Checkpoint loaded, bool at_start) {
  const auto log = ComponentLogger("dra");
  const std::string path = checkpoint_path_.string();
  if (!loaded.boot_id.empty() && !options_.boot_id.empty() && loaded.boot_id != options_.boot_id) {
    log->info(
        "checkpoint {}: {} claims from before the node's last boot (boot {}, now {}) dropped: "
        "their CDI specs went with the boot, and the kubelet prepares its pods' claims again",
        path, loaded.claims.size(), loaded.boot_id, options_.boot_id);
    loaded.claims.clear();
  }
  const size_t before = loaded.claims.size();
  std::erase_if(loaded.claims, [&](const auto& kv) {
    if (kv.second.state != PrepareState::kStarted) return false;
    log->warn(
        "checkpoint {}: claim {}/{} ({}) was being prepared when the plugin stopped: rolled "
        "back (the kubelet asks again)",
        path, kv.second.namespace_, kv.second.name, kv.first);
    (void)RemoveCdiSpec(cdi_, kv.first);
    return true;
  });
  claims_ = std::move(loaded.claims);
  if (at_start) log->info("checkpoint {}: {} prepared claims kept", path, claims_.size());
  if (before != claims_.size() || loaded.boot_id != options_.boot_id) (void)Save();
}

absl::Status Driver::Save() {
  absl::Status s =
      SaveCheckpoint(checkpoint_path_, {.boot_id = options_.boot_id, .claims = claims_});
  seen_ = Stamp();
  return s;
}

std::pair<uint64_t, int64_t> Driver::Stamp() const {
  struct stat st {};
  if (::stat(checkpoint_path_.c_str(), &st) != 0) return {0, 0};
  return {st.st_ino, st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec};
}

void Driver::Reload() {
  const std::pair<uint64_t, int64_t> now = Stamp();
  if (now == seen_) return;  // ours, as we left it
  seen_ = now;
  absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(checkpoint_path_);
  if (!loaded.ok()) {
    // Another instance's file we cannot read: keep what we hold (never fewer holdings).
    ComponentLogger("dra")->error("checkpoint {} changed and cannot be read: {}",
                                  checkpoint_path_.string(),
                                  std::string{loaded.status().message()});
    return;
  }
  Recover(*std::move(loaded), /*at_start=*/false);
}

absl::StatusOr<Driver::Planned> Driver::Plan(const ClaimRef& ref, const ResourceClaim& claim,
                                             const NodeView& view) const {
  std::vector<Resolved> devices;
  for (const AllocationResult& r : claim.results) {
    if (r.driver != options_.driver_name || r.pool != options_.node_name) continue;  // another's
    absl::StatusOr<Resolved> d = Resolve(view, r);
    if (!d.ok()) return d.status();
    if (options_.driver_name == kEfaDriverName && d->ref.kind != DeviceKind::kEfa) {
      return absl::NotFoundError(
          fmt::format("device {} is not a device of driver {}", r.device, kEfaDriverName));
    }
    if (d->node() && !IsUltraServerNode(view)) {  // offered on an UltraServer node only (slice.h)
      return absl::NotFoundError(fmt::format(
          "device {} is not on this node (not an UltraServer node, or its UltraServer attributes "
          "are unknown now)",
          r.device));
    }
    devices.push_back(*std::move(d));
  }
  absl::StatusOr<std::vector<std::string>> ultraserver =
      CheckConfig(claim, options_.driver_name, devices, view);
  if (!ultraserver.ok()) return ultraserver.status();
  if (options_.peer != nullptr) {
    if (absl::Status s = CheckFree(options_.peer->prepared(), devices, view); !s.ok()) return s;
  }
  if (absl::Status s = CheckFree(claims_, devices, view); !s.ok()) return s;
  absl::StatusOr<std::vector<CdiDevice>> cdi = CdiDevices(devices, view, *ultraserver);
  if (!cdi.ok()) return cdi.status();
  Planned out{.devices = {}, .cdi = *std::move(cdi)};
  for (const Resolved& d : devices) {
    out.devices.push_back({.requests = {std::string(ParentRequest(d.request))},
                           .pool = options_.node_name,
                           .device = d.name,
                           .cdi_ids = {CdiId(cdi_.kind, ref.uid, d.name)},
                           .admin_access = d.admin});
  }
  return out;
}

void Driver::Commit(std::map<std::string, Planned> planned, const std::vector<ClaimRef>& refs,
                    std::map<std::string, absl::StatusOr<std::vector<PreparedDevice>>>* out) {
  const auto log = ComponentLogger("dra");
  const auto refuse = [&](const std::string& uid, const absl::Status& s) {
    claims_.erase(uid);
    (void)RemoveCdiSpec(cdi_, uid);
    out->at(uid) = s;
  };
  // Prepare recorded each planned claim as started (the next claim of the call is checked
  // against it); the answer is its devices unless what follows refuses it.
  for (const auto& [uid, p] : planned) out->insert_or_assign(uid, p.devices);
  // Without the started record a crash could leave a spec no checkpoint names; without the
  // completed one a restart would forget the claims: refuse them now instead.
  if (absl::Status s = Save(); !s.ok()) {
    for (const auto& [uid, p] : planned) refuse(uid, s);
    return;
  }
  for (const ClaimRef& ref : refs) {
    if (!planned.contains(ref.uid)) continue;
    absl::StatusOr<std::vector<std::string>> ids =
        WriteCdiSpec(cdi_, ref.uid, planned.at(ref.uid).cdi);
    if (!ids.ok()) {
      refuse(ref.uid, ids.status());
      planned.erase(ref.uid);
      continue;
    }
    claims_[ref.uid].state = PrepareState::kCompleted;
    log->info("prepared claim {}/{} ({}): {} devices", ref.namespace_, ref.name, ref.uid,
              planned.at(ref.uid).devices.size());
  }
  if (absl::Status s = Save(); !s.ok()) {
    for (const auto& [uid, p] : planned) refuse(uid, s);
  }
}

std::set<int> NeuronDevicesOf(const std::vector<PreparedDevice>& devices, const NodeView& view) {
  std::set<int> out;
  for (const PreparedDevice& d : devices) {
    const std::optional<DeviceRef> ref =
        ParseDeviceName(d.device, kMaxDevices * kMaxCoresPerDevice);
    if (!ref) continue;
    if (ref->kind == DeviceKind::kNeuronDevice) out.insert(ref->number);
    if (ref->kind == DeviceKind::kNeuronCore && view.cores_per_device > 0) {
      out.insert(ref->number / view.cores_per_device);
    }
    if (ref->kind == DeviceKind::kNeuronNode) {
      for (const auto& [index, hw] : view.devices) out.insert(index);
    }
  }
  return out;
}

std::map<std::string, absl::StatusOr<std::vector<PreparedDevice>>> Driver::Prepare(
    const std::vector<ClaimRef>& claims) {
  const auto log = ComponentLogger("dra");
  std::map<std::string, absl::StatusOr<std::vector<PreparedDevice>>> out;
  // Already prepared: the same answer, from memory. The others are fetched, all at once.
  std::vector<const ClaimRef*> wanted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const FileLock across(lock_fd_.get());
    Reload();
    for (const ClaimRef& ref : claims) {
      if (const auto it = claims_.find(ref.uid); it != claims_.end()) {
        out.emplace(ref.uid, it->second.devices);
      } else {
        wanted.push_back(&ref);
      }
    }
  }
  std::vector<std::future<absl::StatusOr<ResourceClaim>>> fetches;
  fetches.reserve(wanted.size());
  for (const ClaimRef* ref : wanted) {
    fetches.push_back(std::async(wanted.size() == 1 ? std::launch::deferred : std::launch::async,
                                 [this, ref] { return Fetch(*ref); }));
  }
  std::vector<absl::StatusOr<ResourceClaim>> fetched;
  fetched.reserve(fetches.size());
  for (auto& f : fetches) fetched.push_back(f.get());

  const std::shared_ptr<const NodeView> view = options_.state->view();
  std::lock_guard<std::mutex> lock(mu_);
  const FileLock across(lock_fd_.get());
  Reload();
  std::map<std::string, Planned> planned;
  std::vector<ClaimRef> refs;
  std::vector<WithholdLock> holds;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const ClaimRef& ref = *wanted[i];
    if (const auto it = claims_.find(ref.uid); it != claims_.end()) {
      out.emplace(ref.uid, it->second.devices);  // prepared by another call meanwhile
      continue;
    }
    absl::StatusOr<Planned> p = fetched[i].ok() ? Plan(ref, *fetched[i], *view)
                                                : absl::StatusOr<Planned>(fetched[i].status());
    // Held until the commit is done: a check or reset withholding one of these devices either
    // sees this claim or refuses it (core/node/withhold.h).
    if (p.ok()) {
      absl::StatusOr<AllocationHolds> held =
          HoldForAllocation(options_.root, NeuronDevicesOf(p->devices, *view));
      if (!held.ok()) {
        p = held.status();
      } else {
        if (!held->unusable.empty()) {
          log->warn("prepare without the withhold locks: {}", held->unusable);
        }
        std::move(held->locks.begin(), held->locks.end(), std::back_inserter(holds));
      }
    }
    if (!p.ok()) {
      log->warn("claim {}/{} ({}) not prepared: {}", ref.namespace_, ref.name, ref.uid,
                std::string{p.status().message()});
      out.emplace(ref.uid, p.status());
      continue;
    }
    // The next claim of this call is checked against this one's devices too.
    claims_[ref.uid] = PreparedClaim{ref.namespace_, ref.name, p->devices, PrepareState::kStarted};
    planned.emplace(ref.uid, *std::move(p));
    refs.push_back(ref);
  }
  if (!planned.empty()) Commit(std::move(planned), refs, &out);
  return out;
}

std::map<std::string, absl::Status> Driver::Unprepare(const std::vector<ClaimRef>& claims) {
  const auto log = ComponentLogger("dra");
  std::map<std::string, absl::Status> out;
  std::lock_guard<std::mutex> lock(mu_);
  const FileLock across(lock_fd_.get());
  Reload();
  PreparedClaims after = claims_;
  for (const ClaimRef& ref : claims) {
    if (absl::Status s = CheckUid(ref.uid); !s.ok()) {
      out[ref.uid] = s;
      continue;
    }
    out[ref.uid] = RemoveCdiSpec(cdi_, ref.uid);
    if (after.erase(ref.uid) > 0) {
      log->info("unprepared claim {}/{} ({})", ref.namespace_, ref.name, ref.uid);
    }
  }
  if (after != claims_) {
    std::swap(claims_, after);
    if (absl::Status s = Save(); !s.ok()) {
      std::swap(claims_, after);
      for (auto& [uid, r] : out) r = s;  // still held: the kubelet asks again
      return out;
    }
  }
  return out;
}

PreparedClaims Driver::prepared() const {
  std::lock_guard<std::mutex> lock(mu_);
  return claims_;
}

}  // namespace neuron::plugin::dra

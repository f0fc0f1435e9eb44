// Pod admission (docs/kubelet-api.md#allocate, #get-preferred-allocation) and the container-runtime
// role (docs/architecture.md#allocation, #device-numbering).
//
// DevicesToAllocate follows kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go
// devicesToAllocate (read for this emulator; the kubelet's order of steps is kept):
//   1. no healthy device -> "no healthy devices present; cannot allocate unhealthy devices";
//   2. take from the devices reusable from init containers first; if that is enough, done
//      (no GetPreferredAllocation call, but still an Allocate call);
//   3. available = healthy minus in use (and, our test hook, minus what lies outside a
//      container's `pinned` IDs); fewer than needed -> "requested number of devices unavailable";
//   4. filterByAffinity: we model no TopologyManager hint (policy none), so `aligned` and
//      `unaligned` are empty and every available device is `noAffinity`: the second branch runs;
//   5. GetPreferredAllocation(available ∪ allocated, must_include = allocated, size = required),
//      the mutex released around it; an RPC error aborts admission;
//   6. take from preferred ∩ available, then complete from `unaligned`, then `noAffinity`.
// Go iterates sets in random order, so wherever the kubelet walks a set (the completion, the
// ID lists it sends) we walk it shuffled with our seeded generator: a plugin must not depend on
// the order, and the kubelet's own choice without a preference is random.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>

#include "core/model/device_id.h"
#include "driver-sim/kubelet/emulator_impl.h"
#include "driver-sim/kubelet/rpc_error.h"

namespace neuron::sim {

namespace {

// The kubelet's admission message for any error of the device manager's Allocate.
absl::Status Unexpected(const std::string& cause) {
  return absl::UnknownError(fmt::format(
      "UnexpectedAdmissionError: Allocate failed due to {}, which is unexpected", cause));
}

std::string NewUid(std::mt19937_64& rng) {
  const uint64_t a = rng();
  const uint64_t b = rng();
  return fmt::format("{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xfff,
                     0x8000 | (b >> 48 & 0x3fff), b & 0xffffffffffffULL);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> KubeletEmulator::Impl::DevicesToAllocate(
    std::unique_lock<std::mutex>& lock, const std::string& resource, int required,
    const std::set<std::string>& reusable, const std::set<std::string>* pinned) {
  ExpireLocked();
  absl::StatusOr<std::vector<std::string>> healthy = HealthyLocked(resource);
  if (!healthy.ok()) return healthy.status();

  int needed = required;
  std::vector<std::string> allocated;
  std::set<std::string>& taken = admitting[resource];
  auto take_from = [&](std::vector<std::string> candidates) {
    std::shuffle(candidates.begin(), candidates.end(), rng);
    for (const std::string& d : candidates) {
      if (std::find(allocated.begin(), allocated.end(), d) != allocated.end()) continue;
      allocated.push_back(d);
      taken.insert(d);
      if (--needed == 0) return true;
    }
    return false;
  };
  if (take_from({reusable.begin(), reusable.end()})) return allocated;

  std::vector<std::string> available = AvailableLocked(resource, *healthy);
  if (pinned != nullptr) {
    std::erase_if(available, [&](const std::string& id) { return !pinned->contains(id); });
  }
  if (static_cast<int>(available.size()) < needed) {
    return absl::FailedPreconditionError(fmt::format(
        "Insufficient {}: requested number of devices unavailable for {}. Requested: {}, "
        "Available: {}",
        resource, resource, needed, available.size()));
  }
  absl::StatusOr<std::vector<std::string>> preferred =
      PreferredLocked(lock, resource, available, allocated, required);
  if (!preferred.ok()) return preferred.status();
  if (take_from(*std::move(preferred))) return allocated;
  // Completion: `unaligned` is empty without a hint, then `noAffinity` (= available).
  if (take_from(available)) return allocated;
  return Unexpected(
      fmt::format("unexpectedly allocated less resources than required. Requested: {}, Got: {}",
                  required, required - needed));
}

absl::StatusOr<std::vector<std::string>> KubeletEmulator::Impl::HealthyLocked(
    const std::string& resource) const {
  auto it = resources.find(resource);
  if (it == resources.end()) {
    // Not a device-plugin resource: the kubelet's predicate admission sees capacity 0.
    return absl::FailedPreconditionError(
        fmt::format("Insufficient {}: no device plugin registered it (node capacity 0)", resource));
  }
  std::vector<std::string> healthy;
  for (const auto& [id, dev] : it->second.devices) {
    if (dev.healthy) healthy.push_back(id);
  }
  if (healthy.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("no healthy devices present; cannot allocate unhealthy devices {}", resource));
  }
  return healthy;
}

std::vector<std::string> KubeletEmulator::Impl::AvailableLocked(
    const std::string& resource, const std::vector<std::string>& healthy) const {
  std::set<std::string> in_use;
  for (const PodRecord& pod : pods) {
    for (const ContainerRecord& c : pod.containers) {
      if (auto ids = c.ids.find(resource); ids != c.ids.end()) {
        in_use.insert(ids->second.begin(), ids->second.end());
      }
    }
  }
  if (auto taken = admitting.find(resource); taken != admitting.end()) {
    in_use.insert(taken->second.begin(), taken->second.end());
  }
  std::vector<std::string> available;
  for (const std::string& id : healthy) {
    if (!in_use.contains(id)) available.push_back(id);
  }
  return available;
}

absl::StatusOr<std::vector<std::string>> KubeletEmulator::Impl::PreferredLocked(
    std::unique_lock<std::mutex>& lock, const std::string& resource,
    const std::vector<std::string>& available, const std::vector<std::string>& allocated,
    int required) {
  const Endpoint& ep = resources.at(resource);
  if (!options.use_preferred_allocation || !ep.options.get_preferred_allocation_available()) {
    return std::vector<std::string>();
  }
  std::shared_ptr<PluginClient> client = ep.client;
  if (!client) {
    return Unexpected(
        fmt::format("endpoint not found in cache for a registered resource: {}", resource));
  }
  v1beta1::PreferredAllocationRequest request;
  v1beta1::ContainerPreferredAllocationRequest* r = request.add_container_requests();
  std::vector<std::string> offer = available;
  offer.insert(offer.end(), allocated.begin(), allocated.end());
  std::shuffle(offer.begin(), offer.end(), rng);
  std::vector<std::string> must = allocated;
  std::shuffle(must.begin(), must.end(), rng);
  for (const std::string& id : offer) r->add_available_deviceids(id);
  for (const std::string& id : must) r->add_must_include_deviceids(id);
  r->set_allocation_size(required);
  v1beta1::PreferredAllocationResponse response;
  grpc::ClientContext context;
  SetDeadline(context);
  lock.unlock();
  const grpc::Status s = client->stub().GetPreferredAllocation(&context, request, &response);
  lock.lock();
  if (!s.ok()) {
    return Unexpected(
        fmt::format("device plugin GetPreferredAllocation rpc failed with err: {}", RpcError(s)));
  }
  std::vector<std::string> preferred;
  if (response.container_responses_size() > 0) {
    for (const std::string& id : response.container_responses(0).deviceids()) {
      if (std::find(available.begin(), available.end(), id) != available.end() &&
          std::find(preferred.begin(), preferred.end(), id) == preferred.end()) {
        preferred.push_back(id);
      }
    }
  }
  return preferred;
}

namespace {

// The pod as the kubelet runs it when the scheduler backed extended resources with a claim
// (KEP-5004): the claim is one of the pod's claims, and the requests it maps are not the device
// manager's (its allocation skips resources served through DRA).
PodSpec WithExtendedResourceClaim(PodSpec spec) {
  if (!spec.extended_resource_claim) return spec;
  spec.claims.push_back(*spec.extended_resource_claim);
  for (ContainerSpec& c : spec.containers) {
    std::erase_if(c.requests,
                  [&](const auto& kv) { return spec.extended_resources.contains(kv.first); });
  }
  return spec;
}

}  // namespace

absl::StatusOr<AdmittedPod> KubeletEmulator::Impl::Admit(const PodSpec& requested) {
  if (absl::Status s = CheckPodSpec(requested); !s.ok()) return s;
  const PodSpec spec = WithExtendedResourceClaim(requested);
  std::lock_guard admit(admit_mu);
  std::unique_lock lock(mu);
  for (const PodRecord& p : pods) {
    if (p.namespace_name == spec.namespace_name && p.name == spec.name) {
      return absl::AlreadyExistsError(
          fmt::format("pod {}/{} already exists", spec.namespace_name, spec.name));
    }
  }
  PodRecord pod;
  pod.namespace_name = spec.namespace_name;
  pod.name = spec.name;
  pod.uid = NewUid(rng);
  pod.claims = spec.claims;
  admitting.clear();
  auto fail = [&](absl::Status s) {
    // A failed admission holds nothing (the kubelet restores allocatedDevices from podDevices
    // and garbage-collects the rejected pod's entries).
    admitting.clear();
    log->warn("pod {}/{} rejected: {}", spec.namespace_name, spec.name, std::string{s.message()});
    return s;
  };

  // Init containers first, then app containers (kubelet Allocate's contract).
  std::vector<const ContainerSpec*> order;
  for (const ContainerSpec& c : spec.containers) {
    if (c.init) order.push_back(&c);
  }
  for (const ContainerSpec& c : spec.containers) {
    if (!c.init) order.push_back(&c);
  }
  std::map<std::string, std::set<std::string>> reuse;  // devicesToReuse of this pod
  for (const ContainerSpec* c : order) {
    absl::StatusOr<ContainerRecord> rec = AllocateContainerLocked(lock, *c, reuse);
    if (!rec.ok()) return fail(rec.status());
    pod.containers.push_back(*std::move(rec));
  }
  if (!pod.claims.empty()) {
    if (absl::Status s = PrepareClaimsLocked(lock, pod); !s.ok()) return fail(s);
  }
  const AdmittedPod admitted = ToAdmitted(pod);
  if (absl::Status s = CheckDeviceNodes(admitted); !s.ok()) {
    if (!pod.claims.empty()) {
      lock.unlock();
      (void)dra->Unprepare(pod.uid, pod.claims);
      lock.lock();
    }
    return fail(s);
  }
  pods.push_back(std::move(pod));
  admitting.clear();
  if (absl::Status s = WriteCheckpointLocked(); !s.ok()) log->error("{}", std::string{s.message()});
  log->info("pod {}/{} admitted", spec.namespace_name, spec.name);
  return admitted;
}

absl::Status KubeletEmulator::Impl::PrepareClaimsLocked(std::unique_lock<std::mutex>& lock,
                                                        PodRecord& pod) {
  lock.unlock();
  absl::Status prepared = dra->Prepare(pod.uid, pod.claims);
  std::vector<std::string> ids;
  absl::StatusOr<CdiEdits> edits = CdiEdits();
  if (prepared.ok()) {
    for (const ClaimInfo& claim : dra->Claims(pod.claims)) {
      for (const PreparedDevice& d : claim.devices) {
        ids.insert(ids.end(), d.cdi_ids.begin(), d.cdi_ids.end());
      }
    }
    edits = ResolveCdiDevices(options.cdi_dir, ids, *log);
  }
  if (!prepared.ok() || !edits.ok()) {
    // The pod never starts; deleting it releases its claims (the kubelet's
    // UnprepareDynamicResources for a terminated pod).
    if (absl::Status s = dra->Unprepare(pod.uid, pod.claims); !s.ok()) {
      log->error("pod {}/{}: {}", pod.namespace_name, pod.name, std::string{s.message()});
    }
  }
  lock.lock();
  if (!prepared.ok()) {
    // The kubelet's event FailedPrepareDynamicResources.
    return absl::Status(prepared.code(), fmt::format("FailedPrepareDynamicResources: Failed to "
                                                     "prepare dynamic resources: {}",
                                                     std::string{prepared.message()}));
  }
  if (!edits.ok()) {
    return absl::FailedPreconditionError(
        fmt::format("CreateContainerError: failed to inject CDI devices: {}",
                    std::string{edits.status().message()}));
  }
  for (ContainerRecord& c : pod.containers) {
    if (c.init) continue;
    c.cdi_ids = ids;
    c.cdi = *edits;
  }
  return absl::OkStatus();
}

absl::Status KubeletEmulator::Impl::CheckPodSpec(const PodSpec& spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("pod name is empty");
  if (spec.extended_resource_claim.has_value() == spec.extended_resources.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "pod {}: an extended resource claim comes with the resources it serves", spec.name));
  }
  for (const std::string& r : spec.extended_resources) {
    if (std::none_of(spec.containers.begin(), spec.containers.end(),
                     [&](const ContainerSpec& c) { return c.requests.contains(r); })) {
      return absl::InvalidArgumentError(
          fmt::format("pod {}: no container requests {}, which its extended resource claim serves",
                      spec.name, r));
    }
  }
  std::vector<ClaimRef> all = spec.claims;
  if (spec.extended_resource_claim) all.push_back(*spec.extended_resource_claim);
  std::set<std::string> claim_uids;
  for (const ClaimRef& c : all) {
    const bool drivers =
        !c.drivers.empty() &&
        std::none_of(c.drivers.begin(), c.drivers.end(), [](const auto& d) { return d.empty(); });
    if (c.name.empty() || c.uid.empty() || !drivers || !claim_uids.insert(c.uid).second) {
      return absl::InvalidArgumentError(
          fmt::format("pod {}: every claim needs a name, a unique UID and a driver", spec.name));
    }
  }
  std::set<std::string> names;
  for (const ContainerSpec& c : spec.containers) {
    if (c.name.empty() || !names.insert(c.name).second) {
      return absl::InvalidArgumentError(
          fmt::format("pod {}: container names must be unique and non-empty", spec.name));
    }
    for (const auto& [resource, count] : c.requests) {
      if (count < 0) {
        return absl::InvalidArgumentError(
            fmt::format("container {}: negative request for {}", c.name, resource));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ContainerRecord> KubeletEmulator::Impl::AllocateContainerLocked(
    std::unique_lock<std::mutex>& lock, const ContainerSpec& c,
    std::map<std::string, std::set<std::string>>& reuse) {
  ContainerRecord rec;
  rec.name = c.name;
  rec.init = c.init;
  for (const auto& [resource, count] : c.requests) {
    if (count == 0) continue;
    const auto pin = c.pinned.find(resource);
    absl::StatusOr<std::vector<std::string>> ids = DevicesToAllocate(
        lock, resource, count, reuse[resource], pin == c.pinned.end() ? nullptr : &pin->second);
    if (!ids.ok()) return ids.status();
    auto ep = resources.find(resource);
    std::shared_ptr<PluginClient> client = ep == resources.end() ? nullptr : ep->second.client;
    if (!client) return Unexpected(fmt::format("unknown Device Plugin {}", resource));
    v1beta1::AllocateRequest request;
    v1beta1::ContainerAllocateRequest* r = request.add_container_requests();
    for (const std::string& id : *ids) r->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    SetDeadline(context);
    lock.unlock();
    const grpc::Status s = client->stub().Allocate(&context, request, &response);
    lock.lock();
    if (!s.ok()) return Unexpected(RpcError(s));
    if (response.container_responses_size() == 0) {
      return Unexpected("no containers return in allocation response");
    }
    rec.ids[resource] = *ids;
    rec.responses[resource] = response.container_responses(0);
  }
  for (const auto& [resource, ids] : rec.ids) {
    // addContainerAllocatedResources for init containers, remove... for app containers.
    for (const std::string& id : ids) {
      if (c.init) {
        reuse[resource].insert(id);
      } else {
        reuse[resource].erase(id);
      }
    }
  }
  return rec;
}

// The container runtime: every device node must exist under ROOT, as runc would require.
absl::Status KubeletEmulator::Impl::CheckDeviceNodes(const AdmittedPod& admitted) const {
  for (const ContainerAllocation& c : admitted.containers) {
    for (const DeviceSpecOut& d : c.devices) {
      const std::filesystem::path host =
          std::filesystem::path(options.root) / std::filesystem::path(d.host_path).relative_path();
      struct stat st;
      if (stat(host.c_str(), &st) != 0) {
        return absl::FailedPreconditionError(fmt::format(
            "CreateContainerError: container {}: error gathering device information while adding "
            "custom device \"{}\": no such file or directory ({} does not exist)",
            c.container, d.host_path, host.string()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status KubeletEmulator::Impl::SetProcessGroup(std::string_view namespace_name,
                                                    std::string_view name, int pgid) {
  if (pgid <= 0) return absl::InvalidArgumentError(fmt::format("bad process group {}", pgid));
  std::lock_guard lock(mu);
  for (PodRecord& pod : pods) {
    if (pod.namespace_name == namespace_name && pod.name == name) {
      pod.pgid = pgid;
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(fmt::format("pod {}/{} not found", namespace_name, name));
}

// The pod stays listed, its devices held, while its processes stop (mu is not held meanwhile):
// the kubelet frees devices of terminated pods only. A second Delete while the first waits stops
// the same group and succeeds too; the pod is erased by UID, so a pod admitted again under the
// same name is not taken for it.
absl::Status KubeletEmulator::Impl::Delete(std::string_view namespace_name, std::string_view name,
                                           std::chrono::milliseconds grace_period) {
  std::string uid;
  int pgid = 0;
  std::vector<ClaimRef> claims;
  {
    std::lock_guard lock(mu);
    auto it = std::find_if(pods.begin(), pods.end(), [&](const PodRecord& p) {
      return p.namespace_name == namespace_name && p.name == name;
    });
    if (it == pods.end()) {
      return absl::NotFoundError(fmt::format("pod {}/{} not found", namespace_name, name));
    }
    uid = it->uid;
    pgid = it->pgid;
    claims = it->claims;
  }
  if (pgid > 0) {
    if (absl::Status s = StopProcessGroup(pgid, grace_period, *log); !s.ok()) return s;
  }
  if (!claims.empty()) {
    // After the containers stopped (the kubelet's syncTerminatedPod). On an error the pod stays,
    // its processes gone, and a later delete tries again, as the kubelet retries.
    if (absl::Status s = dra->Unprepare(uid, claims); !s.ok()) {
      std::lock_guard lock(mu);
      for (PodRecord& p : pods) {
        if (p.uid == uid) p.pgid = 0;
      }
      return absl::Status(
          s.code(), fmt::format("pod {}/{}: {}", namespace_name, name, std::string{s.message()}));
    }
  }
  std::lock_guard lock(mu);
  std::erase_if(pods, [&](const PodRecord& p) { return p.uid == uid; });
  if (absl::Status s = WriteCheckpointLocked(); !s.ok()) log->error("{}", std::string{s.message()});
  return absl::OkStatus();
}

namespace {

bool NaturalLess(const std::string& a, const std::string& b) {
  const bool na = !a.empty() && std::all_of(a.begin(), a.end(), ::isdigit);
  const bool nb = !b.empty() && std::all_of(b.begin(), b.end(), ::isdigit);
  if (na && nb && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

// N of a Neuron device node "/dev/neuronN" (as core/driver/sysfs_names.h RootPaths::DevNeuron names
// it below "/"); nullopt for any other device, such as EFA's /dev/infiniband/uverbsN.
std::optional<int> NeuronNodeIndex(std::string_view path) {
  constexpr std::string_view kPrefix = "/dev/neuron";
  if (!path.starts_with(kPrefix)) return std::nullopt;
  const absl::StatusOr<int> index = ParseIndexId(path.substr(kPrefix.size()), 1 << 20);
  return index.ok() ? std::optional<int>(*index) : std::nullopt;
}

// "C=H,..." (ascending C) for the container's Neuron device specs: the plugin may renumber the
// container's devices (docs/architecture.md#device-numbering) and the simulated driver, which keys
// everything by host device, needs to know which host device the container's /dev/neuronC is. ""
// without any.
std::string DeviceMap(const std::vector<DeviceSpecOut>& devices) {
  std::map<int, int> host_of;
  for (const DeviceSpecOut& d : devices) {
    const std::optional<int> container = NeuronNodeIndex(d.container_path);
    const std::optional<int> host = NeuronNodeIndex(d.host_path);
    if (container && host) host_of.emplace(*container, *host);
  }
  std::string out;
  for (const auto& [container, host] : host_of) {
    out += fmt::format("{}{}={}", out.empty() ? "" : ",", container, host);
  }
  return out;
}

}  // namespace

AdmittedPod KubeletEmulator::Impl::ToAdmitted(const PodRecord& pod) const {
  AdmittedPod out;
  out.namespace_name = pod.namespace_name;
  out.name = pod.name;
  out.uid = pod.uid;
  for (const ContainerRecord& rec : pod.containers) {
    ContainerAllocation c;
    c.container = rec.name;
    for (const auto& [resource, ids] : rec.ids) {
      std::vector<std::string> sorted = ids;
      std::sort(sorted.begin(), sorted.end(), NaturalLess);
      c.ids[resource] = std::move(sorted);
    }
    // deviceRunContainerOptions (DM pod_devices.go): the first answer to set an env, a device's
    // container path or an annotation wins; a conflicting later one is logged and dropped. The
    // kubelet walks resources in Go map order (random); we walk them by name.
    for (const auto& [resource, resp] : rec.responses) {
      for (const auto& [k, v] : resp.envs()) {
        auto [pos, inserted] = c.envs.emplace(k, v);
        if (!inserted && pos->second != v) {
          log->error("Environment variable has conflicting setting: {} expected {} got {}", k, v,
                     pos->second);
        }
      }
      for (const v1beta1::DeviceSpec& d : resp.devices()) {
        auto same = [&](const DeviceSpecOut& o) { return o.container_path == d.container_path(); };
        if (std::any_of(c.devices.begin(), c.devices.end(), same)) continue;
        c.devices.push_back({d.container_path(), d.host_path(), d.permissions()});
      }
      for (const auto& [k, v] : resp.annotations()) c.annotations.emplace(k, v);
      for (const v1beta1::CDIDevice& cdi : resp.cdi_devices()) {
        if (std::find(c.cdi_devices.begin(), c.cdi_devices.end(), cdi.name()) ==
            c.cdi_devices.end()) {
          c.cdi_devices.push_back(cdi.name());
        }
      }
    }
    // The runtime's CDI injection comes after the kubelet's container config: its env wins.
    for (const std::string& id : rec.cdi_ids) {
      if (std::find(c.cdi_devices.begin(), c.cdi_devices.end(), id) == c.cdi_devices.end()) {
        c.cdi_devices.push_back(id);
      }
    }
    for (const auto& [k, v] : rec.cdi.env) c.envs[k] = v;
    for (const DeviceSpecOut& d : rec.cdi.devices) {
      auto same = [&](const DeviceSpecOut& o) { return o.container_path == d.container_path; };
      if (std::none_of(c.devices.begin(), c.devices.end(), same)) c.devices.push_back(d);
    }
    // UpdateAllocatedResourcesStatus: app containers only (the kubelet walks ContainerStatuses).
    if (!rec.init && !pod.claims.empty()) {
      c.allocated_resources_status = dra->AllocatedResourcesStatus(pod.claims);
    }
    // docs/architecture.md#allocation: the runtime points the pod at ROOT
    c.envs["NEURON_ROOT"] = options.root;
    if (std::string map = DeviceMap(c.devices); !map.empty()) {
      c.envs[std::string(kDeviceMapEnv)] = std::move(map);
    }
    out.containers.push_back(std::move(c));
  }
  return out;
}

}  // namespace neuron::sim

#include "plugin/allocation.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/driver/sysfs_names.h"
#include "core/model/core_ids.h"
#include "core/model/visible_cores.h"
#include "fmt/format.h"
#include "fmt/ranges.h"

namespace neuron::plugin {
namespace {

constexpr std::string_view kVisibleCores = "NEURON_RT_VISIBLE_CORES";

// Index ids of a device-indexed resource that the view knows; others are skipped.
std::vector<int> KnownIndices(const ResourceView& rv, const std::vector<std::string>& ids) {
  std::vector<int> out;
  for (const std::string& id : ids) {
    if (rv.Find(id) == nullptr) continue;
    absl::StatusOr<int> v = ParseIndexId(id, 1 << 20);
    if (v.ok()) out.push_back(*v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> ToIds(const std::vector<int>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (int i : v) out.push_back(IndexId(i));
  return out;
}

std::string Quoted(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) {
    if (!out.empty()) out += ", ";
    out += fmt::format("\"{}\"", id);
  }
  return out;
}

// Problems with one container request, or "" when it is fine.
std::string Check(const NodeView& view, Resource resource, const ResourceView& rv,
                  const std::vector<std::string>& ids, std::set<std::string>* seen_in_call,
                  NonContiguousPolicy policy, bool* noncontiguous) {
  if (ids.empty()) return "no device IDs";
  std::vector<std::string> unknown, unhealthy, duplicate, held;
  for (const std::string& id : ids) {
    const ResourceDevice* d = rv.Find(id);
    if (!seen_in_call->insert(id).second) {
      duplicate.push_back(id);
    } else if (d == nullptr) {
      unknown.push_back(id);
    } else if (!d->hw_healthy) {
      unhealthy.push_back(id);
    } else if (d->masked) {
      held.push_back(id);
    } else if (resource == Resource::kEfa) {
      const auto it = view.efas.find(id);
      if (it == view.efas.end() || !it->second.uverbs) unhealthy.push_back(id);
    }
  }
  std::vector<std::string> parts;
  if (ids.size() > rv.devices.size()) {
    parts.push_back(fmt::format("asks for {} IDs, the node has {}", ids.size(), rv.devices.size()));
  }
  if (!unknown.empty()) parts.push_back("unknown IDs " + Quoted(unknown));
  if (!duplicate.empty()) parts.push_back("duplicate IDs " + Quoted(duplicate));
  if (!unhealthy.empty()) parts.push_back("unhealthy IDs " + Quoted(unhealthy));
  if (!held.empty()) {
    parts.push_back("IDs " + Quoted(held) + " overlap devices held by another Neuron resource");
  }
  if (parts.empty() && resource != Resource::kEfa) {
    std::vector<int> indices = KnownIndices(rv, ids);
    if (!Allocator::IsContiguous(indices)) {
      if (policy == NonContiguousPolicy::kReject) {
        parts.push_back(
            fmt::format("IDs {} are not contiguous (noncontiguous policy: reject)", Quoted(ids)));
      } else {
        *noncontiguous = true;
      }
    }
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

void AddDevice(v1beta1::ContainerAllocateResponse* out, const std::string& container_path,
               const std::string& host_path) {
  v1beta1::DeviceSpec* spec = out->add_devices();
  spec->set_container_path(container_path);
  spec->set_host_path(host_path);
  spec->set_permissions("rw");
}

// "/dev/neuronN" as the host names it (core spells the name once).
std::string NeuronDevicePath(int index) { return RootPaths("/").DevNeuron(index).string(); }

// One neuron/neuroncore container request in host numbering: the devices (ascending) and the
// cores they give the container (ascending), all cores of each device for whole devices.
struct HostAllocation {
  std::vector<int> devices;
  std::vector<int> cores;
};

HostAllocation ToHost(const ResourceView& rv, Resource resource, const ContainerPlan& plan,
                      int cpd) {
  HostAllocation host;
  const std::vector<int> indices = KnownIndices(rv, plan.ids);
  if (resource == Resource::kNeuronCore) {
    host.cores = indices;
    for (int c : host.cores) host.devices.push_back(DeviceOfCore(c, cpd));
    host.devices.erase(std::unique(host.devices.begin(), host.devices.end()), host.devices.end());
  } else {
    host.devices = indices;
    for (int d : host.devices) {
      for (int k = 0; k < cpd; ++k) host.cores.push_back(GlobalCoreId(d, k, cpd));
    }
  }
  return host;
}

// Container numbering (docs/architecture.md#device-numbering): the runtime in the container numbers
// the cores of the devices it sees in device order, so host core c becomes k * cpd + c % cpd where
// its device c / cpd is the container's device k. Keeping the offset within the device matters for
// a partial-device core allocation: host core 11 alone (device 5, 2 cores per device) is core 1
// of the container's /dev/neuron0, not core 0.
int ContainerCore(const std::vector<int>& devices, int core, int cpd) {
  const auto k =
      std::lower_bound(devices.begin(), devices.end(), DeviceOfCore(core, cpd)) - devices.begin();
  return GlobalCoreId(static_cast<int>(k), LocalCoreOf(core, cpd), cpd);
}

void AddNeuronDevices(const NodeView& view, Resource resource, const ContainerPlan& plan, bool cdi,
                      DeviceNumbering numbering, v1beta1::ContainerAllocateResponse* out) {
  const int cpd = std::max(1, view.cores_per_device);
  const HostAllocation host = ToHost(view.Get(resource), resource, plan, cpd);
  const bool renumber = numbering == DeviceNumbering::kContainer;
  for (size_t k = 0; k < host.devices.size(); ++k) {
    const int d = host.devices[k];
    AddDevice(out, NeuronDevicePath(renumber ? static_cast<int>(k) : d), NeuronDevicePath(d));
    if (cdi) out->add_cdi_devices()->set_name(CdiName(resource, IndexId(d)));
  }
  std::vector<int> visible = host.cores;
  if (renumber) {
    for (int& c : visible) c = ContainerCore(host.devices, c, cpd);
  }
  (*out->mutable_envs())[std::string(kVisibleCores)] = FormatCoreList(visible);
}

}  // namespace

std::string CdiName(Resource resource, const std::string& id) {
  if (resource == Resource::kEfa) return fmt::format("{}={}", kResourceEfa, id);
  return fmt::format("{}={}", kResourceNeuron, id);
}

absl::StatusOr<std::vector<ContainerPlan>> ValidateAllocate(const NodeView& view, Resource resource,
                                                            const v1beta1::AllocateRequest& request,
                                                            NonContiguousPolicy policy) {
  const ResourceView& rv = view.Get(resource);
  std::vector<ContainerPlan> plans;
  std::vector<std::string> errors;
  std::set<std::string> seen_in_call;
  if (request.container_requests_size() == 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: Allocate without container requests", ResourceName(resource)));
  }
  for (int i = 0; i < request.container_requests_size(); ++i) {
    const auto& ids = request.container_requests(i).devices_ids();
    ContainerPlan plan;
    plan.ids.assign(ids.begin(), ids.end());
    const std::string problem =
        Check(view, resource, rv, plan.ids, &seen_in_call, policy, &plan.noncontiguous);
    if (!problem.empty()) errors.push_back(fmt::format("container request {}: {}", i, problem));
    plans.push_back(std::move(plan));
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", ResourceName(resource), fmt::join(errors, "; ")));
  }
  return plans;
}

v1beta1::AllocateResponse BuildAllocateResponse(const NodeView& view, Resource resource,
                                                const std::vector<ContainerPlan>& plans, bool cdi,
                                                DeviceNumbering numbering) {
  v1beta1::AllocateResponse response;
  for (const ContainerPlan& plan : plans) {
    v1beta1::ContainerAllocateResponse* out = response.add_container_responses();
    if (resource != Resource::kEfa) {
      AddNeuronDevices(view, resource, plan, cdi, numbering, out);
      continue;
    }
    std::vector<std::string> names = plan.ids;
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const auto it = view.efas.find(name);
      if (it == view.efas.end() || !it->second.uverbs) continue;  // validated before
      const std::string path = fmt::format("/dev/infiniband/uverbs{}", *it->second.uverbs);
      AddDevice(out, path, path);
      if (cdi) out->add_cdi_devices()->set_name(CdiName(resource, name));
    }
  }
  return response;
}

std::vector<std::string> PreferEfa(const NodeView& view, const std::vector<std::string>& available,
                                   const std::vector<std::string>& must_include, int size) {
  const ResourceView& rv = view.Get(Resource::kEfa);
  std::set<std::string> must;
  for (const std::string& id : must_include) {
    if (rv.Find(id) != nullptr) must.insert(id);
  }
  // Candidates grouped by NUMA node (-1: unknown), names ascending within a group.
  std::map<int, std::vector<std::string>> by_numa;
  std::set<std::string> seen = must;
  for (const std::string& id : available) {
    const ResourceDevice* d = rv.Find(id);
    if (d == nullptr || !seen.insert(id).second) continue;
    by_numa[d->numa.value_or(-1)].push_back(id);
  }
  for (auto& [numa, names] : by_numa) std::sort(names.begin(), names.end());
  std::vector<std::string> answer(must.begin(), must.end());
  int need = size - static_cast<int>(answer.size());
  std::set<int> must_numa;
  for (const std::string& id : must) must_numa.insert(rv.Find(id)->numa.value_or(-1));
  std::vector<int> order;
  order.reserve(by_numa.size());
  for (const auto& [numa, names] : by_numa) order.push_back(numa);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const bool ma = must_numa.count(a) > 0, mb = must_numa.count(b) > 0;
    if (ma != mb) return ma;
    const int sa = static_cast<int>(by_numa[a].size()), sb = static_cast<int>(by_numa[b].size());
    const bool fa = sa >= need, fb = sb >= need;
    if (fa != fb) return fa;
    return fa ? sa < sb : sa > sb;  // best fit among groups that fit, else the largest first
  });
  for (int numa : order) {
    for (const std::string& id : by_numa[numa]) {
      if (need <= 0) break;
      answer.push_back(id);
      --need;
    }
  }
  std::sort(answer.begin(), answer.end());
  return answer;
}

v1beta1::PreferredAllocationResponse PreferredAllocation(
    const NodeView& view, Resource resource, const v1beta1::PreferredAllocationRequest& request) {
  v1beta1::PreferredAllocationResponse response;
  const ResourceView& rv = view.Get(resource);
  for (const auto& req : request.container_requests()) {
    std::vector<std::string> available(req.available_deviceids().begin(),
                                       req.available_deviceids().end());
    std::vector<std::string> must(req.must_include_deviceids().begin(),
                                  req.must_include_deviceids().end());
    const int size = std::max(0, req.allocation_size());
    std::vector<std::string> answer;
    if (resource == Resource::kEfa) {
      answer = PreferEfa(view, available, must, size);
    } else {
      const std::vector<int> avail = KnownIndices(rv, available);
      const std::vector<int> must_idx = KnownIndices(rv, must);
      answer = ToIds(resource == Resource::kNeuronCore
                         ? view.allocator->PreferCores(avail, must_idx, size)
                         : view.allocator->PreferDevices(avail, must_idx, size));
    }
    auto* out = response.add_container_responses();
    for (std::string& id : answer) out->add_deviceids(std::move(id));
  }
  return response;
}

}  // namespace neuron::plugin

#include "plugin/node_state.h"

#include <algorithm>

#include "core/model/core_ids.h"

namespace neuron::plugin {
namespace {

std::optional<int> ParseIndex(std::string_view id) {
  absl::StatusOr<int> v = ParseIndexId(id, 1 << 20);
  if (!v.ok()) return std::nullopt;
  return *v;
}

bool SameContent(const NodeView& a, const NodeView& b) {
  if (a.cores_per_device != b.cores_per_device || a.efas != b.efas || a.devices != b.devices ||
      a.allocator != b.allocator || a.node != b.node) {
    return false;
  }
  for (const auto& [r, view] : a.resources) {
    const auto it = b.resources.find(r);
    if (it == b.resources.end() || it->second.devices != view.devices) return false;
  }
  return a.resources.size() == b.resources.size();
}

void Index(ResourceView* view) {
  view->index.clear();
  view->index.reserve(view->devices.size());
  for (size_t i = 0; i < view->devices.size(); ++i) view->index[view->devices[i].id] = i;
}

// One resource's ListAndWatch list: every known device, core or EFA interface with its hardware
// health, masked while an overlapping resource holds it (the device, or any core of it) so it is
// not handed out twice (docs/kubelet-api.md#overlapping-resources).
ResourceView ListOf(Resource r, const Hardware& hardware, const NodeView& view) {
  ResourceView rv;
  rv.resource = r;
  const int cpd = std::max(1, hardware.cores_per_device);
  if (r == Resource::kEfa) {
    for (const HardwareEfa& e : hardware.efas) {
      rv.devices.push_back(ResourceDevice{e.name, e.healthy, e.healthy, false, e.numa, -1});
    }
  } else if (r == Resource::kNeuronCore) {
    for (const HardwareDevice& d : hardware.devices) {
      if (hardware.cores_per_device <= 0) break;
      const bool masked = view.device_holder.contains(d.index);
      for (int k = 0; k < cpd; ++k) {
        rv.devices.push_back(ResourceDevice{IndexId(GlobalCoreId(d.index, k, cpd)),
                                            d.healthy && !masked, d.healthy, masked, d.numa,
                                            d.index});
      }
    }
  } else {
    std::set<int> devices_with_cores;
    for (const auto& [core, holder] : view.core_holder) {
      devices_with_cores.insert(DeviceOfCore(core, cpd));
    }
    for (const HardwareDevice& d : hardware.devices) {
      const auto holder = view.device_holder.find(d.index);
      const bool masked = (holder != view.device_holder.end() && holder->second != r) ||
                          devices_with_cores.count(d.index) > 0;
      rv.devices.push_back(ResourceDevice{IndexId(d.index), d.healthy && !masked, d.healthy, masked,
                                          d.numa, d.index});
    }
  }
  Index(&rv);
  return rv;
}

}  // namespace

const ResourceDevice* ResourceView::Find(std::string_view id) const {
  const auto it = index.find(std::string(id));
  return it == index.end() ? nullptr : &devices[it->second];
}

std::set<int> HeldDevices(const NodeView& view) {
  std::set<int> out;
  for (const auto& [index, holder] : view.device_holder) out.insert(index);
  if (view.cores_per_device > 0) {
    for (const auto& [core, holder] : view.core_holder) out.insert(core / view.cores_per_device);
  }
  return out;
}

NodeState::NodeState(std::chrono::milliseconds allocation_grace) : grace_(allocation_grace) {
  std::lock_guard<std::mutex> lock(mu_);
  allocator_ = std::make_shared<const Allocator>(Topology(), 1);
  view_ = RebuildLocked();
}

std::shared_ptr<const NodeView> NodeState::view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

void NodeState::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

void NodeState::Notify(const std::shared_ptr<const NodeView>& view) {
  if (view == nullptr) return;
  std::vector<Listener> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listeners = listeners_;
  }
  for (const Listener& l : listeners) l(view);
}

std::optional<std::chrono::system_clock::time_point> NodeState::evidence_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evidence_time_;
}

void NodeState::SetHardware(Hardware hardware) {
  std::shared_ptr<const NodeView> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    evidence_time_ = std::chrono::system_clock::now();
    if (hardware == hardware_) return;
    if (hardware.links != hardware_.links ||
        hardware.cores_per_device != hardware_.cores_per_device) {
      allocator_ = std::make_shared<const Allocator>(Topology(hardware.links),
                                                     std::max(1, hardware.cores_per_device));
    }
    hardware_ = std::move(hardware);
    changed = RebuildLocked();
  }
  Notify(changed);
}

void NodeState::SetPodAssignments(const PodAssignments& assignments,
                                  std::chrono::steady_clock::time_point when) {
  std::shared_ptr<const NodeView> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<Resource, std::set<std::string>> ids;
    for (const PodDeviceAssignment& a : assignments.all()) {
      absl::StatusOr<Resource> r = ParseResourceName(a.resource);
      if (!r.ok()) continue;  // another vendor's resource
      ids[*r].insert(a.ids.begin(), a.ids.end());
    }
    // A pending holding ends when PodResources shows it (from then on PodResources speaks for
    // it, and its IDs vanishing is the release) or when PodResources still does not show it a
    // grace period after Allocate: the kubelet records an allocation only after Allocate
    // returns, and a pod that failed admission later never shows up.
    for (auto& [r, holdings] : pending_) {
      const std::set<std::string>& shown = ids[r];
      std::erase_if(holdings, [&](const Holding& h) {
        const bool all_shown = std::all_of(h.ids.begin(), h.ids.end(),
                                           [&](const std::string& id) { return shown.count(id); });
        return all_shown || when > h.when + grace_;
      });
    }
    pod_ids_ = std::move(ids);
    changed = RebuildLocked();
  }
  Notify(changed);
}

absl::StatusOr<std::shared_ptr<const NodeView>> NodeState::Commit(Resource resource,
                                                                  const Validator& validate) {
  std::shared_ptr<const NodeView> validated;
  std::shared_ptr<const NodeView> changed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    validated = view_;
    absl::StatusOr<std::vector<std::string>> ids = validate(*view_);
    if (!ids.ok()) return ids.status();
    if (resource != Resource::kEfa && !ids->empty()) {
      // The same set allocated again (an app container reusing its init container's devices)
      // refreshes the holding instead of adding one, so holdings stay bounded without
      // PodResources.
      std::sort(ids->begin(), ids->end());
      std::vector<Holding>& holdings = pending_[resource];
      std::erase_if(holdings, [&](const Holding& h) { return h.ids == *ids; });
      holdings.push_back(Holding{*std::move(ids), std::chrono::steady_clock::now()});
      changed = RebuildLocked();
    }
  }
  Notify(changed);
  return validated;
}

size_t NodeState::pending_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [r, holdings] : pending_) n += holdings.size();
  return n;
}

std::shared_ptr<const NodeView> NodeState::RebuildLocked() {
  auto view = std::make_shared<NodeView>();
  view->allocator = allocator_;
  view->cores_per_device = hardware_.cores_per_device;
  view->node = hardware_.node;
  for (const HardwareEfa& e : hardware_.efas) view->efas[e.name] = e;
  for (const HardwareDevice& d : hardware_.devices) view->devices[d.index] = d;

  // Holdings per resource: what PodResources shows plus Allocates it has not shown yet.
  auto note = [&](Resource r, const std::string& id) {
    const std::optional<int> index = ParseIndex(id);
    if (!index) return;
    if (r == Resource::kNeuronCore) {
      view->core_holder.emplace(*index, r);
    } else if (r == Resource::kNeuron || r == Resource::kNeuronDevice) {
      view->device_holder.emplace(*index, r);
    }
  };
  for (const auto& [r, ids] : pod_ids_) {
    for (const std::string& id : ids) note(r, id);
  }
  for (const auto& [r, holdings] : pending_) {
    for (const Holding& h : holdings) {
      for (const std::string& id : h.ids) note(r, id);
    }
  }
  for (Resource r : kAllResources) view->resources[r] = ListOf(r, hardware_, *view);
  if (view_ != nullptr && SameContent(*view, *view_)) return nullptr;
  view->generation = ++generation_;
  view_ = view;
  return view;
}

}  // namespace neuron::plugin

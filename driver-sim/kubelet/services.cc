// The PodResources v1 service (docs/kubelet-api.md#pod-resources) and the emulator's control
// service (control.proto) for `neuron-sim pod` and `neuron-sim kubelet restart|status`.
#include <fmt/format.h>

#include "driver-sim/kubelet/control.grpc.pb.h"
#include "driver-sim/kubelet/emulator_impl.h"
#include "podresources/v1/api.grpc.pb.h"

namespace neuron::sim {

namespace {

// containerDevicesFromResourceDeviceInstances (kubelet cm): one ContainerDevices per device
// and NUMA node; a device without topology gets one entry without topology.
void AddDevices(const std::string& resource, const std::vector<std::string>& ids,
                const std::map<std::string, Endpoint>& resources,
                google::protobuf::RepeatedPtrField<v1::ContainerDevices>* out) {
  for (const std::string& id : ids) {
    const std::vector<int64_t> numa = NumaNodesOf(resources, resource, id);
    if (numa.empty()) {
      v1::ContainerDevices* cd = out->Add();
      cd->set_resource_name(resource);
      cd->add_device_ids(id);
      continue;
    }
    for (int64_t node : numa) {
      v1::ContainerDevices* cd = out->Add();
      cd->set_resource_name(resource);
      cd->add_device_ids(id);
      cd->mutable_topology()->add_nodes()->set_id(node);
    }
  }
}

class PodResourcesService final : public v1::PodResourcesLister::Service {
 public:
  explicit PodResourcesService(KubeletEmulator::Impl* impl) : impl_(impl) {}

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard lock(impl_->mu);
    ++impl_->pod_resources_lists;
    for (const PodRecord& pod : impl_->pods) Fill(pod, out->add_pod_resources());
    return grpc::Status::OK;
  }

  grpc::Status GetAllocatableResources(grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse* out) override {
    std::lock_guard lock(impl_->mu);
    impl_->ExpireLocked();
    for (const auto& [resource, ep] : impl_->resources) {
      std::vector<std::string> healthy;
      for (const auto& [id, dev] : ep.devices) {
        if (dev.healthy) healthy.push_back(id);
      }
      AddDevices(resource, healthy, impl_->resources, out->mutable_devices());
    }
    return grpc::Status::OK;
  }

  grpc::Status Get(grpc::ServerContext*, const v1::GetPodResourcesRequest* request,
                   v1::GetPodResourcesResponse* out) override {
    std::lock_guard lock(impl_->mu);
    for (const PodRecord& pod : impl_->pods) {
      if (pod.name == request->pod_name() && pod.namespace_name == request->pod_namespace()) {
        Fill(pod, out->mutable_pod_resources());
        return grpc::Status::OK;
      }
    }
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        fmt::format("pod {} not found in {}", request->pod_name(), request->pod_namespace()));
  }

 private:
  // Only app containers are listed (the kubelet walks pod.Spec.Containers).
  void Fill(const PodRecord& pod, v1::PodResources* out) {
    out->set_name(pod.name);
    out->set_namespace_(pod.namespace_name);
    const std::vector<ClaimInfo> claims = impl_->dra->Claims(pod.claims);
    for (const ContainerRecord& c : pod.containers) {
      if (c.init) continue;
      v1::ContainerResources* cr = out->add_containers();
      cr->set_name(c.name);
      for (const auto& [resource, ids] : c.ids) {
        AddDevices(resource, ids, impl_->resources, cr->mutable_devices());
      }
      AddClaims(claims, cr);
    }
  }

  // The kubelet's DRA manager GetContainerClaimInfos: one DynamicResource per claim the container
  // uses, one ClaimResource per device its driver prepared (from the claim cache, which a
  // restarted kubelet restores from its checkpoint).
  static void AddClaims(const std::vector<ClaimInfo>& claims, v1::ContainerResources* out) {
    for (const ClaimInfo& claim : claims) {
      v1::DynamicResource* dr = out->add_dynamic_resources();
      dr->set_claim_name(claim.ref.name);
      dr->set_claim_namespace(claim.ref.namespace_name);
      for (const PreparedDevice& d : claim.devices) {
        v1::ClaimResource* r = dr->add_claim_resources();
        for (const std::string& id : d.cdi_ids) r->add_cdi_devices()->set_name(id);
        r->set_driver_name(d.driver);
        r->set_pool_name(d.pool);
        r->set_device_name(d.device);
      }
    }
  }

  KubeletEmulator::Impl* impl_;
};

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string{s.message()});
}

void ToProto(const AdmittedPod& pod, neuronsim::kubelet::AdmittedPod* out) {
  out->set_namespace_(pod.namespace_name);
  out->set_name(pod.name);
  out->set_uid(pod.uid);
  for (const ContainerAllocation& c : pod.containers) {
    neuronsim::kubelet::ContainerAllocation* pc = out->add_containers();
    pc->set_name(c.container);
    for (const auto& [resource, ids] : c.ids) {
      auto& list = (*pc->mutable_ids())[resource];
      for (const std::string& id : ids) list.add_ids(id);
    }
    for (const auto& [k, v] : c.envs) (*pc->mutable_envs())[k] = v;
    for (const DeviceSpecOut& d : c.devices) {
      neuronsim::kubelet::DeviceSpec* pd = pc->add_devices();
      pd->set_container_path(d.container_path);
      pd->set_host_path(d.host_path);
      pd->set_permissions(d.permissions);
    }
    for (const std::string& cdi : c.cdi_devices) pc->add_cdi_devices(cdi);
    for (const auto& [k, v] : c.annotations) (*pc->mutable_annotations())[k] = v;
    for (const ResourceStatus& rs : c.allocated_resources_status) {
      neuronsim::kubelet::ResourceStatus* ps = pc->add_allocated_resources_status();
      ps->set_name(rs.name);
      for (const ResourceHealth& h : rs.resources) {
        neuronsim::kubelet::ResourceHealth* ph = ps->add_resources();
        ph->set_resource_id(h.resource_id);
        ph->set_health(h.health);
        ph->set_message(h.message);
      }
    }
  }
}

// A claim of the control API; its namespace defaults to the pod's, its drivers to neuron.aws.com.
ClaimRef FromProto(const neuronsim::kubelet::ClaimRef& c, const std::string& pod_namespace) {
  ClaimRef ref{c.namespace_().empty() ? pod_namespace : c.namespace_(), c.name(), c.uid()};
  if (!c.drivers().empty()) {
    ref.drivers.assign(c.drivers().begin(), c.drivers().end());
  } else if (!c.driver().empty()) {
    ref.drivers = {c.driver()};
  }
  return ref;
}

class ControlService final : public neuronsim::kubelet::KubeletControl::Service {
 public:
  explicit ControlService(KubeletEmulator* emulator) : emulator_(emulator) {}

  grpc::Status AdmitPod(grpc::ServerContext*, const neuronsim::kubelet::PodSpec* request,
                        neuronsim::kubelet::AdmittedPod* out) override {
    PodSpec spec;
    spec.namespace_name = request->namespace_().empty() ? "default" : request->namespace_();
    spec.name = request->name();
    for (const neuronsim::kubelet::ContainerSpec& c : request->containers()) {
      ContainerSpec cs;
      cs.name = c.name();
      cs.init = c.init();
      for (const auto& [resource, count] : c.requests()) cs.requests[resource] = count;
      spec.containers.push_back(std::move(cs));
    }
    for (const neuronsim::kubelet::ClaimRef& c : request->claims()) {
      spec.claims.push_back(FromProto(c, spec.namespace_name));
    }
    if (request->has_extended_resource_claim()) {
      spec.extended_resource_claim =
          FromProto(request->extended_resource_claim(), spec.namespace_name);
      spec.extended_resources = {request->extended_resources().begin(),
                                 request->extended_resources().end()};
    }
    absl::StatusOr<neuron::sim::AdmittedPod> pod = emulator_->AdmitPod(spec);
    if (!pod.ok()) return ToGrpc(pod.status());
    ToProto(*pod, out);
    return grpc::Status::OK;
  }

  grpc::Status DeletePod(grpc::ServerContext*, const neuronsim::kubelet::PodRef* request,
                         neuronsim::kubelet::Empty*) override {
    const std::string ns = request->namespace_().empty() ? "default" : request->namespace_();
    std::chrono::milliseconds grace = kDefaultTerminationGracePeriod;
    if (request->has_grace_period_seconds()) {
      if (request->grace_period_seconds() < 0) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "grace period must be >= 0");
      }
      grace = std::chrono::seconds(request->grace_period_seconds());
    }
    return ToGrpc(emulator_->DeletePod(ns, request->name(), grace));
  }

  grpc::Status SetPodProcess(grpc::ServerContext*, const neuronsim::kubelet::PodProcess* request,
                             neuronsim::kubelet::Empty*) override {
    const std::string ns = request->namespace_().empty() ? "default" : request->namespace_();
    return ToGrpc(emulator_->SetPodProcessGroup(ns, request->name(), request->pgid()));
  }

  grpc::Status ListPods(grpc::ServerContext*, const neuronsim::kubelet::Empty*,
                        neuronsim::kubelet::PodList* out) override {
    for (const neuron::sim::AdmittedPod& pod : emulator_->Pods()) ToProto(pod, out->add_pods());
    return grpc::Status::OK;
  }

  grpc::Status Status(grpc::ServerContext*, const neuronsim::kubelet::Empty*,
                      neuronsim::kubelet::StatusReply* out) override {
    for (const ResourceState& r : emulator_->Resources()) {
      neuronsim::kubelet::Resource* pr = out->add_resources();
      pr->set_name(r.name);
      pr->set_endpoint(r.endpoint);
      pr->set_connected(r.connected);
      pr->set_capacity(r.capacity);
      pr->set_allocatable(r.allocatable);
      pr->set_in_use(r.in_use);
      pr->set_updates(r.updates);
      pr->set_get_preferred_allocation(r.get_preferred_allocation);
    }
    out->set_registrations(emulator_->registrations());
    out->set_restarts(emulator_->restarts());
    out->set_pods(static_cast<int32_t>(emulator_->Pods().size()));
    return grpc::Status::OK;
  }

  grpc::Status Restart(grpc::ServerContext*, const neuronsim::kubelet::Empty*,
                       neuronsim::kubelet::Empty*) override {
    return ToGrpc(emulator_->Restart());
  }

 private:
  KubeletEmulator* emulator_;
};

}  // namespace

std::unique_ptr<grpc::Service> KubeletEmulator::Impl::MakePodResourcesService() {
  return std::make_unique<PodResourcesService>(this);
}

std::unique_ptr<grpc::Service> KubeletEmulator::Impl::MakeControlService(KubeletEmulator* owner) {
  return std::make_unique<ControlService>(owner);
}

}  // namespace neuron::sim

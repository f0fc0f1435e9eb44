#include "driver-sim/runtime/process_datastore.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace neuron::nrt {
namespace {

nds_version_info_t Version(NdsVersion v) { return {v.major, v.minor, v.build}; }

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessDatastore>> ProcessDatastore::Acquire(int device_fd,
                                                                            int device, pid_t pid) {
  absl::StatusOr<std::unique_ptr<sim::DatastoreWriter>> w =
      sim::DatastoreWriter::Acquire(device_fd, device, pid);
  if (!w.ok()) return w.status();
  return std::unique_ptr<ProcessDatastore>(new ProcessDatastore(*std::move(w)));
}

void ProcessDatastore::SetProcessInfo(std::string_view tag, NdsVersion runtime,
                                      int8_t framework_type, NdsVersion framework, NdsVersion fal) {
  nds_process_info_t info{};
  info.framework_type = framework_type;
  std::memcpy(info.tag, tag.data(), std::min(tag.size(), sizeof(info.tag) - 1));
  info.framework_version = Version(framework);
  info.fal_version = Version(fal);
  info.runtime_version = Version(runtime);
  records_.SetProcessInfo(info);
  counters_->SetRuntimeVersion(runtime.major, runtime.minor, runtime.build);
}

void ProcessDatastore::SetProcessTag(std::string_view tag) { records_.SetProcessInfoExt(tag); }

absl::Status ProcessDatastore::AddModel(const NdsModel& m) {
  records::ModelNode node{};
  node.info.model_id = m.model_id;
  node.info.model_node_id = m.model_node_id;
  std::memcpy(node.info.name, m.name.data(), std::min(m.name.size(), sizeof(node.info.name) - 1));
  std::memcpy(node.info.uuid, m.uuid.data(), sizeof(node.info.uuid));
  node.info.nc_index = m.nc_index;
  node.info.sg_index = m.sg_index;
  for (size_t loc = 0; loc < m.memory.size(); ++loc) {
    for (size_t slot = 0; slot < kNdsMemSlots; ++slot) {
      node.memory.model_mem_usage[loc][slot] = {m.memory[loc][slot].total_size,
                                                m.memory[loc][slot].chunk_count};
    }
  }
  if (!records_.AddModel(node)) {
    return absl::ResourceExhaustedError(fmt::format("nd{} pid {}: all {} model records are in use",
                                                    counters_->device(), counters_->pid(),
                                                    records::kMaxModelNodes));
  }
  return absl::OkStatus();
}

absl::Status ProcessDatastore::RemoveModel(uint32_t model_id, uint32_t model_node_id) {
  if (records_.RemoveModel(model_id, model_node_id)) return absl::OkStatus();
  return absl::NotFoundError(fmt::format("nd{} pid {}: no model record {}/{}", counters_->device(),
                                         counters_->pid(), model_id, model_node_id));
}

}  // namespace neuron::nrt

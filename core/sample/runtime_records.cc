#include "core/sample/runtime_records.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "absl/status/statusor.h"
#include "core/base/component_log.h"
#include "core/sample/internal/dl_symbols.h"
#include "core/sample/internal/libnrt_api.h"

namespace neuron {
namespace {

spdlog::logger& LibnrtLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("libnrt");
  return *log;
}

// The functions of libnrt the agent calls, resolved from one loaded library.
struct Api {
  libnrt::NdlOpenDevice ndl_open_device = nullptr;
  libnrt::NdlCloseDevice ndl_close_device = nullptr;
  libnrt::NdsOpen nds_open = nullptr;
  libnrt::NdsClose nds_close = nullptr;
  libnrt::NdsReadProcessInfo nds_read_process_info = nullptr;
  libnrt::NdsReadProcessInfo nds_read_process_info_ext = nullptr;
  libnrt::NdsReadAllModelNodes nds_read_all_model_nodes = nullptr;
  libnrt::NdsToProcessInfo nds_obj_handle_to_process_info = nullptr;
  libnrt::NdsToProcessInfoExt nds_obj_handle_to_process_info_ext = nullptr;
  libnrt::NdsToModelNodeInfo nds_obj_handle_to_model_node_info = nullptr;
  libnrt::NdsToModelNodeMemUsage nds_obj_handle_to_model_node_mem_usage = nullptr;
  libnrt::NdsObjDelete nds_obj_delete = nullptr;
};

using dl_symbols::Resolve;

// The library stays loaded for the life of the process: unloading a runtime library that may
// have started threads of its own is not safe, and the agent loads it once.
absl::StatusOr<Api> Load(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return absl::NotFoundError(fmt::format("cannot load libnrt ({})", e ? e : path));
  }
  Api a;
  std::string missing;
  Resolve(h, "ndl_open_device", &a.ndl_open_device, &missing);
  Resolve(h, "ndl_close_device", &a.ndl_close_device, &missing);
  Resolve(h, "nds_open", &a.nds_open, &missing);
  Resolve(h, "nds_close", &a.nds_close, &missing);
  Resolve(h, "nds_read_process_info", &a.nds_read_process_info, &missing);
  Resolve(h, "nds_read_process_info_ext", &a.nds_read_process_info_ext, &missing);
  Resolve(h, "nds_read_all_model_nodes", &a.nds_read_all_model_nodes, &missing);
  Resolve(h, "nds_obj_handle_to_process_info", &a.nds_obj_handle_to_process_info, &missing);
  Resolve(h, "nds_obj_handle_to_process_info_ext", &a.nds_obj_handle_to_process_info_ext, &missing);
  Resolve(h, "nds_obj_handle_to_model_node_info", &a.nds_obj_handle_to_model_node_info, &missing);
  Resolve(h, "nds_obj_handle_to_model_node_mem_usage", &a.nds_obj_handle_to_model_node_mem_usage,
          &missing);
  Resolve(h, "nds_obj_delete", &a.nds_obj_delete, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("{} has no {}: not a libnrt with the datastore API", path, missing));
  }
  return a;
}

// A bounded C string as text; bytes outside printable ASCII become '?', because tags and model
// names end up in metric labels and terminal cells.
std::string Text(const char* p, size_t max) {
  std::string s(p, strnlen(p, max));
  for (char& c : s) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return s;
}

NdsVersion VersionOf(const libnrt::Version& v) { return {v.major, v.minor, v.build}; }

// What one process's records read as, or why they could not be read.
using Result = absl::StatusOr<RuntimeRecords>;

class LibnrtRecordsReader final : public RuntimeRecordsReader {
 public:
  LibnrtRecordsReader(std::string path, absl::StatusOr<Api> api)
      : path_(std::move(path)), api_(std::move(api)) {
    if (api_.ok()) {
      LibnrtLog().info("runtime records through {}", path_);
    } else {
      LibnrtLog().warn("runtime records unavailable: {}", std::string{api_.status().message()});
    }
  }

  ~LibnrtRecordsReader() override {
    for (auto& [device, d] : devices_) Close(d);
  }

  void ReadHeld(int device, std::span<const int> pids) override;
  void Release(int device) override;
  RuntimeRecordsScan Latest() const override;

 private:
  struct Device {
    libnrt::NdlDevice* ndl = nullptr;
    std::string open_error;                      // ndl_open_device failed
    std::map<int, libnrt::NdsInstance*> opened;  // pid -> its datastore, open read-only
    std::map<int, Result> results;               // pid -> the last read
  };

  Result ReadOne(libnrt::NdsInstance* inst, int device, int pid) const;
  void Close(Device& d) const;
  void NoteFailure(const std::string& what);

  const std::string path_;
  const absl::StatusOr<Api> api_;
  mutable std::mutex mu_;
  std::map<int, Device> devices_;  // guarded by mu_
  std::set<std::string> logged_;   // guarded by mu_: failures already logged
};

void LibnrtRecordsReader::Close(Device& d) const {
  for (auto& [pid, inst] : d.opened) api_->nds_close(inst);
  d.opened.clear();
  if (d.ndl != nullptr) api_->ndl_close_device(d.ndl);
  d.ndl = nullptr;
}

void LibnrtRecordsReader::NoteFailure(const std::string& what) {
  if (logged_.size() < 1000 && logged_.insert(what).second) {
    LibnrtLog().warn("runtime records unreadable: {}", what);
  }
}

Result LibnrtRecordsReader::ReadOne(libnrt::NdsInstance* inst, int device, int pid) const {
  const Api& a = *api_;
  auto failed = [&](std::string_view call) {
    return absl::DataLossError(
        fmt::format("neuron{} pid {}: {}: {}", device, pid, call, std::strerror(errno)));
  };
  RuntimeRecords r;
  r.device = device;
  r.pid = pid;
  errno = 0;
  libnrt::ObjHandle info = a.nds_read_process_info(inst);
  if (info == nullptr) return failed("nds_read_process_info");
  if (const libnrt::ProcessInfo* p = a.nds_obj_handle_to_process_info(info)) {
    r.process.framework_type = p->framework_type;
    r.process.tag = Text(p->tag, sizeof(p->tag));
    r.process.framework_version = VersionOf(p->framework_version);
    r.process.fal_version = VersionOf(p->fal_version);
    r.process.runtime_version = VersionOf(p->runtime_version);
  }
  a.nds_obj_delete(info);
  libnrt::ObjHandle ext = a.nds_read_process_info_ext(inst);
  if (ext == nullptr) return failed("nds_read_process_info_ext");
  if (const libnrt::ProcessInfoExt* e = a.nds_obj_handle_to_process_info_ext(ext)) {
    r.process.long_tag = Text(e->tag, sizeof(e->tag));
  }
  a.nds_obj_delete(ext);
  libnrt::ObjHandle* models = nullptr;
  size_t count = 0;
  if (a.nds_read_all_model_nodes(inst, &models, &count) != 0) {
    return failed("nds_read_all_model_nodes");
  }
  for (size_t i = 0; i < count; ++i) {
    const libnrt::ModelNodeInfo* info_of = a.nds_obj_handle_to_model_node_info(models[i]);
    const libnrt::ModelNodeMemUsage* mem = a.nds_obj_handle_to_model_node_mem_usage(models[i]);
    if (info_of != nullptr) {
      RuntimeModel m;
      m.model_id = info_of->model_id;
      m.model_node_id = info_of->model_node_id;
      m.name = Text(info_of->name, sizeof(info_of->name));
      std::memcpy(m.uuid.data(), info_of->uuid, m.uuid.size());
      m.nc_index = info_of->nc_index;
      m.sg_index = info_of->sg_index;
      for (int loc = 0; mem != nullptr && loc < libnrt::kMemLocations; ++loc) {
        for (int slot = 0; slot < libnrt::kMemSlots; ++slot) {
          const libnrt::MemUsage& u = mem->model_mem_usage[loc][slot];
          m.memory[loc][slot] = {u.total_size, u.chunk_count};
        }
      }
      r.models.push_back(std::move(m));
    }
    a.nds_obj_delete(models[i]);
  }
  std::free(models);  // the array is the caller's to free (neuron_ds.h)
  return r;
}

void LibnrtRecordsReader::ReadHeld(int device, std::span<const int> pids) {
  if (!api_.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[device];
  if (d.ndl == nullptr) {
    libnrt::DeviceInitParam params{false, 0, false};  // no device set-up, no HBM mapping
    if (api_->ndl_open_device(device, &params, &d.ndl) != 0) {
      d.ndl = nullptr;
      d.open_error = fmt::format("neuron{}: ndl_open_device: {}", device, std::strerror(errno));
      NoteFailure(d.open_error);
      d.results.clear();
      return;
    }
    d.open_error.clear();
  }
  // A process no longer listed has gone (its slot may go to another): its mapping goes too.
  for (auto it = d.opened.begin(); it != d.opened.end();) {
    if (std::find(pids.begin(), pids.end(), it->first) != pids.end()) {
      ++it;
      continue;
    }
    api_->nds_close(it->second);
    it = d.opened.erase(it);
  }
  d.results.clear();
  for (const int pid : pids) {
    auto it = d.opened.find(pid);
    if (it == d.opened.end()) {
      libnrt::NdsInstance* inst = nullptr;
      if (api_->nds_open(d.ndl, pid, &inst) != 0) {
        if (errno == ENOENT) continue;  // released since the datastore read: gone, not unreadable
        d.results.emplace(pid, absl::NotFoundError(fmt::format("neuron{} pid {}: nds_open: {}",
                                                               device, pid, std::strerror(errno))));
        continue;
      }
      it = d.opened.emplace(pid, inst).first;
    }
    Result r = ReadOne(it->second, device, pid);
    if (!r.ok()) NoteFailure(std::string{r.status().message()});
    d.results.emplace(pid, std::move(r));
  }
}

void LibnrtRecordsReader::Release(int device) {
  if (!api_.ok()) return;
  Device d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = devices_.find(device);
    if (it == devices_.end()) return;
    d = std::move(it->second);
    devices_.erase(it);
  }
  Close(d);  // outside the lock: the driver's close waits
             // (docs/driver-interface.md#abi-open-semantics)
}

RuntimeRecordsScan LibnrtRecordsReader::Latest() const {
  RuntimeRecordsScan scan;
  scan.state.known = true;
  if (!api_.ok()) {
    scan.state.reason = std::string{api_.status().message()};
    return scan;
  }
  scan.state.up = true;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [device, d] : devices_) {
    std::string problem = d.open_error;
    for (const auto& [pid, r] : d.results) {
      if (r.ok()) {
        scan.records.push_back(*r);
      } else if (problem.empty()) {
        problem = std::string{r.status().message()};
      }
    }
    if (problem.empty()) continue;
    scan.state.up = false;
    scan.state.unread[device] = problem;
    if (scan.state.reason.empty()) scan.state.reason = problem;
  }
  return scan;
}

}  // namespace

const RuntimeRecords* RuntimeRecordsScan::Find(DatastoreKey key) const {
  const auto it =
      std::lower_bound(records.begin(), records.end(), key,
                       [](const RuntimeRecords& r, const DatastoreKey& k) { return r.key() < k; });
  return it != records.end() && it->key() == key ? &*it : nullptr;
}

std::string RuntimeTag(const RuntimeRecords* records, int pid) {
  if (records != nullptr && !records->process.long_tag.empty()) return records->process.long_tag;
  if (records != nullptr && !records->process.tag.empty()) return records->process.tag;
  return std::to_string(pid);
}

std::string LibnrtPath(std::string_view flag) {
  if (!flag.empty()) return std::string(flag);
  const char* env = std::getenv("NEURON_LIBNRT");
  return env != nullptr && *env != '\0' ? env : "libnrt.so.1";
}

std::shared_ptr<RuntimeRecordsReader> MakeLibnrtRecordsReader(const std::string& path) {
  return std::make_shared<LibnrtRecordsReader>(path, Load(path));
}

}  // namespace neuron

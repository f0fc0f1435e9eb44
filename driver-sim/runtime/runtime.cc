#include "driver-sim/runtime/runtime.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/base/file_io.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/testing.h"

namespace neuron::nrt {
namespace {

std::mutex g_callback_mu;
NRT_ASYNC_EXEC_STATUS_CALLBACK g_callback = nullptr;
void* g_callback_params = nullptr;

std::mutex g_clock_mu;
std::shared_ptr<Clock> g_test_clock;

thread_local std::string t_last_error;

std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<NRT_STATUS> g_no_runtime{NRT_UNINITIALIZED};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// "major[.minor[.build]]"; anything else reads as 0.0.0 (the version is informational).
NdsVersion ParseVersion(const char* text) {
  NdsVersion v;
  if (text == nullptr) return v;
  const std::string_view s(text);
  uint32_t parts[3] = {0, 0, 0};
  const char* p = s.data();
  for (uint32_t& part : parts) {
    const auto [end, ec] = std::from_chars(p, s.data() + s.size(), part);
    if (ec != std::errc()) break;
    if (end == s.data() + s.size() || *end != '.') break;
    p = end + 1;
  }
  v.major = static_cast<uint8_t>(parts[0]);
  v.minor = static_cast<uint8_t>(parts[1]);
  v.build = parts[2];
  return v;
}

// NEURON_RT_EXEC_TIMEOUT in seconds (fractions allowed: ours); 0 or bad: the default.
int64_t ExecTimeoutFromEnv() {
  const std::string v = Env("NEURON_RT_EXEC_TIMEOUT");
  if (v.empty()) return kDefaultExecTimeoutNs;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(s > 0) || s > 2147483647.0) {
    Log()->warn(
        "nrt_init NEURON_RT_EXEC_TIMEOUT=\"{}\" is not a positive number of seconds; "
        "using {} s",
        v, kDefaultExecTimeoutNs / 1'000'000'000);
    return kDefaultExecTimeoutNs;
  }
  return static_cast<int64_t>(s * 1e9);
}

// NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS: a count; garbage: 0 (synchronous), with a warning.
int AsyncMaxFromEnv(const std::string& v) {
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 0) {
    Log()->warn(
        "nrt_init NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS=\"{}\" is not a count; executing "
        "synchronously",
        v);
    return 0;
  }
  return n;
}

NrtResult InitFail(NRT_STATUS status, std::string message) {
  Log()->error("nrt_init {}", message);
  return NrtResult{status, std::move(message)};
}

}  // namespace

Runtime* CurrentRuntime() { return g_runtime.load(std::memory_order_acquire); }
NRT_STATUS NoRuntimeStatus() { return g_no_runtime.load(std::memory_order_acquire); }
void SetLastError(std::string message) { t_last_error = std::move(message); }
const std::string& LastError() { return t_last_error; }

void SetAsyncCallback(NRT_ASYNC_EXEC_STATUS_CALLBACK cb, void* params) {
  std::lock_guard<std::mutex> lock(g_callback_mu);
  g_callback = cb;
  g_callback_params = params;
}

void InvokeAsyncCallback(uint32_t model_id, uint32_t vnc, uint64_t job_id, NRT_STATUS status) {
  NRT_ASYNC_EXEC_STATUS_CALLBACK cb;
  void* params;
  {
    std::lock_guard<std::mutex> lock(g_callback_mu);
    cb = g_callback;
    params = g_callback_params;
  }
  if (cb != nullptr) {
    cb(params, model_id, vnc, job_id, status);
  } else if (status != NRT_SUCCESS) {
    Log()->warn("nrt_async_exec job {} on NeuronCore {} completed with {}", job_id, vnc,
                nrt_get_status_as_str(status));
  }
}

void SetClockForTesting(std::shared_ptr<Clock> clock) {
  std::lock_guard<std::mutex> lock(g_clock_mu);
  g_test_clock = std::move(clock);
}
Runtime* RuntimeForTesting() { return CurrentRuntime(); }
void RefreshForTesting() {
  if (Runtime* rt = CurrentRuntime()) rt->faults().RefreshNow();
}

void PublishRuntime(std::unique_ptr<Runtime> rt) {
  g_runtime.store(rt.release(), std::memory_order_release);
}
void RetireRuntime() {
  Runtime* rt = g_runtime.exchange(nullptr, std::memory_order_acq_rel);
  if (rt == nullptr) return;
  g_no_runtime.store(NRT_CLOSED, std::memory_order_release);
  rt->Close();
  delete rt;
}

NrtResult Runtime::Create(nrt_framework_type_t framework, const char* fw_version,
                          std::unique_ptr<Runtime>* out) {
  ConfigureLogLevelFromEnv();
  const std::string root_env = Env("NEURON_ROOT");
  const RootPaths root(root_env.empty() ? "/" : root_env);
  absl::StatusOr<NodeModel> node = NodeModel::Load(root);
  if (!node.ok()) return InitFail(NRT_FAILURE, std::string{node.status().message()});
  std::unique_ptr<Runtime> rt(new Runtime(std::move(*node)));

  absl::StatusOr<ReservationRequest> req = RequestFromEnv(rt->node_.total_cores());
  if (!req.ok()) return InitFail(NRT_INVALID, std::string{req.status().message()});
  if (NrtResult r = rt->Reserve(root, &*req); !r.ok()) return r;
  if (NrtResult r = rt->StartAccounting(framework, fw_version); !r.ok()) return r;
  rt->ConfigureFromEnv();
  rt->StartCores(root);
  Log()->info("nrt_init reserved NeuronCores nc{}-nc{} ({}) on {} at {}", rt->range_.first,
              rt->range_.last(), req->what, rt->node_.spec().name, root.root().string());
  *out = std::move(rt);
  return {};
}

NrtResult Runtime::Reserve(const RootPaths& root, ReservationRequest* req) {
  // The devices of the window, opened by the names this process sees; from here on every core
  // and device index is the host's.
  const int per_device = node_.cores_per_device();
  absl::StatusOr<std::unique_ptr<DeviceNodes>> nodes =
      DeviceNodes::Open(req->window.first / per_device, req->window.last() / per_device);
  if (!nodes.ok()) {
    return InitFail(absl::IsResourceExhausted(nodes.status()) ? NRT_RESOURCE : NRT_FAILURE,
                    std::string{nodes.status().message()});
  }
  absl::StatusOr<CoreRange> host_window = (*nodes)->ToHost(req->window, per_device);
  if (!host_window.ok()) return InitFail(NRT_INVALID, std::string{host_window.status().message()});
  req->window = *host_window;
  devices_ = *std::move(nodes);
  absl::StatusOr<std::unique_ptr<CoreReservation>> res = CoreReservation::Acquire(root, *req);
  if (!res.ok()) {
    if (absl::IsResourceExhausted(res.status())) {
      Log()->error("nrt_allocate_neuron_cores {}", std::string{res.status().message()});
      return NrtResult{NRT_RESOURCE, std::string{res.status().message()}};
    }
    return InitFail(NRT_FAILURE, std::string{res.status().message()});
  }
  reservation_ = std::move(*res);
  range_ = reservation_->range();
  devices_->KeepOnly(range_.first / per_device, range_.last() / per_device);
  return {};
}

NrtResult Runtime::StartAccounting(nrt_framework_type_t framework, const char* fw_version) {
  ProcessIdentity who;
  who.pid = ::getpid();
  who.tag = Env("NEURON_PROCESS_TAG");
  if (who.tag.empty()) who.tag = std::to_string(who.pid);
  who.framework_type = static_cast<int8_t>(framework);
  who.framework = ParseVersion(fw_version);
  who.runtime = kRuntimeVersion;
  absl::StatusOr<std::unique_ptr<Accounting>> acc =
      Accounting::Create(node_, range_.first, range_.count, who, *devices_);
  if (!acc.ok()) {
    return InitFail(absl::IsResourceExhausted(acc.status()) ? NRT_RESOURCE : NRT_FAILURE,
                    std::string{acc.status().message()});
  }
  accounting_ = std::move(*acc);
  Accounting* accounting = accounting_.get();
  ledger_ = std::make_shared<MemoryLedger>(
      range_.count, node_.CoreHbmBytes(),
      [accounting](int vnc, MemCategory c, uint64_t v) { accounting->SetDeviceMemory(vnc, c, v); },
      node_.spec().devices,
      [accounting](int dev, MemCategory c, uint64_t v) { accounting->SetHostMemory(dev, c, v); });
  return {};
}

void Runtime::ConfigureFromEnv() {
  {
    std::lock_guard<std::mutex> lock(g_clock_mu);
    clock_ = g_test_clock;
  }
  if (!clock_) {
    const std::string mode = Env("NEURON_SIM_CLOCK");
    if (mode == "manual") {
      clock_ = std::make_shared<ManualClock>(SteadyClock().NowNs());
    } else {
      if (!mode.empty() && mode != "steady") {
        Log()->warn("nrt_init NEURON_SIM_CLOCK=\"{}\" is neither steady nor manual; using steady",
                    mode);
      }
      clock_ = std::make_shared<SteadyClock>();
    }
  }
  exec_timeout_ns_ = ExecTimeoutFromEnv();
  const std::string inflight = Env("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS");
  if (!inflight.empty()) async_max_ = AsyncMaxFromEnv(inflight);
  comm_id_ = Env("NEURON_RT_ROOT_COMM_ID");
  hostname_ = node_.info().node_name;
}

void Runtime::StartCores(const RootPaths& root) {
  std::vector<int> devices;
  serials_.assign(static_cast<size_t>(node_.spec().devices), "");
  for (int vnc = 0; vnc < range_.count; ++vnc) {
    const int d = Loc(vnc).device;
    if (std::find(devices.begin(), devices.end(), d) != devices.end()) continue;
    devices.push_back(d);
    absl::StatusOr<std::string> serial = ReadText(root.NeuronDevice(d) / sysfs::kSerialNumber);
    if (serial.ok()) serials_[static_cast<size_t>(d)] = *serial;
  }
  faults_ = std::make_unique<FaultWatch>(
      root, devices, node_.spec().devices,
      [this](int d, bool ready, bool reset) { OnDeviceState(d, ready, reset); });
  std::vector<std::pair<int, std::string>> efas;
  for (int d : devices) {
    const int e = node_.NearestEfa(d);
    if (e < 0 ||
        std::any_of(efas.begin(), efas.end(), [e](const auto& p) { return p.first == e; })) {
      continue;
    }
    efas.emplace_back(e, node_.spec().efas[static_cast<size_t>(e)].name);
  }
  faults_->WatchEfas(std::move(efas));
  models_per_core_.assign(static_cast<size_t>(range_.count), 0);
  scratchpads_.resize(static_cast<size_t>(range_.count));
  for (int vnc = 0; vnc < range_.count; ++vnc) {
    cores_.push_back(std::make_unique<CoreScheduler>(
        [this](Job& job) { return RunJob(job); },
        [vnc](const Job& job, NRT_STATUS status) {
          InvokeAsyncCallback(job.model != nullptr ? job.model->id : 0, static_cast<uint32_t>(vnc),
                              job.job_id, status);
        }));
  }
  faults_->RefreshNow();
  faults_->Start();
}

Runtime::~Runtime() { Close(); }

void Runtime::Close() {
  if (closing_.exchange(true)) return;
  for (auto& core : cores_) core->Shutdown();
  std::set<nrt_model_t*> models;
  {
    std::lock_guard<std::mutex> lock(models_mu_);
    models.swap(models_);
  }
  for (nrt_model_t* m : models) {
    if (m->world) m->world->Leave(m->rank);
    m->magic = 0;
    delete m;
  }
  {
    std::lock_guard<std::mutex> lock(host_mu_);
    for (auto& [key, world] : host_worlds_) world->Leave(key.second);
    host_worlds_.clear();
  }
  // A runtime whose nrt_init failed half-way has only some of its parts.
  if (ledger_) ledger_->ClearAndDetach();
  if (reservation_) reservation_->Release();
  if (accounting_) accounting_->Release();  // RELEASE_NEURON_DS: the driver folds the counters
  if (faults_) faults_->Stop();
  devices_.reset();  // the last close detaches the process from its devices
}

void Runtime::OnDeviceState(int device, bool ready, bool reset_completed) {
  for (int vnc = 0; vnc < range_.count; ++vnc) {
    if (Loc(vnc).device != device) continue;
    CoreScheduler& c = core(vnc);
    if (!ready) c.interrupt().Fire();  // a reset aborts in-flight executions
    if (reset_completed) c.faulted.store(false, std::memory_order_release);
  }
  if (!ready) Log()->warn("nrt_device_watch nd{} left READY; executions on it fail", device);
}

void Runtime::ReportHwError(int vnc, const char* token) {
  const CoreLocation loc = Loc(vnc);
  faults_->Printk(3, fmt::format("nrt: NEURON_HW_ERR={} instance-id={} hostname={} nd-id={} "
                                 "nc-id={} serial-num={} action=TERMINATE_INSTANCE",
                                 token, node_.info().instance_id, hostname_, loc.device,
                                 loc.device_core, serials_[static_cast<size_t>(loc.device)]));
}

int Runtime::PickCore(int ncores) {
  std::lock_guard<std::mutex> lock(models_mu_);
  int best = -1;
  for (int vnc = 0; vnc + ncores <= range_.count; ++vnc) {
    if (best < 0 ||
        models_per_core_[static_cast<size_t>(vnc)] < models_per_core_[static_cast<size_t>(best)]) {
      best = vnc;
    }
  }
  return best;
}

}  // namespace neuron::nrt

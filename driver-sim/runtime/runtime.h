#pragma once
// The libnrt-sim runtime of one process: what nrt_init builds and nrt_close tears down. The C API
// (api_*.cc) is thin glue over this class; its parts live in separate files: reservation,
// memory, accounting, scheduler, executor (execution and collectives), fault watch, profile.
//
// Thread-safety: thread-safe, except that Close must not race with other calls (as with libnrt,
// nrt_close ends every other use of the runtime).

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver-sim/runtime/accounting.h"
#include "driver-sim/runtime/clock.h"
#include "driver-sim/runtime/device_nodes.h"
#include "driver-sim/runtime/fault_watch.h"
#include "driver-sim/runtime/memory.h"
#include "driver-sim/runtime/node_model.h"
#include "driver-sim/runtime/objects.h"
#include "driver-sim/runtime/profile.h"
#include "driver-sim/runtime/program.h"
#include "driver-sim/runtime/reservation.h"
#include "driver-sim/runtime/scheduler.h"
#include "nrt/nrt.h"
#include "nrt/nrt_experimental.h"

namespace neuron::nrt {

// docs/runtime.md#environment (sim default)
inline constexpr int64_t kDefaultExecTimeoutNs = 30'000'000'000;
inline constexpr NdsVersion kRuntimeVersion{2, 28, 0};  // reported as libnrt 2.28.0

struct JobTimeline;         // an execution's simulated course (executor.cc)
struct HostCollectiveCall;  // one nrt_barrier or nrt_all_gather (collective_api.cc)

// An NRT status with the message that was logged for it.
struct NrtResult {
  NRT_STATUS status = NRT_SUCCESS;
  std::string message;
  bool ok() const { return status == NRT_SUCCESS; }
};

class Runtime {
 public:
  // nrt_init: environment, node, reservation, datastores, fault watch. Failures are logged (the
  // line for taken cores, docs/runtime.md#reservation-and-indices) and returned as NRT statuses.
  static NrtResult Create(nrt_framework_type_t framework, const char* fw_version,
                          std::unique_ptr<Runtime>* out);
  ~Runtime();
  void Close();

  const NodeModel& node() const { return node_; }
  int visible() const { return range_.count; }
  const CoreRange& range() const { return range_; }
  CoreLocation Loc(int vnc) const { return node_.Locate(range_.first + vnc); }
  Clock& clock() { return *clock_; }
  int64_t exec_timeout_ns() const { return exec_timeout_ns_; }
  int async_max() const { return async_max_; }
  Accounting& accounting() { return *accounting_; }
  const std::shared_ptr<MemoryLedger>& ledger() const { return ledger_; }
  FaultWatch& faults() { return *faults_; }
  Profiler& profiler() { return profiler_; }
  CoreScheduler& core(int vnc) { return *cores_[static_cast<size_t>(vnc)]; }
  bool closing() const { return closing_.load(std::memory_order_acquire); }

  // nrt_load / nrt_load_collectives (loader.cc). `world` 0: no collectives context.
  NrtResult Load(const void* bytes, size_t size, int32_t vnc, uint32_t rank, uint32_t world,
                 nrt_model_t** out);
  NrtResult Unload(nrt_model_t* model);
  bool ValidModel(const nrt_model_t* model) const {
    return model != nullptr && model->magic == kModelMagic && model->runtime == this;
  }

  // nrt_execute (executor.cc): validates, then submits to the model's core.
  NRT_STATUS Execute(nrt_model_t* model, const TensorSet* in, TensorSet* out, int repeat);
  // nrt_barrier / nrt_all_gather (collective_api.cc).
  NRT_STATUS HostCollective(int32_t vnc, uint32_t rank, uint32_t world, uint32_t bytes,
                            const void* input, void* output);

  // A NEURON_HW_ERR= record for the core (docs/runtime.md#hardware-errors), through the daemon's
  // printk.
  void ReportHwError(int vnc, const char* token);

 private:
  explicit Runtime(NodeModel node) : node_(std::move(node)) {}
  // Steps of Create (runtime.cc): open the window's devices and reserve its cores (req's window
  // becomes the host's); the process's datastores and memory ledger; clock, timeout and the
  // other settings from the environment; fault watch and one scheduler per core.
  NrtResult Reserve(const RootPaths& root, ReservationRequest* req);
  NrtResult StartAccounting(nrt_framework_type_t framework, const char* fw_version);
  void ConfigureFromEnv();
  void StartCores(const RootPaths& root);
  NRT_STATUS RunJob(Job& job);  // on the core (executor.cc)
  // Steps of RunJob (executor.cc): refuse the job on a device that is not READY or a core that
  // faulted (recorded and logged); run its ops in simulated time; record the outcome on every
  // core of the model; log a failure and note what it does to the core.
  NRT_STATUS RefuseJob(const Job& job, int64_t start);
  void RunOps(Job& job, bool profiling, int64_t real_deadline, JobTimeline* run);
  void RecordJob(const Job& job, int64_t start, JobTimeline* run, bool profiling);
  void ReportJobFailure(const nrt_model_t& m, NRT_STATUS status,
                        const std::optional<sim::PendingFault>& fault);
  // One collective of an execution at simulated time run->t (advanced past it); run->cc_ns grows
  // by the time spent in it. NRT_EXEC_HW_ERR_COLLECTIVES when a peer never arrives or the ring
  // crosses a NeuronLink that is down.
  // An op with tensors (`input`, `output`) brings the input's bytes and gets the group's sum
  // (all-reduce) or concatenation (all-gather) in the output.
  NRT_STATUS RunCollective(const Job& job, LoadedOp& op, int64_t real_deadline, bool profiling,
                           JobTimeline* run);
  // True (and logged) when the EFA the rank's collectives leave the node through is down.
  bool EfaDown(const nrt_model_t& m, const LoadedOp& op) const;
  void LogCollectiveFailure(const nrt_model_t& m, const LoadedOp& op,
                            const CommWorld::Result& r) const;
  // The ring's cost, EFA bytes and NeuronLink hops from where the group's members turned out to
  // be: the members on this rank's node ring over NeuronLink, the nodes meet over EFA.
  void ComputeRing(LoadedOp& op, const CommWorld::Result& r) const;
  // Steps of HostCollective (collective_api.cc): the process's joined world for (world, rank);
  // the collective on the core (its exclusive job); the rendezvous of barrier or all-gather,
  // false when a peer never arrives.
  absl::StatusOr<std::shared_ptr<CommWorld>> HostWorld(int32_t vnc, uint32_t rank, uint32_t world);
  NRT_STATUS RunHostCollective(const HostCollectiveCall& call, CommWorld& w);
  bool ExchangeHostCollective(const HostCollectiveCall& call, CommWorld& w, int64_t real_deadline,
                              int64_t* t, CommWorld::Result* result);
  void RecordHangOnCollectives(int vnc);
  void OnDeviceState(int device, bool ready, bool reset_completed);
  int PickCore(int ncores);
  // Steps of Load (loader.cc): checks of the header and of the collective context, the ops'
  // timing and replica groups, the memory charge on every core (models_mu_ held), then the
  // model's id, host memory and datastore records (models_mu_ held).
  NrtResult CheckNeffHeader(const NeffHeader& header, int32_t vnc, int ncores);
  NrtResult CheckCollectiveContext(const Program& program, uint32_t rank, uint32_t world) const;
  NrtResult LoadOps(nrt_model_t& model, uint32_t world) const;
  NrtResult ChargeModel(const nrt_model_t& model);
  void RegisterModel(nrt_model_t& model, size_t neff_bytes);
  // A model's device memory on one core, all categories or none (loader.cc; models_mu_ held).
  absl::Status ChargeModelOnCore(const nrt_model_t& model, int core);
  void ReleaseModelOnCore(const nrt_model_t& model, int core);

  NodeModel node_;
  CoreRange range_;
  std::shared_ptr<Clock> clock_;
  int64_t exec_timeout_ns_ = kDefaultExecTimeoutNs;
  int async_max_ = 0;
  std::string comm_id_;
  std::string hostname_;
  std::vector<std::string> serials_;      // by device index
  std::unique_ptr<DeviceNodes> devices_;  // outlives accounting_, which maps through it
  std::unique_ptr<CoreReservation> reservation_;
  std::unique_ptr<Accounting> accounting_;
  std::shared_ptr<MemoryLedger> ledger_;
  std::unique_ptr<FaultWatch> faults_;
  Profiler profiler_;
  std::vector<std::unique_ptr<CoreScheduler>> cores_;
  std::atomic<bool> closing_{false};

  mutable std::mutex models_mu_;
  std::set<nrt_model_t*> models_;
  std::vector<int> models_per_core_;
  uint32_t next_model_id_ = 1;
  std::mutex host_mu_;  // host-driven collectives: (world, rank) joined until nrt_close
  std::map<std::pair<uint32_t, uint32_t>, std::shared_ptr<CommWorld>> host_worlds_;

  // Scratchpad is shared per core: the largest of the core's models
  // (docs/hardware.md#device-memory).
  std::vector<std::multiset<uint64_t>> scratchpads_;
};

// ---- Process-wide state behind the C API ----
// The live runtime, or nullptr; the status to return when there is none (13 or 14).
Runtime* CurrentRuntime();
NRT_STATUS NoRuntimeStatus();
// nrt_init publishes the new runtime; nrt_close retires it (Close, delete; later calls get 14).
void PublishRuntime(std::unique_ptr<Runtime> rt);
void RetireRuntime();
// Records the message of an NRT_INVALID on this thread for nrtsim_last_error().
void SetLastError(std::string message);
const std::string& LastError();
// The async completion callback (nrt_register_async_exec_callback).
void SetAsyncCallback(NRT_ASYNC_EXEC_STATUS_CALLBACK cb, void* params);
void InvokeAsyncCallback(uint32_t model_id, uint32_t vnc, uint64_t job_id, NRT_STATUS status);

}  // namespace neuron::nrt

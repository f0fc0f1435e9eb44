#include "driver-sim/runtime/accounting.h"

#include <fmt/format.h>

#include "core/driver/datastore_layout.h"
#include "driver-sim/driver/efa_traffic_layout.h"
#include "driver-sim/runtime/log.h"

namespace neuron::nrt {

absl::StatusOr<std::unique_ptr<Accounting>> Accounting::Create(const NodeModel& node,
                                                               int first_core, int core_count,
                                                               const ProcessIdentity& who,
                                                               const DeviceNodes& devices) {
  std::unique_ptr<Accounting> acc(new Accounting());
  acc->datastores_.resize(static_cast<size_t>(node.spec().devices));
  const int efas = static_cast<int>(node.spec().efas.size());
  for (int i = 0; i < core_count; ++i) {
    const CoreLocation loc = node.Locate(first_core + i);
    auto& ds = acc->datastores_[static_cast<size_t>(loc.device)];
    if (!ds) {
      absl::StatusOr<std::unique_ptr<ProcessDatastore>> w =
          ProcessDatastore::Acquire(devices.FdOfHost(loc.device), loc.device, who.pid);
      if (!w.ok()) return w.status();
      ds = std::move(*w);
      ds->SetProcessInfo(who.tag, who.runtime, who.framework_type, who.framework);
      ds->SetProcessTag(who.tag);
      if (absl::Status s = ds->InitEfaTraffic(std::min(efas, nds::kMaxEfas)); !s.ok()) return s;
    }
    auto slot = std::make_unique<Slot>();
    slot->ds = ds.get();
    slot->device = loc.device;
    slot->device_core = loc.device_core;
    slot->efa = node.NearestEfa(loc.device);
    const int lnc = std::max(node.lnc(), 1);
    slot->sets.resize(static_cast<size_t>(lnc));
    for (int j = 0; j < lnc; ++j) {
      const int physical = loc.device_core * lnc + j;  // libnrt's pnc_index
      CounterWords& words = slot->sets[static_cast<size_t>(j)];
      for (int k = 0; k < static_cast<int>(words.size()) && k < nds::kCoreCounterCount; ++k) {
        words[static_cast<size_t>(k)] = ds->CoreCounterWord(physical, k);
      }
    }
    acc->slots_.push_back(std::move(slot));
  }
  return acc;
}

Accounting::~Accounting() { Release(); }

namespace {

void StoreWord(uint64_t* w, uint64_t value) {
  if (w != nullptr) std::atomic_ref<uint64_t>(*w).store(value, std::memory_order_relaxed);
}

}  // namespace

void Accounting::Add(Slot& s, int index, uint64_t delta) {
  if (uint64_t* w = s.sets.front()[static_cast<size_t>(index)]) {
    std::atomic_ref<uint64_t>(*w).fetch_add(delta, std::memory_order_relaxed);
  }
}

void Accounting::Store(Slot& s, int index, uint64_t value) {
  StoreWord(s.sets.front()[static_cast<size_t>(index)], value);
}

void Accounting::StoreTime(Slot& s, int index, uint64_t value) {
  for (CounterWords& words : s.sets) StoreWord(words[static_cast<size_t>(index)], value);
}

void Accounting::StoreSplit(Slot& s, int index, uint64_t value) {
  const uint64_t n = s.sets.size();
  const uint64_t share = value / n;
  for (size_t j = 0; j < s.sets.size(); ++j) {
    StoreWord(s.sets[j][static_cast<size_t>(index)], j == 0 ? value - share * (n - 1) : share);
  }
}

void Accounting::RecordExecution(int vnc, const ExecOutcome& o) {
  Slot& s = *slots_[static_cast<size_t>(vnc)];
  s.executions.fetch_add(o.executions, std::memory_order_relaxed);
  s.last_exec_ns.store(static_cast<uint64_t>(o.device_ns), std::memory_order_relaxed);
  // Times accumulate in ns in the process and are stored as µs totals, so rounding never drifts.
  const uint64_t busy = s.busy_ns.fetch_add(o.busy_ns, std::memory_order_relaxed) + o.busy_ns;
  StoreTime(s, nds::kTimeInUse, busy / 1000);
  if (o.cc_ns > 0) {
    const uint64_t cc = s.cc_ns.fetch_add(o.cc_ns, std::memory_order_relaxed) + o.cc_ns;
    StoreTime(s, nds::kCcTime, cc / 1000);
  }
  if (o.status != NRT_SUCCESS) {
    CountStatus(vnc, o.status);
    return;
  }
  const uint64_t dev =
      s.latency_device_ns.fetch_add(o.device_ns, std::memory_order_relaxed) + o.device_ns;
  const uint64_t tot =
      s.latency_total_ns.fetch_add(o.total_ns, std::memory_order_relaxed) + o.total_ns;
  Store(s, nds::kLatencyDevice, dev / 1000);
  Store(s, nds::kNcTime, dev / 1000);
  Store(s, nds::kLatencyTotal, tot / 1000);
  if (o.macs > 0) {
    const double macs = s.macs.fetch_add(o.macs, std::memory_order_relaxed) + o.macs;
    Store(s, nds::kMacCount, static_cast<uint64_t>(macs));
  }
  Add(s, nds::kInferCompleted, o.executions);
  Add(s, nds::kInferenceCount, o.executions);
}

void Accounting::CountStatus(int vnc, NRT_STATUS status) {
  Slot& s = *slots_[static_cast<size_t>(vnc)];
  // Which counters a status moves (driver-sim/README.md, "libnrt-sim"; unverified mapping).
  switch (status) {
    case NRT_SUCCESS:
      break;
    case NRT_FAILURE:
      Add(s, nds::kGenericFail, 1);
      Add(s, nds::kErrGeneric, 1);
      break;
    case NRT_INVALID:
    case NRT_INVALID_HANDLE:
      Add(s, nds::kErrInvalid, 1);
      break;
    case NRT_RESOURCE:
      Add(s, nds::kErrResource, 1);
      break;
    case NRT_TIMEOUT:
      Add(s, nds::kInferTimedOut, 1);
      break;
    case NRT_HW_ERROR:
    case NRT_EXEC_UNIT_UNRECOVERABLE:
      Add(s, nds::kErrHw, 1);
      break;
    case NRT_QUEUE_FULL:
      Add(s, nds::kInferFailedToQueue, 1);
      break;
    case NRT_UNSUPPORTED_NEFF_VERSION:
      Add(s, nds::kErrUnsupportedNeffVersion, 1);
      break;
    case NRT_EXEC_BAD_INPUT:
      Add(s, nds::kInferIncorrectInput, 1);
      break;
    case NRT_EXEC_COMPLETED_WITH_NUM_ERR:
      Add(s, nds::kInferCompletedWithNumErr, 1);
      Add(s, nds::kErrNumerical, 1);
      break;
    case NRT_EXEC_COMPLETED_WITH_ERR:
      Add(s, nds::kInferCompletedWithErr, 1);
      break;
    case NRT_EXEC_OOB:
      Add(s, nds::kOob, 1);
      break;
    case NRT_EXEC_HW_ERR_COLLECTIVES:
      Add(s, nds::kHwErrCollectives, 1);
      Add(s, nds::kErrHw, 1);
      break;
    case NRT_EXEC_HW_ERR_HBM_UE:
      Add(s, nds::kHwErrHbmUe, 1);
      Add(s, nds::kErrHw, 1);
      break;
    case NRT_EXEC_HW_ERR_NC_UE:
      Add(s, nds::kHwErrNcUe, 1);
      Add(s, nds::kInferCompletedWithErr, 1);
      Add(s, nds::kErrHw, 1);
      break;
    case NRT_EXEC_HW_ERR_DMA_ABORT:
      Add(s, nds::kHwErrDmaAbort, 1);
      Add(s, nds::kErrHw, 1);
      break;
    case NRT_EXEC_SW_NQ_OVERFLOW:
      Add(s, nds::kErrSwNqOverflow, 1);
      break;
    case NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE:
      Add(s, nds::kHwErrRepairableHbmUe, 1);
      Add(s, nds::kErrHw, 1);
      break;
    default:
      Add(s, nds::kGenericFail, 1);
      break;
  }
}

void Accounting::CountModelLoad(int vnc) {
  Add(*slots_[static_cast<size_t>(vnc)], nds::kModelLoadCount, 1);
}

void Accounting::AddBusy(int vnc, int64_t busy_ns, int64_t cc_ns) {
  Slot& s = *slots_[static_cast<size_t>(vnc)];
  const uint64_t busy = s.busy_ns.fetch_add(busy_ns, std::memory_order_relaxed) + busy_ns;
  StoreTime(s, nds::kTimeInUse, busy / 1000);
  const uint64_t cc = s.cc_ns.fetch_add(cc_ns, std::memory_order_relaxed) + cc_ns;
  StoreTime(s, nds::kCcTime, cc / 1000);
}

void Accounting::SetDeviceMemory(int vnc, MemCategory cat, uint64_t bytes) {
  StoreSplit(*slots_[static_cast<size_t>(vnc)], nds::kMemUsageCodeDevice + static_cast<int>(cat),
             bytes);
}

void Accounting::SetHostMemory(int device, MemCategory cat, uint64_t bytes) {
  if (device < 0 || static_cast<size_t>(device) >= datastores_.size()) return;
  if (auto& ds = datastores_[static_cast<size_t>(device)]) {
    (void)ds->SetDeviceCounter(nds::kMemUsageCodeHost + static_cast<int>(cat), bytes);
  }
}

void Accounting::AddEfaTraffic(int vnc, uint64_t tx_bytes, uint64_t rx_bytes) {
  Slot& s = *slots_[static_cast<size_t>(vnc)];
  if (s.efa < 0) return;
  auto packets = [](uint64_t b) { return (b + kEfaPacketBytes - 1) / kEfaPacketBytes; };
  s.ds->AddEfaTraffic(s.efa, nds::kEfaTxBytes, tx_bytes);
  s.ds->AddEfaTraffic(s.efa, nds::kEfaTxPkts, packets(tx_bytes));
  s.ds->AddEfaTraffic(s.efa, nds::kEfaRxBytes, rx_bytes);
  s.ds->AddEfaTraffic(s.efa, nds::kEfaRxPkts, packets(rx_bytes));
}

void Accounting::AddModelRecord(const NdsModel& model, int vnc) {
  std::lock_guard<std::mutex> lock(mu_);
  if (released_) return;
  const absl::Status added = slots_[static_cast<size_t>(vnc)]->ds->AddModel(model);
  if (!added.ok()) Log()->warn("nrt_load {}", std::string{added.message()});
}

void Accounting::RemoveModelRecord(uint32_t model_id, int vnc) {
  std::lock_guard<std::mutex> lock(mu_);
  if (released_) return;
  (void)slots_[static_cast<size_t>(vnc)]->ds->RemoveModel(model_id, 0);
}

CoreStatsSnapshot Accounting::Stats(int vnc) const {
  const Slot& s = *slots_[static_cast<size_t>(vnc)];
  return {s.executions.load(std::memory_order_relaxed), s.busy_ns.load(std::memory_order_relaxed),
          s.cc_ns.load(std::memory_order_relaxed), s.last_exec_ns.load(std::memory_order_relaxed)};
}

void Accounting::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  if (released_) return;
  released_ = true;
  for (auto& ds : datastores_) {
    if (ds) ds->Release();
  }
}

const ProcessDatastore* Accounting::DatastoreOf(int device) const {
  if (device < 0 || static_cast<size_t>(device) >= datastores_.size()) return nullptr;
  return datastores_[static_cast<size_t>(device)].get();
}

}  // namespace neuron::nrt

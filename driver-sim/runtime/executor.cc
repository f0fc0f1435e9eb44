// Executions on a core (docs/runtime.md#queues to #accounting): the timing model, collectives,
// faults, and the accounting at completion. The path of an execution without collectives, faults or
// profiling makes no system call besides the clock's sleep, and none at all on a ManualClock.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "driver-sim/runtime/timing.h"

namespace neuron::nrt {
namespace {

constexpr int64_t kHangRecordIntervalNs = 10'000'000'000;  // one HANG record per core per 10 s
// How far a core's simulated time may run ahead of the steady clock before an execution sleeps:
// 1 ms, a thousandth of a 1 s utilization sample (docs/runtime.md#accounting).
constexpr int64_t kRunAheadNs = 1'000'000;

const char* FaultToken(sim::FaultKind k) {
  switch (k) {
    case sim::FaultKind::kHbmUe:
      return "HBM_UNCORRECTABLE_ERROR";
    case sim::FaultKind::kSramUe:
      return "SRAM_UNCORRECTABLE_ERROR";
    case sim::FaultKind::kDmaAbort:
      return "DMA_ERROR";
    default:
      return nullptr;
  }
}

// What an injected fault makes of an execution that otherwise succeeded: kHang times out (the
// caller moves its end to the deadline); kLinkDown leaves it alone, it fails collectives only.
NRT_STATUS FaultStatus(sim::FaultKind k) {
  switch (k) {
    case sim::FaultKind::kHang:
      return NRT_TIMEOUT;
    case sim::FaultKind::kHbmUe:
      return NRT_EXEC_HW_ERR_HBM_UE;
    case sim::FaultKind::kSramUe:
      return NRT_EXEC_HW_ERR_NC_UE;
    case sim::FaultKind::kDmaAbort:
      return NRT_EXEC_HW_ERR_DMA_ABORT;
    case sim::FaultKind::kNan:
      return NRT_EXEC_COMPLETED_WITH_NUM_ERR;
    case sim::FaultKind::kLinkDown:
    case sim::FaultKind::kSdc:  // succeeds with a corrupted output (CorruptOutput)
      break;
  }
  return NRT_SUCCESS;
}

// The matmuls with data (program.h): output = input x weights in float32, row-major, summed in
// k order so that integer-valued operands give the exact result every time. The parser checked
// every tensor's size; a set that lacks one (an output the caller did not pass) is skipped.
void ComputeDataOps(const Program& program, const TensorSet* in, const TensorSet* out) {
  for (const Op& op : program.ops) {
    if (op.weights.empty()) continue;
    const nrt_tensor_t* a = in != nullptr ? in->Find(op.input.c_str()) : nullptr;
    const nrt_tensor_t* w = in != nullptr ? in->Find(op.weights.c_str()) : nullptr;
    const nrt_tensor_t* c = out != nullptr ? out->Find(op.output.c_str()) : nullptr;
    if (a == nullptr || w == nullptr || c == nullptr || TensorBytes(a) == nullptr ||
        TensorBytes(w) == nullptr || TensorBytes(c) == nullptr) {
      continue;
    }
    const auto m = static_cast<size_t>(op.m);
    const auto k = static_cast<size_t>(op.k);
    const auto n = static_cast<size_t>(op.n);
    if (c->size < m * n * sizeof(float)) continue;
    std::vector<float> av(m * k);
    std::vector<float> wv(k * n);
    std::vector<float> cv(m * n, 0.0f);
    std::memcpy(av.data(), TensorBytes(a), std::min(a->size, av.size() * sizeof(float)));
    std::memcpy(wv.data(), TensorBytes(w), std::min(w->size, wv.size() * sizeof(float)));
    for (size_t i = 0; i < m; ++i) {
      for (size_t kk = 0; kk < k; ++kk) {
        for (size_t j = 0; j < n; ++j) cv[i * n + j] += av[i * k + kk] * wv[kk * n + j];
      }
    }
    std::memcpy(TensorBytes(c), cv.data(), cv.size() * sizeof(float));
  }
}

// An injected silent data corruption: the lowest bit of the first output's first byte flips, as
// one upset bit would, and the execution still reports success; only a comparison notices.
void CorruptOutput(const TensorSet* out) {
  if (out == nullptr) return;
  for (const auto& [name, tensor] : out->items) {
    uint8_t* bytes = TensorBytes(tensor);
    if (bytes == nullptr || tensor->size == 0) continue;
    bytes[0] ^= 0x01;
    return;
  }
}

// What the runtime log says for each failure (docs/runtime.md#hardware-errors, "Runtime log says").
std::string Describe(NRT_STATUS s) {
  switch (s) {
    case NRT_EXEC_HW_ERR_HBM_UE:
      return "uncorrectable HBM memory error";
    case NRT_EXEC_HW_ERR_NC_UE:
      return "uncorrectable memory error detected";
    case NRT_EXEC_HW_ERR_DMA_ABORT:
      return "DMA TX/RX engine in an abort state";
    case NRT_EXEC_COMPLETED_WITH_NUM_ERR:
      return "execution completed with numerical errors (NaN)";
    case NRT_EXEC_HW_ERR_COLLECTIVES:
      return "missing collectives status, suspected hang";
    case NRT_EXEC_UNIT_UNRECOVERABLE:
      return "execution unit unrecoverable after a hardware error; the device needs a reset";
    case NRT_HW_ERROR:
      return "the device is not READY (reset, unplugged or INVALID)";
    default:
      return nrt_get_status_as_str(s);
  }
}

}  // namespace

NRT_STATUS Runtime::Execute(nrt_model_t* model, const TensorSet* in, TensorSet* out, int repeat) {
  for (const TensorSpec& spec : model->program->inputs) {
    const nrt_tensor_t* t = in != nullptr ? in->Find(spec.name.c_str()) : nullptr;
    if (t == nullptr || t->size != spec.size) {
      const std::string msg =
          t == nullptr ? fmt::format("input tensor \"{}\" is missing from the input set", spec.name)
                       : fmt::format("input tensor \"{}\" has {} bytes; the model takes {}",
                                     spec.name, t->size, spec.size);
      Log()->error("nrt_execute {}", msg);
      SetLastError(msg);
      accounting_->CountStatus(model->vnc, NRT_EXEC_BAD_INPUT);
      return NRT_EXEC_BAD_INPUT;
    }
  }
  CoreScheduler& c = core(model->vnc);
  Job job;
  job.model = model;
  job.inputs = in;
  job.outputs = out;
  job.repeat = std::max(1, repeat);
  job.submit_ns = clock_->NowNs();
  job.job_id = c.NextJobId();
  const NRT_STATUS s = c.Submit(job, async_max_);
  if (s == NRT_QUEUE_FULL) {
    accounting_->CountStatus(model->vnc, NRT_QUEUE_FULL);
    Log()->warn("nrt_execute NeuronCore {} already has {} executions in flight", model->vnc,
                async_max_);
  }
  return s;
}

// An execution's simulated course: its status so far, the simulated time it has reached, the
// time it spent in collectives and, when profiled, its spans.
struct JobTimeline {
  NRT_STATUS status = NRT_SUCCESS;
  int64_t t = 0;
  int64_t cc_ns = 0;
  std::vector<Span> spans;
  bool peer_gone = false;  // a collective failed because a member is gone, not at a deadline
};

NRT_STATUS Runtime::RunJob(Job& job) {
  nrt_model_t& m = *job.model;
  CoreScheduler& c = core(m.vnc);
  c.interrupt().Reset();  // before the checks: a reset or close after this point still aborts
  if (c.closing()) return NRT_CLOSED;
  const CoreLocation loc = Loc(m.vnc);
  const int64_t start = std::max(clock_->NowNs(), c.free_at_ns);
  if (const NRT_STATUS refused = RefuseJob(job, start); refused != NRT_SUCCESS) return refused;
  std::optional<sim::PendingFault> fault;
  if (faults_->MayHaveFault(loc.device)) fault = faults_->TakeFault(loc.device, loc.device_core);
  const bool profiling = profiler_.Wants(m.id);
  const int64_t deadline = start + exec_timeout_ns_;
  JobTimeline run;
  run.t = start;
  RunOps(job, profiling, SteadyNowNs() + exec_timeout_ns_, &run);
  if (run.status == NRT_SUCCESS && m.program->has_data) {
    ComputeDataOps(*m.program, job.inputs, job.outputs);
  }
  if (run.status == NRT_SUCCESS && fault) {
    run.status = FaultStatus(fault->kind);
    if (fault->kind == sim::FaultKind::kSdc) CorruptOutput(job.outputs);
    if (fault->kind == sim::FaultKind::kHang) run.t = deadline;
  }
  if (run.status == NRT_SUCCESS && run.t > deadline) {
    run.status = NRT_TIMEOUT;
    run.t = deadline;
  }
  // Stuck in a collective (at time t) until the timeout, unless a member is known gone: its
  // peers learn that when it happens (the connection ends), so they fail then.
  if (run.status == NRT_EXEC_HW_ERR_COLLECTIVES && run.peer_gone) {
    const int64_t now = std::min(deadline, std::max(run.t, clock_->NowNs()));
    run.cc_ns += now - run.t;
    run.t = now;
  } else if (run.status == NRT_EXEC_HW_ERR_COLLECTIVES) {
    run.cc_ns += std::max<int64_t>(0, deadline - run.t);
    run.t = deadline;
  }
  // A short execution does not sleep on its own: the core runs ahead of the wall clock by up to
  // kRunAheadNs and the execution that passes it sleeps until its end, so one sleep and wake-up
  // serves many small executions (each still starts at its predecessor's simulated end).
  const bool sleep = clock_->instant() || run.t - clock_->NowNs() > kRunAheadNs;
  if (sleep ? !clock_->SleepUntil(run.t, c.interrupt()) : c.interrupt().fired()) {
    run.status = c.closing() ? NRT_CLOSED : NRT_HW_ERROR;
    run.t = std::max(start, std::min(run.t, clock_->NowNs()));
  }
  c.free_at_ns = run.t;
  if (run.status == NRT_CLOSED) return run.status;
  RecordJob(job, start, &run, profiling);
  if (run.status != NRT_SUCCESS) ReportJobFailure(m, run.status, fault);
  return run.status;
}

NRT_STATUS Runtime::RefuseJob(const Job& job, int64_t start) {
  const nrt_model_t& m = *job.model;
  const CoreLocation loc = Loc(m.vnc);
  NRT_STATUS status = NRT_SUCCESS;
  if (!faults_->DeviceReady(loc.device)) {
    status = NRT_HW_ERROR;
  } else if (core(m.vnc).faulted.load(std::memory_order_acquire)) {
    status = NRT_EXEC_UNIT_UNRECOVERABLE;
  }
  if (status == NRT_SUCCESS) return status;
  ExecOutcome o;
  o.executions = static_cast<uint32_t>(job.repeat);
  o.status = status;
  o.total_ns = start - job.submit_ns;
  accounting_->RecordExecution(m.vnc, o);
  Log()->error("nrt_execute NeuronCore {} (nd{} nc{}): {}", m.vnc, loc.device, loc.device_core,
               Describe(status));
  return status;
}

void Runtime::RunOps(Job& job, bool profiling, int64_t real_deadline, JobTimeline* run) {
  nrt_model_t& m = *job.model;
  // The fast path: nothing to do per op but add up the time (no system call at all).
  if (!profiling && !m.program->has_collectives) {
    run->t += m.compute_ns * job.repeat;
    return;
  }
  const int global_core = Loc(m.vnc).global;
  for (int rep = 0; rep < job.repeat && run->status == NRT_SUCCESS; ++rep) {
    run->t += kLaunchNs;
    for (LoadedOp& op : m.ops) {
      if (op.op->engine == Engine::kCollectives) {
        run->status = RunCollective(job, op, real_deadline, profiling, run);
        if (run->status != NRT_SUCCESS) break;
        continue;
      }
      if (profiling) {
        run->spans.push_back({m.vnc, global_core, op.op->engine, op.op->name, run->t, op.ns, m.id});
        // The DMA queues feed the compute engine at the same time: their own track.
        if (op.op->engine != Engine::kDma && op.dma_ns > 0) {
          run->spans.push_back(
              {m.vnc, global_core, Engine::kDma, op.op->name, run->t, op.dma_ns, m.id});
        }
      }
      run->t += op.ns;
    }
  }
}

void Runtime::RecordJob(const Job& job, int64_t start, JobTimeline* run, bool profiling) {
  const nrt_model_t& m = *job.model;
  ExecOutcome o;
  o.executions = static_cast<uint32_t>(job.repeat);
  o.status = run->status;
  o.busy_ns = run->t - start;
  o.cc_ns = run->cc_ns;
  o.device_ns = run->t - start;
  o.total_ns = run->t - job.submit_ns;
  o.macs = m.macs * job.repeat;
  for (int i = 0; i < m.ncores; ++i) accounting_->RecordExecution(m.vnc + i, o);
  if (profiling) profiler_.Record(std::move(run->spans));
  if (run->status == NRT_SUCCESS && job.outputs != nullptr) {
    for (auto& [name, tensor] : job.outputs->items) {
      tensor->completions.fetch_add(1, std::memory_order_release);
    }
  }
}

void Runtime::ReportJobFailure(const nrt_model_t& m, NRT_STATUS status,
                               const std::optional<sim::PendingFault>& fault) {
  const CoreLocation loc = Loc(m.vnc);
  if (fault && (status == NRT_EXEC_HW_ERR_HBM_UE || status == NRT_EXEC_HW_ERR_NC_UE ||
                status == NRT_EXEC_HW_ERR_DMA_ABORT)) {
    core(m.vnc).faulted.store(true, std::memory_order_release);  // until the device is reset
    ReportHwError(m.vnc, FaultToken(fault->kind));
  }
  if (status == NRT_EXEC_HW_ERR_COLLECTIVES) RecordHangOnCollectives(m.vnc);
  if (status == NRT_TIMEOUT) {
    Log()->error(
        "nrt_execute execution timeout ({} ms) on NeuronCore {} (nd{} nc{}), waiting "
        "for execution completion notification",
        exec_timeout_ns_ / 1'000'000, m.vnc, loc.device, loc.device_core);
  } else {
    Log()->error("nrt_execute NeuronCore {} (nd{} nc{}) model \"{}\": {} ({})", m.vnc, loc.device,
                 loc.device_core, m.name, Describe(status), static_cast<int>(status));
  }
}

void Runtime::RecordHangOnCollectives(int vnc) {
  CoreScheduler& c = core(vnc);
  const int64_t now = SteadyNowNs();
  if (now - c.last_hang_record_ns < kHangRecordIntervalNs) return;
  c.last_hang_record_ns = now;
  ReportHwError(vnc, "HANG_ON_COLLECTIVES");
}

void Runtime::LogCollectiveFailure(const nrt_model_t& m, const LoadedOp& op,
                                   const CommWorld::Result& r) const {
  std::vector<uint32_t> missing(r.missing.begin(),
                                r.missing.begin() + std::min<size_t>(r.missing.size(), 16));
  Log()->error(
      "nrt_execute collective \"{}\" of rank {} (timeout {} ms): rank(s) {}{} never arrived ({})",
      op.op->name, m.rank, exec_timeout_ns_ / 1'000'000, fmt::join(missing, ","),
      r.missing.size() > missing.size() ? ",..." : "", r.why);
}

bool Runtime::EfaDown(const nrt_model_t& m, const LoadedOp& op) const {
  const int efa = node_.NearestEfa(Loc(m.vnc).device);
  if (faults_->EfaUp(efa)) return false;
  Log()->error(
      "nrt_execute collective \"{}\" of rank {} leaves the node through EFA {}, which is down",
      op.op->name, m.rank, node_.spec().efas[static_cast<size_t>(efa)].name);
  return true;
}

void Runtime::ComputeRing(LoadedOp& op, const CommWorld::Result& r) const {
  const Op& o = *op.op;
  // The ring within the node runs over the members on this rank's node, in group order; the
  // nodes of the group (and any the op models) meet over EFA (docs/hardware.md#collective-timing).
  std::vector<int> devices;
  std::vector<int32_t> nodes;
  for (const MemberInfo& m : r.members) {
    if (m.node == r.my_node) devices.push_back(m.device);
    if (std::find(nodes.begin(), nodes.end(), m.node) == nodes.end()) nodes.push_back(m.node);
  }
  const size_t n = std::max<size_t>(devices.size(), 1);
  const uint64_t node_count = NodesOf(o, n) * std::max<size_t>(nodes.size(), 1);
  op.crosses_efa = node_count > 1;
  op.ring_ranks = uint64_t{n} * node_count;
  op.links.clear();
  for (size_t i = 0; i < devices.size(); ++i) {
    const int a = devices[i];
    const int b = devices[(i + 1) % devices.size()];
    if (a == b || a < 0 || b < 0) continue;
    const std::vector<int> route = node_.Route(a, b);
    for (size_t k = 0; k + 1 < route.size(); ++k) {
      op.links.emplace_back(std::min(route[k], route[k + 1]), std::max(route[k], route[k + 1]));
    }
  }
  const CollectiveCost cost = CostCollective(o.coll, o.bytes, n, node_count, PathFor(node_));
  op.ring_ns = cost.ns;
  op.wire_bytes = cost.efa_bytes;
  op.ring_known = true;
}

NRT_STATUS Runtime::RunCollective(const Job& job, LoadedOp& op, int64_t real_deadline,
                                  bool profiling, JobTimeline* run) {
  nrt_model_t& m = *job.model;
  CoreScheduler& c = core(m.vnc);
  const int64_t arrive = run->t;
  // A collective known to leave the node cannot start while the rank's EFA is down: the rank
  // never arrives and is stuck until its timeout (1200), and its peers wait for it until theirs,
  // as a hang on collectives goes on hardware (docs/runtime.md#collectives).
  if (op.ring_known && op.crosses_efa && EfaDown(m, op)) return NRT_EXEC_HW_ERR_COLLECTIVES;
  std::optional<CommWorld::Contribution> mine;
  nrt_tensor_t* out = nullptr;
  if (!op.op->input.empty()) {
    const nrt_tensor_t* in = job.inputs->Find(op.op->input.c_str());
    out = job.outputs != nullptr ? job.outputs->Find(op.op->output.c_str()) : nullptr;
    mine = CommWorld::Contribution{
        op.op->coll == CollKind::kAllGather ? Combine::kGather : Combine::kSum, op.op->data_dtype,
        TensorBytes(in), in->size};
  }
  const CommWorld::Result r = m.world->Arrive(m.rank, op.members, arrive, real_deadline,
                                              &c.interrupt(), mine ? &*mine : nullptr);
  if (!r.complete) {
    if (!c.interrupt().fired()) LogCollectiveFailure(m, op, r);
    run->peer_gone = !r.timed_out;
    return NRT_EXEC_HW_ERR_COLLECTIVES;
  }
  if (out != nullptr && r.data) {
    std::memcpy(TensorBytes(out), r.data->data(), std::min(out->size, r.data->size()));
  }
  if (!op.ring_known) ComputeRing(op, r);
  if (op.crosses_efa && EfaDown(m, op)) return NRT_EXEC_HW_ERR_COLLECTIVES;
  if (faults_->AnyLinkDown() && !op.links.empty()) {
    for (const auto& down : faults_->DownLinks()) {
      if (std::find(op.links.begin(), op.links.end(), down) != op.links.end()) {
        Log()->error(
            "nrt_execute collective \"{}\" of rank {} crosses the NeuronLink between "
            "devices {} and {}, which is down",
            op.op->name, m.rank, down.first, down.second);
        return NRT_EXEC_HW_ERR_COLLECTIVES;
      }
    }
  }
  const int64_t begin = std::max(arrive, r.start_ns);
  const int64_t end = begin + op.ring_ns;
  if (profiling) {
    run->spans.push_back({m.vnc, Loc(m.vnc).global, Engine::kCollectives,
                          fmt::format("{} ({})", op.op->name, CollKindName(op.op->coll)), arrive,
                          end - arrive, m.id});
  }
  run->cc_ns += end - arrive;
  run->t = end;
  if (op.crosses_efa) {
    const auto wire = static_cast<uint64_t>(op.wire_bytes);
    accounting_->AddEfaTraffic(m.vnc, wire, wire);
  }
  return NRT_SUCCESS;
}

}  // namespace neuron::nrt

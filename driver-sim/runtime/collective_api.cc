// nrt_barrier and nrt_all_gather (docs/runtime.md#public-functions, NRTX): host-driven collectives
// over every rank of the world keyed by NEURON_RT_ROOT_COMM_ID, in the same worlds as the
// NEFFs' collectives. They hold the core like an execution and count as busy and collective time.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "driver-sim/runtime/timing.h"

namespace neuron::nrt {

// One nrt_barrier (output == nullptr) or nrt_all_gather call.
struct HostCollectiveCall {
  const char* what;
  int32_t vnc;
  uint32_t rank;
  uint32_t world;
  uint32_t bytes;
  const void* input;
  void* output;
  std::vector<uint32_t> members;  // every rank of the world
};

namespace {

NRT_STATUS Invalid(const HostCollectiveCall& call, std::string msg) {
  Log()->error("{} {}", call.what, msg);
  SetLastError(std::move(msg));
  return NRT_INVALID;
}

}  // namespace

NRT_STATUS Runtime::HostCollective(int32_t vnc, uint32_t rank, uint32_t world, uint32_t bytes,
                                   const void* input, void* output) {
  HostCollectiveCall call{output == nullptr ? "nrt_barrier" : "nrt_all_gather",
                          vnc,
                          rank,
                          world,
                          bytes,
                          input,
                          output,
                          {}};
  if (vnc < 0 || vnc >= range_.count) {
    return Invalid(call,
                   fmt::format("NeuronCore {} is not one of the {} visible", vnc, range_.count));
  }
  if (world == 0 || rank >= world) {
    return Invalid(call, fmt::format("rank {} is outside a world of {}", rank, world));
  }
  if (comm_id_.empty()) return Invalid(call, "NEURON_RT_ROOT_COMM_ID must be set for collectives");
  if (output != nullptr && bytes > 0 && input == nullptr) return Invalid(call, "NULL input buffer");
  if (output != nullptr && bytes > kMaxRankDataBytes) {
    return Invalid(
        call, fmt::format("{} bytes per rank; a rank brings at most {}", bytes, kMaxRankDataBytes));
  }
  absl::StatusOr<std::shared_ptr<CommWorld>> w = HostWorld(vnc, rank, world);
  if (!w.ok()) return Invalid(call, std::string{w.status().message()});
  call.members.resize(world);
  for (uint32_t r = 0; r < world; ++r) call.members[r] = r;
  const std::function<NRT_STATUS()> fn = [&]() { return RunHostCollective(call, **w); };
  return core(vnc).RunExclusive(fn);
}

absl::StatusOr<std::shared_ptr<CommWorld>> Runtime::HostWorld(int32_t vnc, uint32_t rank,
                                                              uint32_t world) {
  std::lock_guard<std::mutex> lock(host_mu_);
  auto& slot = host_worlds_[{world, rank}];
  if (!slot) {
    absl::StatusOr<std::shared_ptr<CommWorld>> got =
        GetCommWorld(comm_id_, world, node_.info().instance_id);
    absl::Status joined = got.ok() ? (*got)->Join(rank, Loc(vnc).device) : got.status();
    if (!joined.ok()) {
      host_worlds_.erase({world, rank});
      return joined;
    }
    slot = *got;
  }
  return slot;
}

NRT_STATUS Runtime::RunHostCollective(const HostCollectiveCall& call, CommWorld& w) {
  CoreScheduler& c = core(call.vnc);
  c.interrupt().Reset();
  if (c.closing()) return NRT_CLOSED;
  const int64_t start = std::max(clock_->NowNs(), c.free_at_ns);
  int64_t t = start;
  CommWorld::Result met;
  NRT_STATUS status = NRT_SUCCESS;
  if (!ExchangeHostCollective(call, w, SteadyClock().NowNs() + exec_timeout_ns_, &t, &met)) {
    status = NRT_EXEC_HW_ERR_COLLECTIVES;
    // At the timeout, or when a member turned out to be gone (as RunJob ends an execution).
    t = met.timed_out ? start + exec_timeout_ns_ : std::max(start, clock_->NowNs());
  } else {
    LoadedOp op;
    Op spec;
    spec.coll = call.output == nullptr ? CollKind::kAllReduce : CollKind::kAllGather;
    spec.bytes = call.output == nullptr ? 4.0 : static_cast<double>(call.bytes) * call.world;
    op.op = &spec;
    op.members = call.members;
    ComputeRing(op, met);
    t += op.ring_ns;
  }
  if (!clock_->SleepUntil(t, c.interrupt())) {
    status = c.closing() ? NRT_CLOSED : NRT_HW_ERROR;
    t = std::max(start, std::min(t, clock_->NowNs()));
  }
  c.free_at_ns = t;
  accounting_->AddBusy(call.vnc, t - start, t - start);
  if (status == NRT_EXEC_HW_ERR_COLLECTIVES) {
    Log()->error("{} rank {} of {}: rank(s) {} never arrived ({})", call.what, call.rank,
                 call.world, fmt::join(met.missing, ","), met.why);
    RecordHangOnCollectives(call.vnc);
  }
  return status;
}

bool Runtime::ExchangeHostCollective(const HostCollectiveCall& call, CommWorld& w,
                                     int64_t real_deadline, int64_t* t, CommWorld::Result* met) {
  CoreScheduler& c = core(call.vnc);
  // An all-gather's parts travel with the arrivals; rank 0's process (or this one, for a group
  // inside it) returns them side by side in rank order.
  std::optional<CommWorld::Contribution> mine;
  if (call.output != nullptr && call.bytes > 0) {
    mine = CommWorld::Contribution{Combine::kGather, NRT_DTYPE_UINT8,
                                   static_cast<const uint8_t*>(call.input), call.bytes};
  }
  *met =
      w.Arrive(call.rank, call.members, *t, real_deadline, &c.interrupt(), mine ? &*mine : nullptr);
  if (!met->complete) return false;
  *t = std::max(*t, met->start_ns);
  if (mine && met->data) {
    std::memcpy(call.output, met->data->data(),
                std::min<size_t>(met->data->size(), size_t{call.bytes} * call.world));
  }
  return true;
}

}  // namespace neuron::nrt

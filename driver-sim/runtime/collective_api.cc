// nrt_barrier and nrt_all_gather (docs/runtime.md#public-functions, NRTX): host-driven collectives
// over every rank of the world keyed by NEURON_RT_ROOT_COMM_ID, on the same rendezvous files as the
// NEFFs' collectives. They hold the core like an execution and count as busy and collective time.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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
  absl::StatusOr<std::shared_ptr<CommWorld>> w = HostWorld(vnc, rank, world);
  if (!w.ok()) return Invalid(call, std::string(w.status().message()));
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
    absl::StatusOr<std::shared_ptr<CommWorld>> got = GetCommWorld(node_.root(), comm_id_, world);
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
  std::vector<int> devices;
  NRT_STATUS status = NRT_SUCCESS;
  if (!ExchangeHostCollective(call, w, SteadyClock().NowNs() + exec_timeout_ns_, &t, &devices)) {
    status = NRT_EXEC_HW_ERR_COLLECTIVES;
    t = start + exec_timeout_ns_;
  } else {
    LoadedOp op;
    Op spec;
    spec.coll = call.output == nullptr ? CollKind::kAllReduce : CollKind::kAllGather;
    spec.bytes = call.output == nullptr ? 4.0 : double(call.bytes) * call.world;
    op.op = &spec;
    op.members = call.members;
    ComputeRing(op, devices);
    t += op.ring_ns;
  }
  if (!clock_->SleepUntil(t, c.interrupt())) {
    status = c.closing() ? NRT_CLOSED : NRT_HW_ERROR;
    t = std::max(start, std::min(t, clock_->NowNs()));
  }
  c.free_at_ns = t;
  accounting_->AddBusy(call.vnc, t - start, t - start);
  if (status == NRT_EXEC_HW_ERR_COLLECTIVES) {
    Log()->error("{} rank {} of {}: a peer did not arrive within {} ms", call.what, call.rank,
                 call.world, exec_timeout_ns_ / 1'000'000);
    RecordHangOnCollectives(call.vnc);
  }
  return status;
}

bool Runtime::ExchangeHostCollective(const HostCollectiveCall& call, CommWorld& w,
                                     int64_t real_deadline, int64_t* t, std::vector<int>* devices) {
  CoreScheduler& c = core(call.vnc);
  auto arrive = [&]() {
    CommWorld::Result r = w.Arrive(call.rank, call.members, *t, real_deadline, &c.interrupt());
    if (r.complete) {
      *t = std::max(*t, r.start_ns);
      *devices = r.devices;
    }
    return r.complete;
  };
  if (call.output == nullptr || call.bytes == 0) return arrive();
  // All-gather in chunks of the exchange area: write, meet, read, meet again (so nobody
  // overwrites a chunk before every rank has read it).
  bool ok = true;
  for (size_t off = 0; ok && off < call.bytes; off += kRankDataBytes) {
    const size_t n = std::min<size_t>(kRankDataBytes, call.bytes - off);
    std::memcpy(w.Data(call.rank), static_cast<const uint8_t*>(call.input) + off, n);
    ok = arrive();
    for (uint32_t r = 0; ok && r < call.world; ++r) {
      std::memcpy(static_cast<uint8_t*>(call.output) + size_t{r} * call.bytes + off, w.Data(r), n);
    }
    ok = ok && arrive();
  }
  return ok;
}

}  // namespace neuron::nrt

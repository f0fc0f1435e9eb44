// nrt_barrier and nrt_all_gather (RUNTIME.md §1, NRTX): host-driven collectives over every rank
// of the world keyed by NEURON_RT_ROOT_COMM_ID, on the same rendezvous files as the NEFFs'
// collectives. They hold the core like an execution and count as busy and collective time.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/runtime.h"
#include "driver-sim/runtime/timing.h"

namespace neuron::nrt {

NRT_STATUS Runtime::HostCollective(int32_t vnc, uint32_t rank, uint32_t world, uint32_t bytes,
                                   const void* input, void* output) {
  const char* what = output == nullptr ? "nrt_barrier" : "nrt_all_gather";
  auto invalid = [&](std::string msg) {
    Log()->error("{} {}", what, msg);
    SetLastError(std::move(msg));
    return NRT_INVALID;
  };
  if (vnc < 0 || vnc >= range_.count) {
    return invalid(fmt::format("NeuronCore {} is not one of the {} visible", vnc, range_.count));
  }
  if (world == 0 || rank >= world) {
    return invalid(fmt::format("rank {} is outside a world of {}", rank, world));
  }
  if (comm_id_.empty()) return invalid("NEURON_RT_ROOT_COMM_ID must be set for collectives");
  if (output != nullptr && bytes > 0 && input == nullptr) return invalid("NULL input buffer");
  std::shared_ptr<CommWorld> w;
  {
    std::lock_guard<std::mutex> lock(host_mu_);
    auto& slot = host_worlds_[{world, rank}];
    if (!slot) {
      absl::StatusOr<std::shared_ptr<CommWorld>> got = GetCommWorld(node_.root(), comm_id_, world);
      absl::Status joined = got.ok() ? (*got)->Join(rank, Loc(vnc).device) : got.status();
      if (!joined.ok()) {
        host_worlds_.erase({world, rank});
        return invalid(std::string(joined.message()));
      }
      slot = *got;
    }
    w = slot;
  }
  std::vector<uint32_t> members(world);
  for (uint32_t r = 0; r < world; ++r) members[r] = r;
  CoreScheduler& c = core(vnc);
  const std::function<NRT_STATUS()> fn = [&]() -> NRT_STATUS {
    c.interrupt().Reset();
    if (c.closing()) return NRT_CLOSED;
    const int64_t start = std::max(clock_->NowNs(), c.free_at_ns);
    const int64_t real_deadline = SteadyClock().NowNs() + exec_timeout_ns_;
    int64_t t = start;
    std::vector<int> devices;
    auto arrive = [&]() {
      CommWorld::Result r = w->Arrive(rank, members, t, real_deadline, &c.interrupt());
      if (r.complete) {
        t = std::max(t, r.start_ns);
        devices = r.devices;
      }
      return r.complete;
    };
    bool ok = true;
    if (output == nullptr || bytes == 0) {
      ok = arrive();
    } else {
      // All-gather in chunks of the exchange area: write, meet, read, meet again (so nobody
      // overwrites a chunk before every rank has read it).
      for (size_t off = 0; ok && off < bytes; off += kRankDataBytes) {
        const size_t n = std::min<size_t>(kRankDataBytes, bytes - off);
        std::memcpy(w->Data(rank), static_cast<const uint8_t*>(input) + off, n);
        ok = arrive();
        for (uint32_t r = 0; ok && r < world; ++r) {
          std::memcpy(static_cast<uint8_t*>(output) + size_t{r} * bytes + off, w->Data(r), n);
        }
        ok = ok && arrive();
      }
    }
    NRT_STATUS status = NRT_SUCCESS;
    if (!ok) {
      status = NRT_EXEC_HW_ERR_COLLECTIVES;
      t = start + exec_timeout_ns_;
    } else {
      LoadedOp op;
      Op spec;
      spec.coll = output == nullptr ? CollKind::kAllReduce : CollKind::kAllGather;
      spec.bytes = output == nullptr ? 4.0 : double(bytes) * world;
      op.op = &spec;
      op.members = members;
      ComputeRing(op, devices);
      t += op.ring_ns;
    }
    if (!clock_->SleepUntil(t, c.interrupt())) {
      status = c.closing() ? NRT_CLOSED : NRT_HW_ERROR;
      t = std::max(start, std::min(t, clock_->NowNs()));
    }
    c.free_at_ns = t;
    accounting_->AddBusy(vnc, t - start, t - start);
    if (status == NRT_EXEC_HW_ERR_COLLECTIVES) {
      Log()->error("{} rank {} of {}: a peer did not arrive within {} ms", what, rank, world,
                   exec_timeout_ns_ / 1'000'000);
      RecordHangOnCollectives(vnc);
    }
    return status;
  };
  return c.RunExclusive(fn);
}

}  // namespace neuron::nrt

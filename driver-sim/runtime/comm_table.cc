#include "driver-sim/runtime/comm_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "nrt/nrt.h"

namespace neuron::nrt {
namespace {

// Failures kept for members that arrive after their group failed; older ones are forgotten (a
// member that late has long timed out itself).
constexpr size_t kFailuresKept = 4096;

template <typename T>
void SumInto(uint8_t* acc, const uint8_t* in, size_t bytes) {
  for (size_t off = 0; off + sizeof(T) <= bytes; off += sizeof(T)) {
    T a;
    T b;
    std::memcpy(&a, acc + off, sizeof(T));
    std::memcpy(&b, in + off, sizeof(T));
    a = static_cast<T>(a + b);
    std::memcpy(acc + off, &a, sizeof(T));
  }
}

// bfloat16 is the top half of a float32: widen, add, round to nearest even.
void SumBf16(uint8_t* acc, const uint8_t* in, size_t bytes) {
  for (size_t off = 0; off + 2 <= bytes; off += 2) {
    uint16_t a;
    uint16_t b;
    std::memcpy(&a, acc + off, 2);
    std::memcpy(&b, in + off, 2);
    const uint32_t wa = uint32_t{a} << 16;
    const uint32_t wb = uint32_t{b} << 16;
    float fa;
    float fb;
    std::memcpy(&fa, &wa, 4);
    std::memcpy(&fb, &wb, 4);
    const float sum = fa + fb;
    uint32_t bits;
    std::memcpy(&bits, &sum, 4);
    bits += 0x7fff + ((bits >> 16) & 1);
    const auto out = static_cast<uint16_t>(bits >> 16);
    std::memcpy(acc + off, &out, 2);
  }
}

void Sum(int dtype, uint8_t* acc, const uint8_t* in, size_t bytes) {
  switch (dtype) {
    case NRT_DTYPE_FLOAT32:
      return SumInto<float>(acc, in, bytes);
    case NRT_DTYPE_BFLOAT16:
      return SumBf16(acc, in, bytes);
    case NRT_DTYPE_INT32:
      return SumInto<int32_t>(acc, in, bytes);
    case NRT_DTYPE_UINT32:
      return SumInto<uint32_t>(acc, in, bytes);
    case NRT_DTYPE_INT64:
      return SumInto<int64_t>(acc, in, bytes);
    case NRT_DTYPE_UINT64:
      return SumInto<uint64_t>(acc, in, bytes);
    default:
      return;
  }
}

}  // namespace

bool CanSum(int dtype) {
  switch (dtype) {
    case NRT_DTYPE_FLOAT32:
    case NRT_DTYPE_BFLOAT16:
    case NRT_DTYPE_INT32:
    case NRT_DTYPE_UINT32:
    case NRT_DTYPE_INT64:
    case NRT_DTYPE_UINT64:
      return true;
    default:
      return false;
  }
}

void GroupTable::SetMember(uint32_t rank, MemberInfo info) {
  if (rank >= world_) return;
  info_[rank] = info;
  gone_[rank].reset();
}

std::vector<MemberInfo> GroupTable::InfoOf(const std::vector<uint32_t>& members) const {
  std::vector<MemberInfo> out;
  out.reserve(members.size());
  for (uint32_t m : members) out.push_back(m < world_ ? info_[m] : MemberInfo{});
  return out;
}

void GroupTable::MarkGone(uint32_t rank, std::string why, std::vector<Decided>* decided) {
  if (rank >= world_) return;
  gone_[rank] = std::move(why);
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    const auto pos = std::find(p.members.begin(), p.members.end(), rank);
    if (pos != p.members.end() && !p.arrived[pos - p.members.begin()]) {
      Decide(it->first, p, *gone_[rank], decided);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

void GroupTable::AddData(Pending& p, size_t index, const Arrival& a) {
  if (a.combine == Combine::kNone || !p.bad.empty()) return;
  if (p.count == 0) {
    p.combine = a.combine;
    p.dtype = a.dtype;
    p.chunk = a.data.size();
    p.data.assign(a.combine == Combine::kGather ? p.chunk * p.members.size() : p.chunk, 0);
  }
  if (a.combine != p.combine || a.dtype != p.dtype || a.data.size() != p.chunk) {
    p.bad = fmt::format("rank {} brought {} bytes of another kind than its group's {} bytes",
                        a.rank, a.data.size(), p.chunk);
    return;
  }
  if (p.combine == Combine::kGather) {
    std::copy(a.data.begin(), a.data.end(), p.data.begin() + index * p.chunk);
  } else if (p.count == 0) {
    std::copy(a.data.begin(), a.data.end(), p.data.begin());
  } else {
    Sum(p.dtype, p.data.data(), a.data.data(), p.chunk);
  }
}

void GroupTable::Arrive(const Arrival& a, std::vector<Decided>* decided) {
  const Id id{a.key, a.seq};
  if (auto f = failed_.find(id); f != failed_.end()) {
    decided->push_back({a.key, a.seq, a.members, f->second});
    return;
  }
  auto [it, fresh] = pending_.try_emplace(id);
  Pending& p = it->second;
  if (fresh) {
    p.members = a.members;
    p.arrived.assign(a.members.size(), false);
    p.start_ns = a.arrive_ns;
  }
  const auto pos = std::find(p.members.begin(), p.members.end(), a.rank);
  if (pos == p.members.end()) return;  // not a member: the caller checked; ignore
  if (a.members != p.members && p.bad.empty()) {
    p.bad = fmt::format("rank {} named other members for the same group", a.rank);
  }
  const auto index = static_cast<size_t>(pos - p.members.begin());
  if (p.arrived[index]) return;
  AddData(p, index, a);
  p.arrived[index] = true;
  ++p.count;
  p.start_ns = std::max(p.start_ns, a.arrive_ns);
  p.deadline_ns = std::min(p.deadline_ns, a.deadline_ns);
  std::string why;
  for (size_t i = 0; i < p.members.size() && why.empty(); ++i) {
    const uint32_t m = p.members[i];
    if (m >= world_) {
      why = fmt::format("rank {} is outside the world of {}", m, world_);
    } else if (!p.arrived[i] && gone_[m]) {
      why = *gone_[m];
    }
  }
  if (why.empty() && p.count < p.members.size()) return;
  Decide(id, p, std::move(why), decided);
  pending_.erase(it);
}

void GroupTable::Decide(const Id& id, Pending& p, std::string why, std::vector<Decided>* decided,
                        bool timed_out) {
  auto o = std::make_shared<Outcome>();
  o->timed_out = timed_out;
  o->start_ns = p.start_ns;
  o->members = InfoOf(p.members);
  if (why.empty() && !p.bad.empty()) why = p.bad;
  o->complete = why.empty();
  if (o->complete) {
    if (p.combine != Combine::kNone) {
      o->data = std::make_shared<const std::vector<uint8_t>>(std::move(p.data));
    }
  } else {
    for (size_t i = 0; i < p.members.size(); ++i) {
      if (!p.arrived[i]) o->missing.push_back(p.members[i]);
    }
    o->why = std::move(why);
    if (failed_.size() >= kFailuresKept) failed_.erase(failed_.begin());
    failed_[id] = o;
  }
  decided->push_back({id.first, id.second, std::move(p.members), std::move(o)});
}

void GroupTable::Expire(int64_t now_ns, std::vector<Decided>* decided) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = it->second;
    if (p.deadline_ns <= now_ns) {
      std::vector<uint32_t> late;
      for (size_t i = 0; i < p.members.size(); ++i) {
        if (!p.arrived[i]) late.push_back(p.members[i]);
      }
      Decide(it->first, p, fmt::format("rank(s) {} did not arrive in time", fmt::join(late, ",")),
             decided, /*timed_out=*/true);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t GroupTable::NextDeadline() const {
  int64_t next = INT64_MAX;
  for (const auto& [id, p] : pending_) next = std::min(next, p.deadline_ns);
  return next;
}

}  // namespace neuron::nrt

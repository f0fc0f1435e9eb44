#pragma once
// The bookkeeping of a collective world's meetings, without any transport: which ranks arrived at
// which collective, when the group is complete, and what each member brought (an all-reduce's
// tensors are summed, an all-gather's placed side by side). Rank 0's process keeps the table for
// every group that leaves a process; every process keeps one for its groups that stay inside it
// (driver-sim/README.md#collective-world). A group is decided once: complete when the last member
// arrives, failed when a member is known gone or when a waiter's deadline passes first.
//
// Thread-compatible: the owner (CommWorld) serialises every call.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace neuron::nrt {

// What a member brings to a collective besides its arrival.
enum class Combine : uint8_t { kNone = 0, kSum = 1, kGather = 2 };

// The element types a sum understands (nrt_dtype_t values, include/nrt/nrt.h).
bool CanSum(int dtype);

struct MemberInfo {
  int32_t node = -1;    // ordinal of the member's node in the world (order of first contact)
  int32_t device = -1;  // the member's Neuron device on that node
};

// The decision about one collective (group key, sequence number).
struct Outcome {
  bool complete = false;
  bool timed_out = false;           // failed because a deadline passed (not a member gone)
  int64_t start_ns = 0;             // the latest arrival (simulated time)
  std::vector<MemberInfo> members;  // in the group's member order
  std::vector<uint32_t> missing;    // members that did not arrive (failed)
  std::string why;                  // why it failed, for the log
  std::shared_ptr<const std::vector<uint8_t>> data;  // the combined data (complete, with data)
};

struct Arrival {
  uint32_t rank = 0;
  uint64_t key = 0;  // CommWorld::GroupKey(members)
  uint32_t seq = 0;  // the rank's how-manieth collective of this group (from 1)
  std::vector<uint32_t> members;
  int64_t arrive_ns = 0;
  int64_t deadline_ns = 0;  // steady clock of the table's process: fail the group then
  Combine combine = Combine::kNone;
  int dtype = 0;
  std::vector<uint8_t> data;
};

struct Decided {
  uint64_t key = 0;
  uint32_t seq = 0;
  std::vector<uint32_t> members;
  std::shared_ptr<const Outcome> outcome;
};

class GroupTable {
 public:
  explicit GroupTable(uint32_t world) : world_(world), info_(world), gone_(world) {}

  void SetMember(uint32_t rank, MemberInfo info);
  const MemberInfo& Member(uint32_t rank) const { return info_[rank]; }
  // The rank's owner is gone (its process exited or lost its connection) or it is back.
  void MarkGone(uint32_t rank, std::string why, std::vector<Decided>* decided);
  void MarkBack(uint32_t rank) { gone_[rank].reset(); }

  // Records the arrival; appends the group's decision when this arrival decides it (or when it
  // was already decided: a late member of a failed group learns so at once).
  void Arrive(const Arrival& a, std::vector<Decided>* decided);
  // Fails every group whose earliest waiter's deadline is at or before `now_ns`.
  void Expire(int64_t now_ns, std::vector<Decided>* decided);
  // The earliest deadline of an undecided group (INT64_MAX when none).
  int64_t NextDeadline() const;
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    std::vector<uint32_t> members;
    std::vector<bool> arrived;
    size_t count = 0;
    int64_t start_ns = 0;
    int64_t deadline_ns = INT64_MAX;
    Combine combine = Combine::kNone;
    int dtype = 0;
    size_t chunk = 0;  // bytes each member brings
    std::vector<uint8_t> data;
    std::string bad;  // a member's data did not fit the others'
  };
  using Id = std::pair<uint64_t, uint32_t>;

  void AddData(Pending& p, size_t index, const Arrival& a);
  void Decide(const Id& id, Pending& p, std::string why, std::vector<Decided>* decided,
              bool timed_out = false);
  std::vector<MemberInfo> InfoOf(const std::vector<uint32_t>& members) const;

  uint32_t world_;
  std::vector<MemberInfo> info_;
  std::vector<std::optional<std::string>> gone_;
  std::map<Id, Pending> pending_;
  std::map<Id, std::shared_ptr<const Outcome>> failed_;  // recent failures, for late members
};

}  // namespace neuron::nrt

#pragma once
// Gang scheduling of collectives across processes of one node (docs/runtime.md#collectives): a
// communicator world, keyed by NEURON_RT_ROOT_COMM_ID and its size, is one shared file
// ROOT/run/neuron/cc/<key>.w<world>, mapped by every process with a rank in it. Each rank owns a
// slot where it publishes, per replica group, how many collectives it has arrived at and the
// simulated time of the last two arrivals; peers wait on the slot's generation word with futex.
// driver-sim/README.md#collective-rendezvous-files documents the layout. The last process
// to leave removes the file.
//
// Thread-safety: CommWorld is thread-safe; each rank is driven by one thread at a time (the
// core executing it).

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "core/driver/sysfs_names.h"
#include "driver-sim/runtime/clock.h"

namespace neuron::nrt {

inline constexpr uint32_t kMaxWorldSize = 4096;
inline constexpr size_t kRankDataBytes = 64 * 1024;  // per-rank exchange area (all-gather)

class CommWorld {
 public:
  // Maps (creating if needed) the world's file. InvalidArgument for a world outside
  // 1..kMaxWorldSize or a file made for another world size.
  static absl::StatusOr<std::shared_ptr<CommWorld>> Attach(const RootPaths& root,
                                                           const std::string& comm_id,
                                                           uint32_t world);
  ~CommWorld();  // leaves every rank this process joined; removes the file if nobody is left
  CommWorld(const CommWorld&) = delete;
  CommWorld& operator=(const CommWorld&) = delete;

  uint32_t world() const { return world_; }
  const std::string& path() const { return path_; }

  // Claims rank's slot for this process (counted: a process may join a rank several times, e.g.
  // a model and nrt_barrier). InvalidArgument when a live process holds it.
  absl::Status Join(uint32_t rank, int device);
  void Leave(uint32_t rank);

  struct Result {
    bool complete = false;
    int64_t start_ns = 0;           // latest arrival of the group
    std::vector<int> devices;       // per member, in `members` order
    std::vector<uint32_t> missing;  // members that did not arrive (when !complete)
  };
  // Publishes rank's arrival at its next collective of the group `members` (all world ranks,
  // `rank` among them) at simulated time `arrive_ns`, then waits until every member arrived,
  // until the steady clock passes `deadline_ns`, or until `interrupt` fires.
  Result Arrive(uint32_t rank, const std::vector<uint32_t>& members, int64_t arrive_ns,
                int64_t deadline_ns, const Interrupt* interrupt);

  // Rank's exchange area, kRankDataBytes.
  uint8_t* Data(uint32_t rank) const;

  // The group key of a member list (never 0).
  static uint64_t GroupKey(const std::vector<uint32_t>& members);

 private:
  CommWorld(std::string path, UniqueFd fd, uint8_t* base, size_t size, uint32_t world)
      : path_(std::move(path)), fd_(std::move(fd)), base_(base), size_(size), world_(world) {}
  struct Slot;
  Slot* SlotOf(uint32_t rank) const;

  std::string path_;
  UniqueFd fd_;
  uint8_t* base_;
  size_t size_;
  uint32_t world_;
  std::mutex mu_;
  std::vector<int> joined_;  // per rank, how often this process joined it
};

// The process's CommWorld for (root, comm id, world), shared by every user in the process.
absl::StatusOr<std::shared_ptr<CommWorld>> GetCommWorld(const RootPaths& root,
                                                        const std::string& comm_id, uint32_t world);

}  // namespace neuron::nrt

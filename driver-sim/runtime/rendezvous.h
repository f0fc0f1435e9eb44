#pragma once
// A collective world (docs/runtime.md#collectives, driver-sim/README.md#collective-world): the
// ranks of every process that shares NEURON_RT_ROOT_COMM_ID (`host:port`) and the world size,
// whatever node or pod they run in. The process that joins rank 0 listens on host:port and keeps
// the world's table of meetings (GroupTable); every other process connects to it over TCP when
// one of its collectives has a member outside the process. A group whose members all live in
// one process meets inside it without the network. The collective starts at the latest member's
// arrival (simulated time) and carries what the members bring (an all-reduce's sum, an
// all-gather's concatenation). A member that stalls stalls the others until their deadline; a
// member whose process exits or loses its connection fails its groups at once.
//
// Thread-safety: CommWorld is thread-safe; each rank is driven by one thread at a time (the core
// executing it).

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "driver-sim/runtime/clock.h"
#include "driver-sim/runtime/comm_table.h"

namespace neuron::nrt {

inline constexpr uint32_t kMaxWorldSize = 4096;
// The most data one rank brings to a collective (an all-reduce's tensor, an all-gather's part).
inline constexpr size_t kMaxRankDataBytes = 16u << 20;

class CommWorld {
 public:
  // `comm_id` is NEURON_RT_ROOT_COMM_ID (`host:port`, host an IPv4 address or a name), `node`
  // names this process's node (its instance id) so the world can tell ranks of one node from
  // those of others. InvalidArgument for a malformed id or a world outside 1..kMaxWorldSize.
  static absl::StatusOr<std::shared_ptr<CommWorld>> Attach(const std::string& comm_id,
                                                           uint32_t world, std::string node);
  ~CommWorld();  // leaves every rank this process joined; rank 0's process flushes its answers
  CommWorld(const CommWorld&) = delete;
  CommWorld& operator=(const CommWorld&) = delete;

  uint32_t world() const { return world_; }
  const std::string& comm_id() const { return comm_id_; }

  // Claims `rank` for this process (counted: a model and nrt_barrier may join the same rank).
  // Joining rank 0 starts listening on the world's address: InvalidArgument when that fails
  // (another process holds rank 0, or the address is not this machine's), or when rank 0's
  // process already knows another owner of the rank.
  absl::Status Join(uint32_t rank, int device);
  void Leave(uint32_t rank);

  struct Contribution {
    Combine combine = Combine::kNone;
    int dtype = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
  };
  struct Result {
    bool complete = false;
    bool timed_out = false;           // failed at a deadline (else: a member is gone)
    int64_t start_ns = 0;             // latest arrival of the group
    std::vector<MemberInfo> members;  // per member, in `members` order
    int32_t my_node = -1;             // the node of the arriving rank (members' numbering)
    std::vector<uint32_t> missing;    // members that did not arrive (when !complete)
    std::string why;                  // why it failed (when !complete and not interrupted)
    std::shared_ptr<const std::vector<uint8_t>> data;  // the combined data, if any was brought
  };
  // Publishes rank's arrival at its next collective of the group `members` (world ranks, `rank`
  // among them) at simulated time `arrive_ns`, with `mine` (optional), then waits until every
  // member arrived, until the steady clock passes `deadline_ns`, until a member is known gone,
  // or until `interrupt` fires.
  Result Arrive(uint32_t rank, const std::vector<uint32_t>& members, int64_t arrive_ns,
                int64_t deadline_ns, const Interrupt* interrupt,
                const Contribution* mine = nullptr);

  // The group key of a member list (never 0).
  static uint64_t GroupKey(const std::vector<uint32_t>& members);

 private:
  using Id = std::pair<uint64_t, uint32_t>;  // group key, sequence number
  struct Delivery {
    std::shared_ptr<const Outcome> outcome;
    int waiting = 0;    // local members still to take it
    int64_t at_ns = 0;  // when it came (stale ones are dropped)
  };
  // A client of rank 0's process, seen from there.
  struct Conn {
    UniqueFd fd;
    std::string in;
    std::deque<std::vector<uint8_t>> out;
    size_t out_offset = 0;
    bool hello = false;
    bool closing = false;  // an error was queued: close once it is written
    uint32_t pid = 0;
    std::string node;
    int32_t node_ordinal = -1;
  };
  CommWorld(std::string comm_id, uint32_t world, std::string node);

  // rendezvous.cc: the meeting itself.
  bool AllLocal(const std::vector<uint32_t>& members) const;
  void Publish(const std::vector<Decided>& decided);  // mu_ held
  Result Wait(uint32_t rank, const Id& id, const std::vector<uint32_t>& members,
              int64_t deadline_ns, bool local, const Interrupt* interrupt,
              std::unique_lock<std::mutex>& lock);
  Result Failure(uint32_t rank, const std::vector<uint32_t>& members, std::vector<uint32_t> missing,
                 std::string why, bool timed_out = false) const;

  // comm_server.cc: rank 0's side.
  absl::Status StartServer();  // mu_ held
  void StopServer();
  void Serve();
  void AcceptAll();                                                   // mu_ held
  bool ReadFrom(int id, Conn& c);                                     // mu_ held; false: close it
  bool WriteTo(Conn& c);                                              // mu_ held; false: close it
  bool Handle(int id, Conn& c, uint8_t type, std::string_view body);  // mu_ held
  bool HandleJoin(int id, Conn& c, std::string_view body);            // mu_ held
  void Drop(int id, const std::string& why);                          // mu_ held
  void Send(int id, std::vector<uint8_t> frame);                      // mu_ held
  void Wake();

  // comm_client.cc: every other process's side.
  absl::Status Connect(int64_t deadline_ns, const Interrupt* interrupt);
  void StopClient();
  void Receive();
  void ClientFrame(uint8_t type, std::string_view body);  // mu_ held
  bool SendToServer(const std::vector<uint8_t>& frame);

  const std::string comm_id_;
  const uint32_t world_;
  const std::string node_;

  std::mutex mu_;
  std::condition_variable cv_;
  GroupTable table_;              // every group (rank 0's process) or local ones
  std::vector<int> joined_;       // per rank, how often this process joined it
  std::vector<int32_t> devices_;  // per rank joined here
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> seq_;  // (rank, group) → last sequence
  std::map<Id, Delivery> results_;
  std::map<uint32_t, std::string> refused_;  // ranks rank 0's process refused, and why

  // Rank 0's process.
  bool serving_ = false;
  bool stopping_ = false;
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;
  std::thread server_;
  std::map<int, Conn> conns_;
  int next_conn_ = 1;
  std::vector<int> owner_;  // per rank: 0 this process, a connection's id, -1 nobody
  std::map<std::string, int32_t> node_ordinals_;

  // Every other process.
  std::mutex connect_mu_;
  std::mutex send_mu_;
  UniqueFd client_fd_;
  std::thread client_;
  bool connected_ = false;
  std::optional<std::string> lost_;
};

// The process's CommWorld for (comm id, world), shared by every user in the process.
absl::StatusOr<std::shared_ptr<CommWorld>> GetCommWorld(const std::string& comm_id, uint32_t world,
                                                        const std::string& node);

}  // namespace neuron::nrt

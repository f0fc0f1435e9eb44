#include "driver-sim/runtime/rendezvous.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "driver-sim/runtime/comm_wire.h"

namespace neuron::nrt {
namespace {

constexpr int64_t kWaitSliceNs = 20'000'000;  // re-check interrupts this often
// How long past its deadline a rank waits for rank 0's process to say that its group failed
// (rank 0's process decides; this only covers a process that stopped answering).
constexpr int64_t kAnswerGraceNs = 2'000'000'000;
// Outcomes nobody took for this long (a member that gave up first) are dropped.
constexpr int64_t kStaleNs = 600'000'000'000;

}  // namespace

uint64_t CommWorld::GroupKey(const std::vector<uint32_t>& members) {
  std::vector<uint32_t> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  uint64_t h = 1469598103934665603ull;
  for (uint32_t r : sorted) {
    for (int i = 0; i < 4; ++i) {
      h ^= (r >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h | 1;
}

CommWorld::CommWorld(std::string comm_id, uint32_t world, std::string node)
    : comm_id_(std::move(comm_id)),
      world_(world),
      node_(std::move(node)),
      table_(world),
      joined_(world, 0),
      devices_(world, -1),
      owner_(world, -1) {}

absl::StatusOr<std::shared_ptr<CommWorld>> CommWorld::Attach(const std::string& comm_id,
                                                             uint32_t world, std::string node) {
  if (world == 0 || world > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        fmt::format("collective world size {} is outside 1-{}", world, kMaxWorldSize));
  }
  if (absl::StatusOr<sockaddr_in> addr = wire::ResolveCommId(comm_id); !addr.ok()) {
    return addr.status();
  }
  return std::shared_ptr<CommWorld>(new CommWorld(comm_id, world, std::move(node)));
}

CommWorld::~CommWorld() {
  StopServer();
  StopClient();
}

absl::Status CommWorld::Join(uint32_t rank, int device) {
  if (rank >= world_) {
    return absl::InvalidArgumentError(
        fmt::format("rank {} is outside the world of {} ranks", rank, world_));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (joined_[rank] > 0) {
    ++joined_[rank];
    return absl::OkStatus();
  }
  if (serving_ && owner_[rank] > 0) {
    const Conn& c = conns_[owner_[rank]];
    return absl::InvalidArgumentError(fmt::format(
        "rank {} of world {} is already used by pid {} on {}", rank, comm_id_, c.pid, c.node));
  }
  if (rank == 0 && !serving_) {
    if (absl::Status s = StartServer(); !s.ok()) return s;
  }
  ++joined_[rank];
  devices_[rank] = device;
  // This process's ranks are node 0 of its own table; rank 0's process numbers the others.
  table_.SetMember(rank, {0, device});
  refused_.erase(rank);
  if (serving_) owner_[rank] = 0;
  if (connected_) SendToServer(wire::EncodeRank(wire::Type::kJoin, rank, device));
  return absl::OkStatus();
}

void CommWorld::Leave(uint32_t rank) {
  if (rank >= world_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (joined_[rank] == 0 || --joined_[rank] > 0) return;
  std::vector<Decided> decided;
  table_.MarkGone(rank, fmt::format("rank {} left the world", rank), &decided);
  if (serving_ && owner_[rank] == 0) owner_[rank] = -1;
  if (connected_) SendToServer(wire::EncodeRank(wire::Type::kLeave, rank, devices_[rank]));
  Publish(decided);
}

bool CommWorld::AllLocal(const std::vector<uint32_t>& members) const {
  return std::all_of(members.begin(), members.end(),
                     [this](uint32_t m) { return m < world_ && joined_[m] > 0; });
}

void CommWorld::Publish(const std::vector<Decided>& decided) {
  if (decided.empty()) return;
  const int64_t now = SteadyNowNs();
  for (auto it = results_.begin(); it != results_.end();) {
    it = now - it->second.at_ns > kStaleNs ? results_.erase(it) : std::next(it);
  }
  for (const Decided& d : decided) {
    int local = 0;
    std::vector<int> conns;
    for (uint32_t m : d.members) {
      if (m >= world_) continue;
      if (joined_[m] > 0) ++local;
      if (serving_ && owner_[m] > 0 &&
          std::find(conns.begin(), conns.end(), owner_[m]) == conns.end()) {
        conns.push_back(owner_[m]);
      }
    }
    for (int id : conns) Send(id, wire::EncodeDone(d));
    if (local > 0) results_[{d.key, d.seq}] = {d.outcome, local, now};
  }
  cv_.notify_all();
}

CommWorld::Result CommWorld::Failure(uint32_t rank, const std::vector<uint32_t>& members,
                                     std::vector<uint32_t> missing, std::string why,
                                     bool timed_out) const {
  Result r;
  r.timed_out = timed_out;
  r.missing = std::move(missing);
  if (r.missing.empty()) {
    for (uint32_t m : members) {
      if (m != rank) r.missing.push_back(m);
    }
  }
  r.why = std::move(why);
  return r;
}

CommWorld::Result CommWorld::Arrive(uint32_t rank, const std::vector<uint32_t>& members,
                                    int64_t arrive_ns, int64_t deadline_ns,
                                    const Interrupt* interrupt, const Contribution* mine) {
  Arrival a;
  a.rank = rank;
  a.key = GroupKey(members);
  a.members = members;
  a.arrive_ns = arrive_ns;
  a.deadline_ns = deadline_ns;
  if (mine != nullptr && mine->combine != Combine::kNone) {
    a.combine = mine->combine;
    a.dtype = mine->dtype;
    a.data.assign(mine->data, mine->data + mine->size);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (auto r = refused_.find(rank); r != refused_.end()) {
    return Failure(rank, members, {}, r->second);
  }
  a.seq = ++seq_[{rank, a.key}];
  const Id id{a.key, a.seq};
  const bool local = serving_ || AllLocal(members);
  if (local) {
    std::vector<Decided> decided;
    table_.Arrive(a, &decided);
    Publish(decided);
    return Wait(rank, id, members, deadline_ns, true, interrupt, lock);
  }
  lock.unlock();
  absl::Status up = Connect(deadline_ns, interrupt);
  const std::vector<uint8_t> frame = wire::EncodeArrive(a, deadline_ns - SteadyNowNs());
  if (up.ok() && !SendToServer(frame)) {
    up = absl::UnavailableError(
        fmt::format("lost the connection to rank 0's process at {}", comm_id_));
  }
  lock.lock();
  if (!up.ok()) {
    if (interrupt != nullptr && interrupt->fired()) return Result{};
    return Failure(rank, members, {}, std::string{up.message()}, SteadyNowNs() >= deadline_ns);
  }
  return Wait(rank, id, members, deadline_ns, false, interrupt, lock);
}

CommWorld::Result CommWorld::Wait(uint32_t rank, const Id& id, const std::vector<uint32_t>& members,
                                  int64_t deadline_ns, bool local, const Interrupt* interrupt,
                                  std::unique_lock<std::mutex>& lock) {
  while (true) {
    if (auto it = results_.find(id); it != results_.end()) {
      const std::shared_ptr<const Outcome> o = it->second.outcome;
      if (--it->second.waiting <= 0) results_.erase(it);
      Result r;
      r.complete = o->complete;
      r.timed_out = o->timed_out;
      r.start_ns = o->start_ns;
      r.members = o->members;
      r.missing = o->missing;
      r.why = o->why;
      r.data = o->data;
      const auto self = std::find(members.begin(), members.end(), rank);
      if (self != members.end() && static_cast<size_t>(self - members.begin()) < r.members.size()) {
        r.my_node = r.members[self - members.begin()].node;
      }
      return r;
    }
    if (interrupt != nullptr && interrupt->fired()) return Result{};
    if (!local && lost_) return Failure(rank, members, {0}, *lost_);
    const int64_t now = SteadyNowNs();
    if (local && now >= deadline_ns) {
      std::vector<Decided> decided;
      table_.Expire(now, &decided);
      Publish(decided);
      if (results_.count(id) == 0) return Failure(rank, members, {}, "timed out", true);
      continue;
    }
    if (!local && now >= deadline_ns + kAnswerGraceNs) {
      return Failure(rank, members, {},
                     fmt::format("no answer from rank 0's process at {}", comm_id_));
    }
    const int64_t until = local ? deadline_ns : deadline_ns + kAnswerGraceNs;
    cv_.wait_for(lock, std::chrono::nanoseconds(std::min(until - now, kWaitSliceNs)));
  }
}

absl::StatusOr<std::shared_ptr<CommWorld>> GetCommWorld(const std::string& comm_id, uint32_t world,
                                                        const std::string& node) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<CommWorld>> worlds;
  const std::string key = fmt::format("{}|{}", comm_id, world);
  std::lock_guard<std::mutex> lock(mu);
  if (std::shared_ptr<CommWorld> w = worlds[key].lock()) return w;
  absl::StatusOr<std::shared_ptr<CommWorld>> w = CommWorld::Attach(comm_id, world, node);
  if (w.ok()) worlds[key] = *w;
  return w;
}

}  // namespace neuron::nrt

// Rank 0's side of a collective world (rendezvous.h): it listens on NEURON_RT_ROOT_COMM_ID,
// accepts one connection per process that has ranks elsewhere, and keeps the table of every
// group that leaves a process. One thread polls the listening socket, the connections and a
// wake-up eventfd; frames are handled under the world's mutex, answers are queued per
// connection and written when the socket takes them, so no peer can block another.
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "driver-sim/runtime/comm_wire.h"
#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/rendezvous.h"

namespace neuron::nrt {
namespace {

constexpr int kPollSliceMs = 50;
constexpr size_t kReadChunk = 1 << 20;
constexpr int64_t kFlushNs = 2'000'000'000;  // how long a closing rank 0 flushes its answers

}  // namespace

absl::Status CommWorld::StartServer() {
  absl::StatusOr<sockaddr_in> addr = wire::ResolveCommId(comm_id_);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (!fd || ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "rank 0 cannot listen on NEURON_RT_ROOT_COMM_ID {}: {}", comm_id_, strerror(errno)));
  }
  wake_fd_ = UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  listen_fd_ = std::move(fd);
  serving_ = true;
  node_ordinals_[node_] = 0;
  for (uint32_t r = 0; r < world_; ++r) {
    if (joined_[r] > 0) owner_[r] = 0;
  }
  server_ = std::thread([this] { Serve(); });
  return absl::OkStatus();
}

void CommWorld::StopServer() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!serving_) return;
    // Answers already decided still reach their ranks: the thread writes until the queues are
    // empty (or the flush time is up), then ends.
    stopping_ = true;
  }
  Wake();
  server_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : conns_) ::shutdown(c.fd.get(), SHUT_WR);
  conns_.clear();
  listen_fd_.Reset();
  serving_ = false;
}

void CommWorld::Wake() {
  const uint64_t one = 1;
  if (wake_fd_) (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

void CommWorld::Send(int id, std::vector<uint8_t> frame) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  c.out.push_back(std::move(frame));
  // Written at once when the socket takes it (the usual case), so an answer is on its way even
  // if this process ends right after; what is left waits for the thread.
  if (WriteTo(c) && c.out.empty()) return;
  Wake();
}

void CommWorld::Serve() {
  int64_t flush_until = INT64_MAX;
  std::vector<pollfd> fds;
  std::vector<int> ids;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const bool queued = std::any_of(conns_.begin(), conns_.end(),
                                      [](const auto& kv) { return !kv.second.out.empty(); });
      if (stopping_ && flush_until == INT64_MAX) flush_until = SteadyNowNs() + kFlushNs;
      if (stopping_ && (!queued || SteadyNowNs() >= flush_until)) return;
      fds.assign({{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}});
      ids.assign({0, 0});
      for (auto& [id, c] : conns_) {
        fds.push_back(
            {c.fd.get(), static_cast<int16_t>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
        ids.push_back(id);
      }
    }
    ::poll(fds.data(), fds.size(), kPollSliceMs);
    std::lock_guard<std::mutex> lock(mu_);
    if (fds[1].revents & POLLIN) {
      uint64_t n = 0;
      (void)!::read(wake_fd_.get(), &n, sizeof(n));
    }
    if (fds[0].revents & POLLIN) AcceptAll();
    for (size_t i = 2; i < fds.size(); ++i) {
      auto it = conns_.find(ids[i]);
      if (it == conns_.end() || fds[i].revents == 0) continue;
      Conn& c = it->second;
      const bool ok =
          ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0 || ReadFrom(ids[i], c)) &&
          ((fds[i].revents & POLLOUT) == 0 || WriteTo(c));
      if (!ok || (c.closing && c.out.empty())) {
        Drop(ids[i], fmt::format("its process (pid {} on {}) is gone", c.pid, c.node));
      }
    }
    std::vector<Decided> decided;
    table_.Expire(SteadyNowNs(), &decided);
    Publish(decided);
  }
}

void CommWorld::AcceptAll() {
  while (true) {
    UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn& c = conns_[next_conn_++];
    c.fd = std::move(fd);
  }
}

bool CommWorld::ReadFrom(int id, Conn& c) {
  char buf[64 * 1024];
  for (size_t total = 0; total < kReadChunk;) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    c.in.append(buf, static_cast<size_t>(n));
    total += static_cast<size_t>(n);
  }
  size_t consumed = 0;
  while (!c.closing) {
    size_t used = 0;
    std::string bad;
    const std::optional<wire::Frame> f =
        wire::NextFrame(std::string_view{c.in}.substr(consumed), &used, &bad);
    if (!bad.empty()) {
      Log()->error("collective world {}: a peer sent a bad frame ({}); closing it", comm_id_, bad);
      return false;
    }
    if (!f) break;
    if (!Handle(id, c, static_cast<uint8_t>(f->type), f->body)) return false;
    consumed += used;
  }
  c.in.erase(0, consumed);
  return true;
}

bool CommWorld::WriteTo(Conn& c) {
  while (!c.out.empty()) {
    const std::vector<uint8_t>& f = c.out.front();
    const ssize_t n =
        ::send(c.fd.get(), f.data() + c.out_offset, f.size() - c.out_offset, MSG_NOSIGNAL);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    c.out_offset += static_cast<size_t>(n);
    if (c.out_offset == f.size()) {
      c.out.pop_front();
      c.out_offset = 0;
    }
  }
  return true;
}

bool CommWorld::Handle(int id, Conn& c, uint8_t type, std::string_view body) {
  auto refuse = [&](const std::string& why) {
    Log()->error("collective world {}: {}", comm_id_, why);
    c.out.push_back(wire::EncodeError(why));
    c.closing = true;
    return true;
  };
  if (!c.hello && type != static_cast<uint8_t>(wire::Type::kHello)) {
    return refuse("a peer spoke before its hello");
  }
  switch (static_cast<wire::Type>(type)) {
    case wire::Type::kHello: {
      wire::Hello h;
      std::string bad;
      if (!wire::DecodeHello(body, &h, &bad)) return refuse(bad);
      if (h.world != world_) {
        return refuse(fmt::format("pid {} on {} asked for a world of {} ranks; this one has {}",
                                  h.pid, h.node, h.world, world_));
      }
      c.hello = true;
      c.pid = h.pid;
      c.node = h.node;
      auto [it, fresh] =
          node_ordinals_.try_emplace(h.node, static_cast<int32_t>(node_ordinals_.size()));
      c.node_ordinal = it->second;
      c.out.push_back(wire::EncodeEmpty(wire::Type::kWelcome));
      return true;
    }
    case wire::Type::kJoin:
      return HandleJoin(id, c, body);
    case wire::Type::kLeave: {
      uint32_t rank = 0;
      int32_t device = 0;
      if (!wire::DecodeRank(body, &rank, &device) || rank >= world_) return refuse("bad leave");
      if (owner_[rank] != id) return true;
      owner_[rank] = -1;
      std::vector<Decided> decided;
      table_.MarkGone(rank, fmt::format("rank {} left the world", rank), &decided);
      Publish(decided);
      return true;
    }
    case wire::Type::kArrive: {
      Arrival a;
      int64_t timeout_ns = 0;
      if (!wire::DecodeArrive(body, &a, &timeout_ns)) return refuse("bad arrival");
      if (a.rank >= world_ || owner_[a.rank] != id || a.data.size() > kMaxRankDataBytes) {
        return refuse(
            fmt::format("pid {} arrived as rank {}, which it has not joined", c.pid, a.rank));
      }
      if (a.key != GroupKey(a.members) ||
          std::find(a.members.begin(), a.members.end(), a.rank) == a.members.end()) {
        return refuse(fmt::format("pid {} sent rank {}'s arrival for a group that does not hold it",
                                  c.pid, a.rank));
      }
      a.deadline_ns = SteadyNowNs() + std::max<int64_t>(0, timeout_ns);
      std::vector<Decided> decided;
      table_.Arrive(a, &decided);
      Publish(decided);
      return true;
    }
    default:
      return refuse(fmt::format("unexpected frame type {}", type));
  }
}

bool CommWorld::HandleJoin(int id, Conn& c, std::string_view body) {
  uint32_t rank = 0;
  int32_t device = 0;
  if (!wire::DecodeRank(body, &rank, &device) || rank >= world_) {
    c.out.push_back(wire::EncodeError("bad join"));
    c.closing = true;
    return true;
  }
  if (owner_[rank] != -1 && owner_[rank] != id) {
    const std::string who =
        owner_[rank] == 0
            ? fmt::format("rank 0's process (pid {})", ::getpid())
            : fmt::format("pid {} on {}", conns_[owner_[rank]].pid, conns_[owner_[rank]].node);
    c.out.push_back(wire::EncodeRefuse(
        rank, fmt::format("rank {} of world {} is already used by {}", rank, comm_id_, who)));
    return true;
  }
  owner_[rank] = id;
  table_.SetMember(rank, {c.node_ordinal, device});
  return true;
}

void CommWorld::Drop(int id, const std::string& why) {
  std::vector<Decided> decided;
  for (uint32_t r = 0; r < world_; ++r) {
    if (owner_[r] != id) continue;
    owner_[r] = -1;
    table_.MarkGone(r, fmt::format("rank {}: {}", r, why), &decided);
  }
  conns_.erase(id);
  Publish(decided);
}

}  // namespace neuron::nrt

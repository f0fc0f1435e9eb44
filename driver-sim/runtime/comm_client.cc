// The side of a collective world in every process but rank 0's (rendezvous.h): one TCP connection
// to rank 0's process, opened when a collective first needs a member outside this process, and a
// thread that takes rank 0's answers. Rank 0's process may start after this one: connecting is
// retried until the collective's deadline, as ranks of a job that start at different times wait
// for each other on hardware.
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "driver-sim/runtime/comm_wire.h"
#include "driver-sim/runtime/log.h"
#include "driver-sim/runtime/rendezvous.h"

namespace neuron::nrt {
namespace {

constexpr int64_t kRetryNs = 20'000'000;

bool WriteAll(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

absl::Status CommWorld::Connect(int64_t deadline_ns, const Interrupt* interrupt) {
  std::lock_guard<std::mutex> once(connect_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_) return absl::UnavailableError(*lost_);
    if (connected_) return absl::OkStatus();
  }
  absl::StatusOr<sockaddr_in> addr = wire::ResolveCommId(comm_id_);
  if (!addr.ok()) return addr.status();
  UniqueFd fd;
  int last_error = 0;
  while (true) {
    fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd && ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0) {
      break;
    }
    last_error = errno;
    if (SteadyNowNs() >= deadline_ns || (interrupt != nullptr && interrupt->fired())) {
      return absl::UnavailableError(fmt::format("rank 0's process never listened on {} ({})",
                                                comm_id_, strerror(last_error)));
    }
    ::usleep(static_cast<useconds_t>(kRetryNs / 1000));
  }
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::lock_guard<std::mutex> lock(mu_);
  client_fd_ = std::move(fd);
  wire::Hello hello{world_, static_cast<uint32_t>(::getpid()), node_};
  bool ok = WriteAll(client_fd_.get(), wire::EncodeHello(hello));
  for (uint32_t r = 0; ok && r < world_; ++r) {
    if (joined_[r] > 0) {
      ok = WriteAll(client_fd_.get(), wire::EncodeRank(wire::Type::kJoin, r, devices_[r]));
    }
  }
  if (!ok) {
    lost_ = fmt::format("lost the connection to rank 0's process at {}", comm_id_);
    return absl::UnavailableError(*lost_);
  }
  connected_ = true;
  client_ = std::thread([this] { Receive(); });
  return absl::OkStatus();
}

bool CommWorld::SendToServer(const std::vector<uint8_t>& frame) {
  std::lock_guard<std::mutex> lock(send_mu_);
  return client_fd_ && WriteAll(client_fd_.get(), frame);
}

void CommWorld::StopClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    ::shutdown(client_fd_.get(), SHUT_RDWR);
  }
  client_.join();
  std::lock_guard<std::mutex> lock(mu_);
  connected_ = false;
  client_fd_.Reset();
}

void CommWorld::Receive() {
  std::string in;
  char buf[64 * 1024];
  std::string why = fmt::format("lost the connection to rank 0's process at {}", comm_id_);
  while (true) {
    const ssize_t n = ::recv(client_fd_.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    size_t consumed = 0;
    std::string bad;
    std::lock_guard<std::mutex> lock(mu_);
    while (true) {
      size_t used = 0;
      const std::optional<wire::Frame> f =
          wire::NextFrame(std::string_view{in}.substr(consumed), &used, &bad);
      if (!f) break;
      ClientFrame(static_cast<uint8_t>(f->type), f->body);
      consumed += used;
    }
    in.erase(0, consumed);
    if (!bad.empty() || lost_) {
      if (!lost_) {
        lost_ = fmt::format("rank 0's process at {} sent a bad frame ({})", comm_id_, bad);
      }
      cv_.notify_all();
      return;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!lost_) lost_ = why;
  cv_.notify_all();
}

void CommWorld::ClientFrame(uint8_t type, std::string_view body) {
  switch (static_cast<wire::Type>(type)) {
    case wire::Type::kWelcome:
      return;
    case wire::Type::kDone: {
      Decided d;
      if (!wire::DecodeDone(body, &d)) {
        lost_ = fmt::format("rank 0's process at {} sent a bad answer", comm_id_);
        return;
      }
      Publish({std::move(d)});
      return;
    }
    case wire::Type::kRefuse: {
      uint32_t rank = 0;
      std::string why;
      if (wire::DecodeRefuse(body, &rank, &why)) {
        Log()->error("collective world {}: {}", comm_id_, why);
        refused_[rank] = why;
      }
      return;
    }
    case wire::Type::kError: {
      std::string message;
      wire::DecodeError(body, &message);
      lost_ = fmt::format("rank 0's process at {} closed the connection: {}", comm_id_, message);
      return;
    }
    default:
      lost_ = fmt::format("rank 0's process at {} sent frame type {}", comm_id_, type);
      return;
  }
}

}  // namespace neuron::nrt

#include "http/connection_loop.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "fmt/format.h"
#include "http/request_parser.h"
#include "http/tls_context.h"

namespace neuron {
namespace {

constexpr uint64_t kListenKey = 0;
constexpr uint64_t kWakeKey = 1;
constexpr auto kSweepEvery = std::chrono::milliseconds(100);
constexpr auto kReportEvery = std::chrono::seconds(10);
// While closing, at most this much more from the client is read and dropped.
constexpr size_t kMaxDiscard = size_t{256} * 1024;

}  // namespace

enum class ConnectionLoop::Io { kDone, kWantRead, kWantWrite, kClosed };

struct ConnectionLoop::Conn {
  enum class State { kHandshake, kIdle, kReading, kWorking, kDelayed, kWriting, kClosing };
  uint64_t id = 0;
  UniqueFd fd;
  SSL* ssl = nullptr;
  std::string remote;
  State state = State::kIdle;
  bool first_request = true;  // its deadline counts from accept
  bool peer_closed = false;   // the client shut its side: answer, then close
  std::string in;             // bytes read, not yet consumed
  std::string out;            // the answer being written
  size_t out_done = 0;
  bool close_after = false;
  size_t discarded = 0;
  uint32_t interest = 0;  // the epoll events registered
  Clock::time_point deadline;
  Clock::time_point last_active;

  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);  // first: it refers to fd, which closes after
  }
};

namespace {

using Conn = ConnectionLoop::Conn;
using State = Conn::State;

// Where a connection is in the order of shedding: lower goes first; -1 never (busy).
int ShedRank(const Conn& c) {
  switch (c.state) {
    case State::kClosing:
      return 0;
    case State::kIdle:
      return 1;
    case State::kHandshake:
    case State::kReading:
      return 2;
    default:
      return -1;
  }
}

}  // namespace

ConnectionLoop::ConnectionLoop(UniqueFd listen_fd, std::unique_ptr<TlsContextReloader> tls,
                               LoopLimits limits, std::shared_ptr<spdlog::logger> log,
                               Submit submit)
    : listen_fd_(std::move(listen_fd)),
      tls_(std::move(tls)),
      limits_(limits),
      log_(std::move(log)),
      submit_(std::move(submit)) {}

ConnectionLoop::~ConnectionLoop() { Stop(); }

absl::Status ConnectionLoop::Start() {
  epoll_fd_.Reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_fd_ || !wake_fd_) return absl::InternalError("epoll/eventfd failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenKey;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev);
  ev.data.u64 = kWakeKey;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  last_report_ = Clock::now();
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ConnectionLoop::Stop() {
  if (!stop_.exchange(true) && thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
    thread_.join();
  }
  conns_.clear();
  per_address_.clear();
}

void ConnectionLoop::Complete(uint64_t conn, std::string bytes, bool keep_alive,
                              std::chrono::milliseconds delay) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    completed_.push_back({conn, std::move(bytes), keep_alive, delay});
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
}

void ConnectionLoop::Run() {
  // A write to a peer that went away raises SIGPIPE (OpenSSL writes with write(2)); blocked on
  // this thread it stays pending here instead of killing the process, and the write fails with
  // EPIPE. Sweep drains it.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  epoll_event events[64];
  Clock::time_point next_sweep = Clock::now() + kSweepEvery;
  while (!stop_.load()) {
    // Deadlines are swept every 100 ms while there are connections; an idle server sleeps until
    // a connection comes or Stop writes the wake descriptor.
    const bool idle = conns_.empty() && !accept_paused_;
    const int n = epoll_wait(epoll_fd_.get(), events, 64, idle ? -1 : 100);
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kListenKey) {
        Accept(now);
      } else if (key == kWakeKey) {
        uint64_t count = 0;
        [[maybe_unused]] ssize_t r = read(wake_fd_.get(), &count, sizeof count);
        TakeCompleted(now);
      } else if (const auto it = conns_.find(key); it != conns_.end()) {
        Conn& c = *it->second;
        if (c.state == State::kWorking || c.state == State::kDelayed) {
          // Only errors are reported while it waits (interest 0): the client is gone.
          Close(c.id);
          continue;
        }
        Drive(c, now);
      }
    }
    if (now >= next_sweep) {
      next_sweep = now + kSweepEvery;
      Sweep(now);
      timespec zero{0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) > 0) {
      }
    }
  }
}

void ConnectionLoop::Accept(Clock::time_point now) {
  // A burst is taken in slices so that the connections already open are served between them.
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: make room, or stop accepting for a moment rather than spin.
        if (!ShedForTotal()) {
          epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, listen_fd_.get(), nullptr);
          accept_paused_ = true;
          accept_paused_until_ = now + std::chrono::milliseconds(100);
          log_->warn(
              "out of file descriptors with every connection busy; accepting again in "
              "100 ms");
          return;
        }
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      return;  // EAGAIN: all accepted
    }
    char host[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, host, sizeof host);
    } else if (addr.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, host, sizeof host);
    } else if (addr.ss_family == AF_UNIX) {
      std::strcpy(host, "unix");  // peers on a Unix socket have no address: one group for caps
    }
    Admit(UniqueFd(fd), host, now);
  }
}

void ConnectionLoop::Admit(UniqueFd fd, std::string remote, Clock::time_point now) {
  if ((per_address_[remote] >= limits_.max_connections_per_address && !Shed(remote)) ||
      (conns_.size() >= limits_.max_connections && !ShedForTotal())) {
    ++counts_.refused;
    ++offenders_[remote];
    if (per_address_[remote] == 0) per_address_.erase(remote);
    return;  // closed by ~UniqueFd
  }
  auto c = std::make_unique<Conn>();
  const int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->fd = std::move(fd);
  c->remote = std::move(remote);
  c->last_active = now;
  if (tls_ != nullptr) {
    c->ssl = SSL_new(tls_->ForNewConnection(now));
    if (c->ssl == nullptr) {
      log_->error("SSL_new: {}", OpenSslError());
      return;
    }
    SSL_set_fd(c->ssl, c->fd.get());
    SSL_set_accept_state(c->ssl);
    c->state = State::kHandshake;
    c->deadline = now + limits_.handshake_timeout;
  } else {
    c->state = State::kIdle;
    c->deadline = now + limits_.request_timeout;
  }
  c->id = next_id_++;
  c->interest = EPOLLIN | EPOLLRDHUP;
  epoll_event ev{};
  ev.events = c->interest;
  ev.data.u64 = c->id;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev);
  ++per_address_[c->remote];
  conns_.emplace(c->id, std::move(c));
}

bool ConnectionLoop::Shed(const std::string& address) {
  Conn* victim = nullptr;
  for (const auto& [id, c] : conns_) {
    const int rank = ShedRank(*c);
    if (rank < 0 || (!address.empty() && c->remote != address)) continue;
    if (victim == nullptr || rank < ShedRank(*victim) ||
        (rank == ShedRank(*victim) && c->last_active < victim->last_active)) {
      victim = c.get();
    }
  }
  if (victim == nullptr) return false;
  ++counts_.shed;
  ++offenders_[victim->remote];
  Close(victim->id, /*abort=*/true);
  return true;
}

bool ConnectionLoop::ShedForTotal() {
  const auto heaviest =
      std::max_element(per_address_.begin(), per_address_.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  return (heaviest != per_address_.end() && Shed(heaviest->first)) || Shed("");
}

namespace {

// Reads what the socket has into c.in, up to just past `max`: beyond max + 4 bytes the parser
// always decides (a request, or 431), so more is never needed to go on.
ConnectionLoop::Io ReadSome(Conn& c, size_t max) {
  using Io = ConnectionLoop::Io;
  char chunk[16384];
  while (c.in.size() < max + 8) {
    if (c.ssl == nullptr) {
      const ssize_t n = recv(c.fd.get(), chunk, sizeof chunk, 0);
      if (n > 0) {
        c.in.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Io::kWantRead;
      return Io::kClosed;
    }
    ERR_clear_error();  // SSL_get_error reads the thread's queue: another connection's must go
    const int n = SSL_read(c.ssl, chunk, sizeof chunk);
    if (n > 0) {
      c.in.append(chunk, static_cast<size_t>(n));
      continue;
    }
    const int err = SSL_get_error(c.ssl, n);
    if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
    if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
    return Io::kClosed;
  }
  return Io::kDone;
}

ConnectionLoop::Io WriteSome(Conn& c) {
  using Io = ConnectionLoop::Io;
  while (c.out_done < c.out.size()) {
    const char* data = c.out.data() + c.out_done;
    const size_t left = c.out.size() - c.out_done;
    if (c.ssl == nullptr) {
      const ssize_t n = send(c.fd.get(), data, left, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Io::kWantWrite;
      return Io::kClosed;
    }
    // Partial writes are on (tls_context.cc), so a large answer goes out as the socket takes it.
    ERR_clear_error();
    const int n = SSL_write(c.ssl, data, static_cast<int>(std::min<size_t>(left, 1 << 20)));
    if (n > 0) {
      c.out_done += static_cast<size_t>(n);
      continue;
    }
    const int err = SSL_get_error(c.ssl, n);
    if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
    if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
    return Io::kClosed;
  }
  return Io::kDone;
}

ConnectionLoop::Io Handshake(Conn& c) {
  using Io = ConnectionLoop::Io;
  ERR_clear_error();
  const int rc = SSL_do_handshake(c.ssl);
  if (rc == 1) return Io::kDone;
  const int err = SSL_get_error(c.ssl, rc);
  if (err == SSL_ERROR_WANT_READ) return Io::kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return Io::kWantWrite;
  return Io::kClosed;
}

// Drops what the client still sends while the connection closes; kClosed at its end.
ConnectionLoop::Io Discard(Conn& c) {
  using Io = ConnectionLoop::Io;
  char chunk[16384];
  for (;;) {
    const ssize_t n = recv(c.fd.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      c.discarded += static_cast<size_t>(n);
      if (c.discarded > kMaxDiscard) return Io::kClosed;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Io::kWantRead;
    return Io::kClosed;
  }
}

}  // namespace

void ConnectionLoop::Drive(Conn& c, Clock::time_point now) {
  for (;;) {
    switch (c.state) {
      case State::kHandshake: {
        const Io io = Handshake(c);
        if (io != Io::kDone) {
          if (io == Io::kClosed) {
            log_->debug("TLS handshake with {} failed: {}", c.remote, OpenSslError());
          }
          return Wait(c, io);
        }
        c.state = State::kIdle;
        c.deadline = now + limits_.request_timeout;  // the request's deadline counts from here
        continue;
      }
      case State::kIdle:
      case State::kReading: {
        const Io io = ReadSome(c, std::max<size_t>(1024, limits_.max_request_bytes));
        if (io == Io::kClosed) c.peer_closed = true;
        if (c.state == State::kIdle && !c.in.empty()) {
          c.state = State::kReading;
          if (!c.first_request) c.deadline = now + limits_.request_timeout;
        }
        if (TryParse(c, now)) continue;
        return Wait(c, io == Io::kDone ? Io::kWantRead : io);
      }
      case State::kWriting: {
        const Io io = WriteSome(c);
        if (io != Io::kDone) return Wait(c, io);
        c.out.clear();
        c.out_done = 0;
        if (c.close_after) {
          BeginClosing(c, now);
          continue;
        }
        c.state = c.in.empty() ? State::kIdle : State::kReading;
        c.deadline = now + (c.in.empty() ? limits_.idle_timeout : limits_.request_timeout);
        continue;
      }
      case State::kClosing: {
        const Io io = Discard(c);
        return Wait(c, io);
      }
      case State::kWorking:
      case State::kDelayed:
        return SetInterest(c, 0);
    }
  }
}

// Acts on c.in when it holds a whole request (or a refusal): true when the state changed.
bool ConnectionLoop::TryParse(Conn& c, Clock::time_point now) {
  const size_t max = std::max<size_t>(1024, limits_.max_request_bytes);
  ParsedRequest p = ParseRequest(c.in, max, limits_.write_methods);
  if (p.outcome == ParsedRequest::Outcome::kIncomplete) return false;
  // A body (unusual for GET) is read whole and dropped, so that the next request starts cleanly;
  // the parser bounds it by `max`. A refusal that closes the connection does not wait for it.
  const size_t whole = p.head_bytes + p.body_bytes;
  const bool keep_alive = p.keep_alive && !c.peer_closed;
  if ((p.outcome == ParsedRequest::Outcome::kParsed || p.keep_alive) && c.in.size() < whole) {
    return false;
  }
  if (limits_.write_methods && p.outcome == ParsedRequest::Outcome::kParsed) {
    p.request.body = c.in.substr(p.head_bytes, p.body_bytes);
  }
  c.in.erase(0, std::min(whole, c.in.size()));
  c.last_active = now;
  if (p.outcome == ParsedRequest::Outcome::kRefused) {
    HttpResponse r;
    r.status = p.status;
    r.body = std::move(p.reason);
    if (p.status == 405) {
      r.headers.emplace_back(
          "Allow", limits_.write_methods ? "GET, HEAD, POST, PUT, PATCH, DELETE" : "GET, HEAD");
    }
    StartWrite(c, SerializeResponse(r, p.omit_body, keep_alive), keep_alive, now);
    return true;
  }
  p.request.remote_address = c.remote;
  p.request.tls = c.ssl != nullptr;
  c.state = State::kWorking;
  submit_(LoopJob{c.id, std::move(p.request), keep_alive});
  return true;
}

void ConnectionLoop::StartWrite(Conn& c, std::string bytes, bool keep_alive,
                                Clock::time_point now) {
  c.out = std::move(bytes);
  c.out_done = 0;
  c.close_after = !keep_alive || c.peer_closed;
  c.first_request = false;
  c.state = State::kWriting;
  c.deadline = now + limits_.write_timeout;
  c.last_active = now;
}

void ConnectionLoop::BeginClosing(Conn& c, Clock::time_point now) {
  if (c.ssl != nullptr) {
    ERR_clear_error();
    SSL_shutdown(c.ssl);  // close_notify, once; its answer is not awaited
    ERR_clear_error();
  }
  shutdown(c.fd.get(), SHUT_WR);
  c.state = State::kClosing;
  c.deadline = now + limits_.linger;
}

void ConnectionLoop::Wait(Conn& c, Io io) {
  if (io == Io::kClosed) return Close(c.id);
  SetInterest(c, io == Io::kWantWrite ? EPOLLOUT : (EPOLLIN | EPOLLRDHUP));
}

void ConnectionLoop::SetInterest(Conn& c, uint32_t events) {
  if (c.interest == events) return;
  c.interest = events;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
}

void ConnectionLoop::Close(uint64_t id, bool abort) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  if (abort) {
    // A reset: what the kernel still holds for this client (an unread answer) is dropped at
    // once, and no TIME_WAIT is left behind a connection we gave up on.
    const linger reset{1, 0};
    setsockopt(it->second->fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  }
  const auto count = per_address_.find(it->second->remote);
  if (count != per_address_.end() && --count->second == 0) per_address_.erase(count);
  conns_.erase(it);  // closing the socket removes it from the epoll set
}

void ConnectionLoop::TakeCompleted(Clock::time_point now) {
  std::deque<Completed> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(completed_);
  }
  for (Completed& d : done) {
    const auto it = conns_.find(d.conn);
    if (it == conns_.end()) continue;  // the client left while its handler ran
    Conn& c = *it->second;
    StartWrite(c, std::move(d.bytes), d.keep_alive, now);
    if (d.delay.count() > 0) {
      // Held back, at no cost but the socket: Sweep releases it when the delay is over.
      c.state = State::kDelayed;
      c.deadline = now + d.delay;
    }
    Drive(c, now);
  }
}

void ConnectionLoop::Sweep(Clock::time_point now) {
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : conns_) {
    if (c->state != State::kWorking && now >= c->deadline) expired.push_back(id);
  }
  for (auto it = expired.begin(); it != expired.end();) {
    Conn& c = *conns_.at(*it);
    if (c.state != State::kDelayed) {
      ++it;
      continue;
    }
    c.state = State::kWriting;  // its delay is over: the answer goes out now
    c.deadline = now + limits_.write_timeout;
    Drive(c, now);
    it = expired.erase(it);
  }
  for (uint64_t id : expired) {
    const Conn& c = *conns_.at(id);
    switch (c.state) {
      case State::kHandshake:
        ++counts_.handshake;
        break;
      case State::kReading:
        ++counts_.request;
        break;
      case State::kIdle:
        ++(c.first_request ? counts_.request : counts_.idle);
        break;
      case State::kWriting:
        ++counts_.write;
        break;
      default:
        break;
    }
    if (c.state != State::kClosing && !(c.state == State::kIdle && !c.first_request)) {
      ++offenders_[c.remote];
    }
    Close(id, /*abort=*/c.state != State::kClosing);
  }
  if (accept_paused_ && now >= accept_paused_until_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenKey;
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev);
    accept_paused_ = false;
  }
  Report(now);
}

void ConnectionLoop::Report(Clock::time_point now) {
  if (now - last_report_ < kReportEvery) return;
  last_report_ = now;
  const Counts c = counts_;
  counts_ = Counts{};
  if (c.handshake + c.request + c.write + c.shed + c.refused == 0) {
    offenders_.clear();
    return;  // idle keep-alive connections closing is normal, not worth a line on its own
  }
  const auto top =
      std::max_element(offenders_.begin(), offenders_.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  log_->warn(
      "last {} s: closed at their deadline {} TLS handshake(s) (limit {} ms), {} unfinished "
      "request(s) ({} ms), {} idle ({} ms), {} unread answer(s) ({} ms); shed {} and refused {} "
      "connection(s) over the caps ({} per address, {} in all); most from {} ({})",
      std::chrono::duration_cast<std::chrono::seconds>(kReportEvery).count(), c.handshake,
      limits_.handshake_timeout.count(), c.request, limits_.request_timeout.count(), c.idle,
      limits_.idle_timeout.count(), c.write, limits_.write_timeout.count(), c.shed, c.refused,
      limits_.max_connections_per_address, limits_.max_connections,
      top != offenders_.end() ? top->first : "-", top != offenders_.end() ? top->second : 0);
  offenders_.clear();
}

}  // namespace neuron

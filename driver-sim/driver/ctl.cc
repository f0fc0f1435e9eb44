// The `neuron-sim ctl` protocol's two ends (ctl.h): the client's exchange and the daemon's
// listening socket and connections; replies. The request grammar is ctl_request.cc's.

#include "driver-sim/driver/ctl.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/base/unique_fd.h"
#include "driver-sim/driver/sim_paths.h"

namespace neuron::sim {
namespace {

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

std::string ErrnoText(int err) { return std::strerror(err); }

// A reply as a Status for the one-shot senders: usage errors are InvalidArgument, the daemon's
// failures `error_code` (what a failure means differs per command).
absl::Status OutcomeStatus(const absl::StatusOr<CtlReply>& reply, absl::StatusCode error_code) {
  if (!reply.ok()) return reply.status();
  switch (reply->outcome) {
    case CtlOutcome::kOk:
      return absl::OkStatus();
    case CtlOutcome::kUsage:
      return absl::InvalidArgumentError(reply->message);
    case CtlOutcome::kError:
      break;
  }
  return absl::Status(error_code, reply->message);
}

}  // namespace

absl::Status SendPrintk(const RootPaths& paths, int level, std::string_view text,
                        std::chrono::milliseconds timeout) {
  if (level < 0 || level > 7) {
    return absl::InvalidArgumentError(fmt::format("printk level {} is not 0-7", level));
  }
  if (absl::Status s = CheckPrintkText(text); !s.ok()) return s;
  CtlRequest req;
  req.command = "printk";
  req.level = level;
  req.text = std::string(text);
  return OutcomeStatus(SendCtlRequest(paths, req, timeout), absl::StatusCode::kInternal);
}

std::string FormatCtlReply(const CtlReply& reply) {
  std::string head;
  switch (reply.outcome) {
    case CtlOutcome::kOk:
      head = "ok\n";
      break;
    case CtlOutcome::kError:
      head = fmt::format("error: {}\n", reply.message);
      break;
    case CtlOutcome::kUsage:
      head = fmt::format("usage: {}\n", reply.message);
      break;
  }
  return head + reply.payload;
}

absl::StatusOr<CtlReply> ParseCtlReply(std::string_view text) {
  const size_t nl = text.find('\n');
  const std::string_view head = text.substr(0, nl);
  CtlReply reply;
  reply.payload = nl == std::string_view::npos ? "" : std::string(text.substr(nl + 1));
  if (head == "ok") {
    reply.outcome = CtlOutcome::kOk;
  } else if (head.starts_with("error: ")) {
    reply.outcome = CtlOutcome::kError;
    reply.message = std::string(head.substr(7));
  } else if (head.starts_with("usage: ")) {
    reply.outcome = CtlOutcome::kUsage;
    reply.message = std::string(head.substr(7));
  } else {
    return absl::DataLossError(
        fmt::format("malformed reply from the daemon: '{}'", head.substr(0, 80)));
  }
  return reply;
}

int CtlExitCode(CtlOutcome outcome) {
  switch (outcome) {
    case CtlOutcome::kOk:
      return 0;
    case CtlOutcome::kError:
      return 1;
    case CtlOutcome::kUsage:
      return 2;
  }
  return 1;
}

absl::Status CheckCtlSocketPath(const RootPaths& paths) {
  const std::string path = sim::CtlSocketPath(paths).string();
  const size_t suffix = path.size() - paths.root().string().size();
  if (path.size() <= kMaxSocketPath) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "root {} is too long: the control socket {} would be {} bytes, and Unix socket paths "
      "allow at most {}; use a --root of at most {} bytes",
      paths.root().string(), path, path.size(), kMaxSocketPath,
      kMaxSocketPath > suffix ? kMaxSocketPath - suffix : 0));
}

namespace {

// A connected, non-blocking client socket to the daemon at `paths`.
absl::StatusOr<UniqueFd> ConnectCtl(const RootPaths& paths) {
  const std::filesystem::path sock_path = sim::CtlSocketPath(paths);
  struct stat st {};
  if (lstat(sock_path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("no simulated node at {} (ctl.sock missing); start it with neuron-sim up",
                    paths.root().string()));
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return absl::InternalError(fmt::format("socket: {}", ErrnoText(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.native().size() + 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    if (err == ECONNREFUSED || err == ENOENT) {
      return absl::FailedPreconditionError(
          fmt::format("no simulated node at {} (ctl.sock is stale: no daemon listens on it); "
                      "start it with neuron-sim up",
                      paths.root().string()));
    }
    return absl::UnavailableError(
        fmt::format("connect {}: {}", sock_path.string(), ErrnoText(err)));
  }
  if (fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK) != 0) {
    return absl::InternalError(fmt::format("fcntl: {}", ErrnoText(errno)));
  }
  return fd;
}

// One request's exchange with the daemon over a connected socket it does not own, all before
// `deadline` (`timeout` after the request began, for the message).
class CtlExchange {
 public:
  CtlExchange(const RootPaths& paths, int fd, std::chrono::milliseconds timeout,
              std::chrono::steady_clock::time_point deadline)
      : paths_(paths), fd_(fd), timeout_(timeout), deadline_(deadline) {}

  absl::Status Send(std::string_view line) {
    size_t sent = 0;
    while (sent < line.size()) {
      const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (absl::Status s = WaitFor(POLLOUT); !s.ok()) return s;
      } else {
        const int err = errno;
        return absl::UnavailableError(
            fmt::format("send to {}: {}", sim::CtlSocketPath(paths_).string(), ErrnoText(err)));
      }
    }
    return absl::OkStatus();
  }

  // Everything the daemon writes before it closes the connection.
  absl::StatusOr<std::string> ReceiveAll() {
    std::string reply;
    std::array<char, 4096> buf;
    for (;;) {
      const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n > 0) {
        reply.append(buf.data(), static_cast<size_t>(n));
        if (reply.size() > (1u << 22)) return absl::DataLossError("reply from the daemon too long");
      } else if (n == 0) {
        return reply;
      } else if (errno == EAGAIN || errno == EINTR) {
        if (absl::Status s = WaitFor(POLLIN); !s.ok()) return s;
      } else {
        const int err = errno;
        return absl::UnavailableError(
            fmt::format("recv from {}: {}", sim::CtlSocketPath(paths_).string(), ErrnoText(err)));
      }
    }
  }

 private:
  absl::Status WaitFor(int16_t events) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(fmt::format("the daemon at {} did not answer within {} ms",
                                                     paths_.root().string(), timeout_.count()));
    }
    pollfd p{fd_, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) {
      return absl::InternalError(fmt::format("poll: {}", ErrnoText(errno)));
    }
    return absl::OkStatus();
  }

  const RootPaths& paths_;
  int fd_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

absl::StatusOr<CtlReply> SendCtlRequest(const RootPaths& paths, const CtlRequest& request,
                                        std::chrono::milliseconds timeout) {
  if (absl::Status s = CheckCtlSocketPath(paths); !s.ok()) return s;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::StatusOr<UniqueFd> fd = ConnectCtl(paths);
  if (!fd.ok()) return fd.status();
  CtlExchange exchange(paths, fd->get(), timeout, deadline);
  if (absl::Status s = exchange.Send(FormatCtlRequest(request) + "\n"); !s.ok()) return s;
  absl::StatusOr<std::string> reply = exchange.ReceiveAll();
  if (!reply.ok()) return reply.status();
  if (reply->empty()) {
    return absl::UnavailableError(fmt::format(
        "the daemon at {} closed the connection without a reply", paths.root().string()));
  }
  return ParseCtlReply(*reply);
}

absl::Status SendClearFault(const RootPaths& paths, uint64_t id,
                            std::chrono::milliseconds timeout) {
  CtlRequest req;
  req.command = "clear-fault";
  req.fault_id = id;
  return OutcomeStatus(SendCtlRequest(paths, req, timeout), absl::StatusCode::kNotFound);
}

absl::StatusOr<UniqueFd> ListenCtlSocket(const std::filesystem::path& path) {
  if (path.native().size() > kMaxSocketPath) {
    return absl::InvalidArgumentError(
        fmt::format("socket path {} is longer than {} bytes", path.string(), kMaxSocketPath));
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return absl::InternalError(fmt::format("socket: {}", ErrnoText(errno)));
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    const int err = errno;
    return absl::InternalError(fmt::format("remove stale {}: {}", path.string(), ErrnoText(err)));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.native().size() + 1);
  // The umask makes the socket 0600 from the moment it exists; chmod below states it explicitly.
  const mode_t old_mask = umask(0177);
  const int rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_err = errno;
  umask(old_mask);
  if (rc != 0) {
    return absl::InternalError(fmt::format("bind {}: {}", path.string(), ErrnoText(bind_err)));
  }
  if (chmod(path.c_str(), 0600) != 0 || listen(fd.get(), 16) != 0) {
    const int err = errno;
    unlink(path.c_str());
    return absl::InternalError(fmt::format("listen {}: {}", path.string(), ErrnoText(err)));
  }
  return fd;
}

CtlConnection::CtlConnection(UniqueFd fd)
    : fd_(std::move(fd)), accepted_at_(std::chrono::steady_clock::now()) {}

CtlConnection::ReadResult CtlConnection::Read(std::string* line) {
  std::array<char, 1024> buf;
  for (;;) {
    const ssize_t n = recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf.data(), static_cast<size_t>(n));
      if (const size_t nl = in_.find('\n'); nl != std::string::npos) {
        *line = in_.substr(0, nl);
        return ReadResult::kLine;
      }
      if (in_.size() > kMaxRequestBytes) return ReadResult::kTooLong;
      continue;
    }
    if (n == 0) {
      if (in_.empty()) return ReadResult::kClosed;
      *line = in_;
      return ReadResult::kLine;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadResult::kNeedMore;
    return ReadResult::kClosed;
  }
}

bool CtlConnection::Flush() {
  while (out_pos_ < out_.size()) {
    const ssize_t n = send(fd_.get(), out_.data() + out_pos_, out_.size() - out_pos_,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_pos_ += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return false;
    } else {
      return true;  // the client went away; nothing more to do for it
    }
  }
  return true;
}

}  // namespace neuron::sim

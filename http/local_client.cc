#include "http/local_client.h"

#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "core/base/unique_fd.h"
#include "fmt/format.h"

namespace neuron {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status WaitFor(int fd, int16_t events, Clock::time_point deadline, std::string_view what) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(fmt::format("no answer in time ({})", what));
    }
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) {
      return absl::UnavailableError(fmt::format("{}: {}", what, std::strerror(errno)));
    }
  }
}

// A non-blocking socket with a connect under way or done.
absl::StatusOr<UniqueFd> StartConnect(std::string_view address) {
  if (address.substr(0, 5) == "unix:") {
    const std::string_view path = address.substr(5);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
      return absl::InvalidArgumentError(fmt::format("bad Unix socket address \"{}\"", address));
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    // A Unix socket connects at once or fails at once (EAGAIN: its backlog is full).
    if (!fd || connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      return absl::UnavailableError(fmt::format("connect {}: {}", address, std::strerror(errno)));
    }
    return fd;
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return absl::InvalidArgumentError(
        fmt::format("address \"{}\": expected unix:PATH or host:port", address));
  }
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "127.0.0.1";
  const std::string port(address.substr(colon + 1));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return absl::InvalidArgumentError(fmt::format("address \"{}\": {}", address, gai_strerror(rc)));
  }
  UniqueFd fd(socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const int rc = fd ? connect(fd.get(), res->ai_addr, res->ai_addrlen) : -1;
  const int err = errno;
  freeaddrinfo(res);
  if (rc != 0 && err != EINPROGRESS) {
    return absl::UnavailableError(fmt::format("connect {}: {}", address, std::strerror(err)));
  }
  return fd;
}

// The raw answer, read until the server closes.
absl::StatusOr<std::string> Exchange(int fd, const std::string& request, Clock::time_point deadline,
                                     size_t limit) {
  size_t sent = 0;
  while (sent < request.size()) {
    if (absl::Status s = WaitFor(fd, POLLOUT, deadline, "sending"); !s.ok()) return s;
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError(fmt::format("send: {}", std::strerror(errno)));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    if (absl::Status s = WaitFor(fd, POLLIN, deadline, "reading"); !s.ok()) return s;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) return raw;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::UnavailableError(fmt::format("recv: {}", std::strerror(errno)));
    }
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > limit) {
      return absl::DataLossError(fmt::format("answer larger than {} bytes", limit));
    }
  }
}

std::string_view Trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

// Status line, Content-Type and Content-Length of an answer our server wrote (never chunked).
absl::StatusOr<LocalResponse> ParseAnswer(std::string raw) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || raw.compare(0, 7, "HTTP/1.") != 0 || head_end == std::string::npos) {
    return absl::DataLossError("the answer is not HTTP/1.x or its head is cut short");
  }
  LocalResponse r;
  const auto [ptr, ec] = std::from_chars(raw.data() + 9, raw.data() + 12, r.status);
  if (ec != std::errc() || ptr != raw.data() + 12 || r.status < 100) {
    return absl::DataLossError("the answer's status line is malformed");
  }
  std::string_view head(raw.data(), head_end);
  int64_t content_length = -1;
  for (size_t pos = head.find("\r\n"); pos != std::string_view::npos;) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string_view line =
        head.substr(pos + 2, next == head.npos ? head.npos : next - pos - 2);
    pos = next;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (name.size() == 12 && strncasecmp(name.data(), "content-type", 12) == 0) {
      r.content_type = std::string(value);
    } else if (name.size() == 14 && strncasecmp(name.data(), "content-length", 14) == 0) {
      std::from_chars(value.data(), value.data() + value.size(), content_length);
    } else if (name.size() == 17 && strncasecmp(name.data(), "transfer-encoding", 17) == 0) {
      return absl::DataLossError("chunked answers are not expected here");
    }
  }
  r.body = raw.substr(head_end + 4);
  if (content_length >= 0 && r.body.size() != static_cast<size_t>(content_length)) {
    return absl::DataLossError(fmt::format("the answer was cut short: {} of {} body bytes",
                                           r.body.size(), content_length));
  }
  return r;
}

}  // namespace

absl::StatusOr<LocalResponse> LocalGet(std::string_view address, std::string_view path,
                                       const LocalRequestOptions& options) {
  const Clock::time_point deadline = Clock::now() + options.timeout;
  absl::StatusOr<UniqueFd> fd = StartConnect(address);
  if (!fd.ok()) return fd.status();
  if (absl::Status s = WaitFor(fd->get(), POLLOUT, deadline, "connecting"); !s.ok()) return s;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd->get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    return absl::UnavailableError(fmt::format("connect {}: {}", address, std::strerror(err)));
  }
  const std::string request =
      fmt::format("GET {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
  absl::StatusOr<std::string> raw =
      Exchange(fd->get(), request, deadline, options.max_response_bytes);
  if (!raw.ok()) return raw.status();
  return ParseAnswer(*std::move(raw));
}

absl::Status Probe(std::string_view address, std::string_view path,
                   std::chrono::milliseconds timeout) {
  LocalRequestOptions options;
  options.timeout = timeout;
  options.max_response_bytes = 1 << 20;
  const absl::StatusOr<LocalResponse> got = LocalGet(address, path, options);
  if (!got.ok()) {
    return absl::Status(got.status().code(), fmt::format("GET {} at {}: {}", path, address,
                                                         std::string{got.status().message()}));
  }
  if (got->status != 200) {
    return absl::UnavailableError(
        fmt::format("GET {} at {}: status {}: {}", path, address, got->status, got->body));
  }
  return absl::OkStatus();
}

}  // namespace neuron

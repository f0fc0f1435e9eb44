#pragma once
// Raw clients for the HTTP server's tests and its attackers: a TCP connection from a chosen
// loopback address (the server tells clients apart by address: 127.0.0.1 and 127.0.0.2 reach a
// server on 127.0.0.1 as two clients), and waits for what the server does to it. Header-only;
// thread-safe (no shared state).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>

#include "core/base/unique_fd.h"

namespace neuron::testing {

// A socket from `source` to 127.0.0.1:port. kBlocking: blocking and connected; kInProgress:
// non-blocking with its connect under way (the attackers of tests/support/http_attack.h drive
// many at once). Invalid when the socket, the bind or the connect failed.
enum class Connect { kBlocking, kInProgress };
inline UniqueFd ConnectFrom(const std::string& source, int port,
                            Connect mode = Connect::kBlocking) {
  const int nonblocking = mode == Connect::kInProgress ? SOCK_NONBLOCK : 0;
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | nonblocking, 0));
  if (!fd) return fd;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return UniqueFd();
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 &&
      !(mode == Connect::kInProgress && errno == EINPROGRESS)) {
    return UniqueFd();
  }
  return fd;
}

inline bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the server closes (EOF or reset) or `within` passes; what came, and whether it
// closed.
struct ReadResult {
  std::string data;
  bool closed = false;
  std::chrono::steady_clock::time_point when;  // of the close
};
inline ReadResult ReadUntilClosed(int fd, std::chrono::milliseconds within) {
  ReadResult r;
  const auto end = std::chrono::steady_clock::now() + within;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return r;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      r.data.append(buf, static_cast<size_t>(n));
      continue;
    }
    r.closed = true;
    r.when = std::chrono::steady_clock::now();
    return r;
  }
}

// One request from `source` on a new connection, read to the server's close; the status, or -1.
inline int StatusFrom(const std::string& source, int port, const std::string& request,
                      std::string* answer = nullptr) {
  const UniqueFd fd = ConnectFrom(source, port);
  if (!fd || !SendAll(fd.get(), request)) return -1;
  const ReadResult r = ReadUntilClosed(fd.get(), std::chrono::seconds(20));
  if (answer != nullptr) *answer = r.data;
  if (r.data.size() < 12 || r.data.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::stoi(r.data.substr(9, 3));
}

}  // namespace neuron::testing

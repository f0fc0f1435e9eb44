#include "tests/support/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "core/base/unique_fd.h"

namespace neuron::testing {

int FreePort() {
  const UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  return port;
}

std::string UrlEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

HttpResult HttpRaw(int port, const std::string& raw, int timeout_ms) {
  HttpResult result;
  const UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return result;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return result;
  size_t sent = 0;
  while (sent < raw.size()) {
    const ssize_t n = send(fd.get(), raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string in;
  char buf[16384];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  if (in.rfind("HTTP/1.", 0) != 0 || in.size() < 12) return result;
  result.status = std::atoi(in.c_str() + 9);
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return result;
  result.headers = in.substr(0, end);
  result.body = in.substr(end + 4);
  return result;
}

HttpResult HttpGet(int port, const std::string& target, const std::string& extra_headers) {
  return HttpRaw(port,
                 "GET " + target + " HTTP/1.0\r\nHost: localhost\r\n" + extra_headers + "\r\n");
}

}  // namespace neuron::testing

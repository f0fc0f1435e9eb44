#include "tests/support/http_attack.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>

#include "bench/stats.h"  // header-only: the percentiles every benchmark reports
#include "core/base/unique_fd.h"
#include "tests/support/http_test_client.h"

namespace neuron::testing {
namespace {

using bench::Median;
using bench::Ms;
using bench::Percentile;

using Clock = std::chrono::steady_clock;

// Waits for `events` on fd until `deadline`; false on timeout.
bool WaitFd(int fd, int16_t events, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd, events, 0};
  return poll(&p, 1, static_cast<int>(left.count())) > 0;
}

bool Connected(int fd, Clock::time_point deadline) {
  if (!WaitFd(fd, POLLOUT, deadline)) return false;
  int err = 0;
  socklen_t len = sizeof err;
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

int StatusOf(const std::string& in) {
  int status = -1;
  if (in.size() < 12 || in.rfind("HTTP/1.", 0) != 0) return status;
  std::from_chars(in.data() + 9, in.data() + 12, status);
  return status;
}

int PlainExchange(int fd, const std::string& request, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < request.size()) {
    if (!WaitFd(fd, POLLOUT, deadline)) return -1;
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN) return -1;
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string in;
  char buf[65536];
  for (;;) {
    if (!WaitFd(fd, POLLIN, deadline)) return -1;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0 && errno != EAGAIN) break;
    if (n > 0 && in.size() < 64) in.append(buf, static_cast<size_t>(n));
  }
  return StatusOf(in);
}

SSL_CTX* ClientContext() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(c, SSL_VERIFY_NONE, nullptr);
    return c;
  }();
  return ctx;
}

// Runs one step of a non-blocking TLS operation: true when it is done, false to stop (error or
// timeout); `again` set while it should be retried after waiting.
bool TlsStep(SSL* ssl, int rc, int fd, Clock::time_point deadline, bool* again) {
  *again = false;
  if (rc > 0) return true;
  const int err = SSL_get_error(ssl, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    *again = WaitFd(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
  }
  return false;
}

int TlsExchange(int fd, const std::string& request, Clock::time_point deadline) {
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ClientContext()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  bool again = true;
  while (again) {
    if (TlsStep(ssl.get(), SSL_connect(ssl.get()), fd, deadline, &again)) break;
    if (!again) return -1;
  }
  again = true;
  while (again) {
    const int n = SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
    if (TlsStep(ssl.get(), n, fd, deadline, &again)) break;
    if (!again) return -1;
  }
  std::string in;
  char buf[65536];
  for (;;) {
    const int n = SSL_read(ssl.get(), buf, sizeof buf);
    if (n > 0) {
      if (in.size() < 64) in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (TlsStep(ssl.get(), n, fd, deadline, &again) || !again) break;
  }
  return StatusOf(in);
}

// The bytes a TLS client sends first, made by OpenSSL's client over memory BIOs.
const std::string& ClientHello() {
  static const std::string hello = [] {
    SSL* ssl = SSL_new(ClientContext());
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, in, out);  // ssl owns both from here
    SSL_connect(ssl);           // WANT_READ after writing the hello
    char* data = nullptr;
    const int64_t n = BIO_get_mem_data(out, &data);
    std::string bytes(data, static_cast<size_t>(std::max<int64_t>(0, n)));
    SSL_free(ssl);
    return bytes;
  }();
  return hello;
}

}  // namespace

ProbeResult Probe(const ProbeTarget& target, std::chrono::milliseconds timeout) {
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  ProbeResult r;
  const UniqueFd fd = ConnectFrom(target.source, target.port, Connect::kInProgress);
  if (!fd || !Connected(fd.get(), deadline)) {
    r.ms = Ms(Clock::now() - t0);
    return r;
  }
  const std::string request =
      "GET " + target.path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + target.extra_headers + "\r\n";
  r.status = target.tls ? TlsExchange(fd.get(), request, deadline)
                        : PlainExchange(fd.get(), request, deadline);
  r.ms = Ms(Clock::now() - t0);
  return r;
}

ProbeSeries ProbeFor(const ProbeTarget& target, std::chrono::milliseconds interval,
                     std::chrono::milliseconds duration, std::chrono::milliseconds timeout) {
  const int n = std::max<int>(1, static_cast<int>(duration / interval));
  std::vector<ProbeResult> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  const auto start = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_until(start + i * interval);
    threads.emplace_back([&, i] { results[static_cast<size_t>(i)] = Probe(target, timeout); });
  }
  for (std::thread& t : threads) t.join();
  ProbeSeries s;
  s.sent = n;
  std::vector<double> ms;
  for (const ProbeResult& r : results) {
    const bool ok = r.status == 200 && r.ms <= Ms(timeout);
    s.answered += ok ? 1 : 0;
    ms.push_back(ok ? r.ms : Ms(timeout));
  }
  s.p50_ms = Median(ms);
  s.p99_ms = Percentile(ms, 0.99);
  return s;
}

namespace {

struct Slot {
  UniqueFd fd;
  bool connected = false;
  size_t hello_sent = 0;
  Clock::time_point opened;
  Clock::time_point reconnect_at;
};

}  // namespace

Attack::Attack(AttackKind kind, int port, int connections)
    : kind_(kind), port_(port), connections_(connections) {
  if (kind_ == AttackKind::kTlsTrickle) ClientHello();  // made before the clock starts
  thread_ = std::thread([this] { Run(); });
}

Attack::~Attack() {
  if (thread_.joinable()) Stop();
}

AttackStats Attack::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return stats_;
}

void Attack::Run() {
  std::vector<Slot> slots(static_cast<size_t>(connections_));
  std::vector<double> lives;
  char scratch[4096];
  auto open = [&](Slot& s) {
    s = Slot{};
    s.fd = ConnectFrom("127.0.0.1", port_, Connect::kInProgress);
    s.opened = Clock::now();
    if (!s.fd) s.reconnect_at = s.opened + std::chrono::seconds(1);
  };
  auto on_connected = [&](Slot& s) {
    s.connected = true;
    ++stats_.opened;
    std::string first;
    if (kind_ == AttackKind::kHeaderTrickle) first = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (kind_ == AttackKind::kOneByte) first = "G";
    if (!first.empty()) send(s.fd.get(), first.data(), first.size(), MSG_NOSIGNAL);
  };
  auto on_closed = [&](Slot& s, bool by_server) {
    if (by_server && s.connected) {
      ++stats_.closed_by_server;
      lives.push_back(std::chrono::duration<double>(Clock::now() - s.opened).count());
    }
    s.fd.Reset();
    s.connected = false;
    s.reconnect_at = Clock::now() + std::chrono::seconds(1);
  };
  auto tick = [&](Slot& s) {
    if (kind_ == AttackKind::kHeaderTrickle) {
      static constexpr char kLine[] = "X-Trickle: 1\r\n";
      send(s.fd.get(), kLine, sizeof kLine - 1, MSG_NOSIGNAL);
    } else if (kind_ == AttackKind::kTlsTrickle && s.hello_sent < ClientHello().size()) {
      send(s.fd.get(), ClientHello().data() + s.hello_sent++, 1, MSG_NOSIGNAL);
    }
  };
  for (Slot& s : slots) open(s);
  auto next_tick = Clock::now() + std::chrono::seconds(1);
  std::vector<pollfd> pfds;
  std::vector<Slot*> polled;
  while (!stop_.load()) {
    pfds.clear();
    polled.clear();
    for (Slot& s : slots) {
      if (!s.fd) continue;
      pfds.push_back({s.fd.get(), static_cast<int16_t>(s.connected ? POLLIN : POLLOUT), 0});
      polled.push_back(&s);
    }
    poll(pfds.data(), pfds.size(), 50);
    for (size_t i = 0; i < pfds.size(); ++i) {
      Slot& s = *polled[i];
      if (pfds[i].revents == 0) continue;
      if (!s.connected) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        err == 0 ? on_connected(s) : on_closed(s, false);
        continue;
      }
      const ssize_t n = recv(s.fd.get(), scratch, sizeof scratch, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN)) on_closed(s, true);
    }
    const auto now = Clock::now();
    for (Slot& s : slots) {
      if (!s.fd && now >= s.reconnect_at) open(s);
      if (now >= next_tick && s.connected) tick(s);
    }
    if (now >= next_tick) next_tick = now + std::chrono::seconds(1);
  }
  for (const Slot& s : slots) stats_.open_at_end += s.connected ? 1 : 0;
  stats_.median_life_s = Median(lives);
}

PasswordAttackStats WrongPasswords(int port, const std::string& path, int clients,
                                   std::chrono::milliseconds duration) {
  std::mutex mu;
  PasswordAttackStats total;
  const auto end = Clock::now() + duration;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(clients));
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      PasswordAttackStats mine;
      ProbeTarget t{port, path, false, BasicAuthHeader("alice", "wrong"), "127.0.0.1"};
      while (Clock::now() < end) {
        const ProbeResult r = Probe(t, std::chrono::seconds(2));
        ++mine.requests;
        if (r.status == 401) {
          ++mine.unauthorized;
        } else if (r.status == 429) {
          ++mine.throttled;
        } else {
          ++mine.other;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      total.requests += mine.requests;
      total.unauthorized += mine.unauthorized;
      total.throttled += mine.throttled;
      total.other += mine.other;
    });
  }
  for (std::thread& t : threads) t.join();
  return total;
}

std::string BasicAuthHeader(const std::string& user, const std::string& password) {
  const std::string in = user + ":" + password;
  std::string b64(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  b64.resize(static_cast<size_t>(n));
  return "Authorization: Basic " + b64 + "\r\n";
}

}  // namespace neuron::testing

#pragma once
// The clients of bench/http_abuse_bench.cc and of the soak's abuse load (tests/soak): a
// well-behaved scraper that probes one path at a
// fixed rate, and the attackers of docs/RELIABILITY.md#abuse (slow header lines, one byte and
// stop, a TLS ClientHello a byte at a time, idle connections, wrong passwords). Everything is
// loopback: attackers connect from 127.0.0.1, the scraper from 127.0.0.2 (both reach a server
// listening on 127.0.0.1), so a server that limits per address tells them apart as it would two
// pods.
//
// Every load is bounded: a fixed number of connections, a fixed duration, a timeout per probe.
// Thread-safety: a Probe call is thread-safe; an Attack is driven by its own thread and read
// after Stop.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace neuron::testing {

struct ProbeTarget {
  int port = 0;
  std::string path;           // "/metrics"
  bool tls = false;           // HTTPS (the certificate is not verified: the probe is timing)
  std::string extra_headers;  // "Authorization: Basic ...\r\n"
  std::string source = "127.0.0.2";
};

struct ProbeResult {
  int status = -1;  // -1: no HTTP answer within the timeout
  double ms = 0;    // connect to last byte
};

// One request on a new connection (HTTP/1.0, as the kubelet's probes and a first scrape make it).
ProbeResult Probe(const ProbeTarget& target, std::chrono::milliseconds timeout);

struct ProbeSeries {
  int sent = 0;
  int answered = 0;  // status 200 within the timeout
  double p50_ms = 0;
  double p99_ms = 0;  // failures count as the timeout
};

// Probes every `interval` for `duration`, each on its own thread so a stuck probe does not delay
// the next (at most duration/interval probes).
ProbeSeries ProbeFor(const ProbeTarget& target, std::chrono::milliseconds interval,
                     std::chrono::milliseconds duration, std::chrono::milliseconds timeout);

enum class AttackKind {
  kHeaderTrickle,  // a request line, then one header line per tick, never the blank line
  kOneByte,        // "G", then nothing
  kTlsTrickle,     // a real ClientHello, one byte per tick
  kIdle,           // connect, send nothing
};

struct AttackStats {
  int64_t opened = 0;            // connections established
  int64_t closed_by_server = 0;  // ended by the server (EOF, reset or an answer and EOF)
  double median_life_s = 0;      // of the connections the server closed
  int open_at_end = 0;
};

// `connections` sockets from 127.0.0.1 to 127.0.0.1:port, kept open by reconnecting one second
// after the server closes one (a persistent attacker that does not flood connects).
class Attack {
 public:
  Attack(AttackKind kind, int port, int connections);
  ~Attack();
  Attack(const Attack&) = delete;
  Attack& operator=(const Attack&) = delete;

  AttackStats Stop();

 private:
  void Run();

  const AttackKind kind_;
  const int port_;
  const int connections_;
  std::atomic<bool> stop_{false};
  AttackStats stats_;
  std::thread thread_;
};

struct PasswordAttackStats {
  int64_t requests = 0;
  int64_t unauthorized = 0;  // 401: the server ran a password check and it failed
  int64_t throttled = 0;     // 429: refused without a check
  int64_t other = 0;         // no answer or another status
};

// `clients` threads from 127.0.0.1, each sending GET `path` with a wrong password back to back
// (a new connection per request) until `duration` has passed.
PasswordAttackStats WrongPasswords(int port, const std::string& path, int clients,
                                   std::chrono::milliseconds duration);

// "Authorization: Basic base64(user:password)\r\n".
std::string BasicAuthHeader(const std::string& user, const std::string& password);

}  // namespace neuron::testing

#pragma once
// The HTTP server's network side: one thread with an epoll loop that owns every connection,
// accepts, does TLS handshakes, reads and parses requests (http/request_parser.h) and writes
// answers, all without blocking. Only a complete, well-formed request leaves it, to the server's
// workers (HttpServer::Options::threads), which run the handler and hand the answer back with
// Complete. So a client that is slow (a header line every few seconds, one byte and silence, a
// ClientHello a byte at a time) or idle costs a socket and a buffer, never a worker.
//
// Why this shape: each connection is in one state, and every state but "at a worker" has a
// deadline (Go's net/http server has the same set: ReadHeaderTimeout, IdleTimeout, WriteTimeout,
// and the TLS handshake bounded like the head):
//   handshake  TLS handshake under way        handshake_timeout from accept
//   idle       no byte of a request yet       request_timeout from accept for a connection's
//                                             first request, idle_timeout after an answer
//   reading    part of a request              request_timeout from its first byte (the first
//                                             request's from accept)
//   working    at a worker                    none: the handler is ours
//   delayed    answer held back (a refusal)   the delay the worker asked for
//   writing    answer not yet taken           write_timeout
//   closing    answer sent, draining          `linger` (then closed): the client reads the
//                                             whole answer before the close, instead of a reset
// A connection past its deadline is reset without an answer. Two caps bound the connections:
// max_connections_per_address for each client address and max_connections in all. A connection
// beyond a cap is not refused: the oldest connection that is not at a worker or writing is shed
// instead (closing first, then idle, then the longest unfinished), from the same address, or
// for the overall cap from the address that holds the most. Only when every candidate is busy
// is the new one closed. Closed and shed connections are counted and summarized in the log at
// most every 10 s (a warning naming the address that caused most).
//
// Thread-safety: Start, Stop and the destructor from one thread; Complete from any thread. The
// submit callback runs on the loop thread and must not block.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/base/unique_fd.h"
#include "http/http_server.h"

namespace spdlog {
class logger;
}

namespace neuron {

class TlsContextReloader;

struct LoopLimits {
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{120000};
  std::chrono::milliseconds write_timeout{10000};
  std::chrono::milliseconds linger{500};
  size_t max_connections = 512;
  size_t max_connections_per_address = 64;
  size_t max_request_bytes = 16 * 1024;
  bool write_methods = false;  // HttpServer::Options::write_methods
};

// A request for the workers; `conn` names the connection to Complete.
struct LoopJob {
  uint64_t conn = 0;
  HttpRequest request;
  bool keep_alive = false;
};

// The bytes of an answer: status line, Content-Type, Content-Length, the extra headers, Connection,
// and the body unless `head`.
std::string SerializeResponse(const HttpResponse& r, bool head, bool keep_alive);

class ConnectionLoop {
 public:
  using Submit = std::function<void(LoopJob)>;

  // `listen_fd` is bound and listening (non-blocking); `tls` is null for plain HTTP and is owned
  // by the loop thread from Start on.
  ConnectionLoop(UniqueFd listen_fd, std::unique_ptr<TlsContextReloader> tls, LoopLimits limits,
                 std::shared_ptr<spdlog::logger> log, Submit submit);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  absl::Status Start();
  // Stops the thread and closes every connection. Complete may still be called; it is dropped.
  void Stop();
  // The answer to job `conn`, whole, sent once `delay` has passed (a tarpit for clients that are
  // being refused: the connection waits at no cost but its socket, and is not shed meanwhile).
  // A connection that went away meanwhile drops it.
  void Complete(uint64_t conn, std::string bytes, bool keep_alive,
                std::chrono::milliseconds delay = std::chrono::milliseconds(0));

  bool tls() const { return tls_ != nullptr; }

  struct Conn;    // defined in connection_loop.cc
  enum class Io;  // how a read, write or handshake step ended

 private:
  using Clock = std::chrono::steady_clock;

  void Run();
  void Accept(Clock::time_point now);
  void Admit(UniqueFd fd, std::string remote, Clock::time_point now);
  bool Shed(const std::string& address);
  bool ShedForTotal();
  void Drive(Conn& c, Clock::time_point now);
  bool TryParse(Conn& c, Clock::time_point now);
  void StartWrite(Conn& c, std::string bytes, bool keep_alive, Clock::time_point now);
  void BeginClosing(Conn& c, Clock::time_point now);
  void Wait(Conn& c, Io io);
  void SetInterest(Conn& c, uint32_t events);
  // Closes and forgets connection `id`; `abort` resets it (deadlines, shedding).
  void Close(uint64_t id, bool abort = false);
  void TakeCompleted(Clock::time_point now);
  void Sweep(Clock::time_point now);
  void Report(Clock::time_point now);

  UniqueFd listen_fd_;
  std::unique_ptr<TlsContextReloader> tls_;
  const LoopLimits limits_;
  const std::shared_ptr<spdlog::logger> log_;
  const Submit submit_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::thread thread_;
  std::atomic<bool> stop_{false};

  // Owned by the loop thread.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, size_t> per_address_;
  uint64_t next_id_ = 2;
  Clock::time_point accept_paused_until_;
  bool accept_paused_ = false;
  struct Counts {
    uint64_t handshake = 0, request = 0, idle = 0, write = 0, shed = 0, refused = 0;
  } counts_;
  std::unordered_map<std::string, uint64_t> offenders_;  // address -> closed or shed, this window
  Clock::time_point last_report_;

  std::mutex mu_;  // guards completed_
  struct Completed {
    uint64_t conn;
    std::string bytes;
    bool keep_alive;
    std::chrono::milliseconds delay;
  };
  std::deque<Completed> completed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neuron

#pragma once
// A small HTTP(S) server for the agent's endpoints (/metrics, /healthz, /readyz, landing pages),
// shared by the exporter and the device plugin. Our own small server; TLS through OpenSSL and basic
// auth per the exporter-toolkit web config (http/web_config.h).
//
// Routing is by exact path (or Options::fallback). Unregistered paths get 404, methods other than
// GET and HEAD 405 (unless Options::write_methods), request heads larger than `max_request_bytes`
// 431, bodies beyond it 413, and malformed ones 400 (the parser is strict:
// http/request_parser.h). HEAD answers as GET without the body.
//
// Holding under abuse: one thread owns every connection and does all network I/O without
// blocking, TLS handshakes included; workers only run handlers (http/connection_loop.h). Every
// connection has a deadline in each state (TLS handshake, request, idle keep-alive, unread
// answer), each address may hold `max_connections_per_address` connections and the server
// `max_connections`, and beyond a cap the oldest idle connection is shed rather than the new one
// refused.
//
// Basic auth: with users configured, every path but `public_paths` (/healthz and /readyz:
// liveness and readiness reveal nothing and the kubelet probes them without credentials) answers
// 401 with `WWW-Authenticate` until credentials match. Wrong passwords cost bounded CPU: few
// bcrypt checks run at once and an address that keeps failing is locked out for a while, both
// answered 429 (http/login_limiter.h). Basic auth over plain HTTP is logged as a warning at start.
//
// With TLS, a certificate, key or client CA replaced on disk is served, without a restart, on every
// connection accepted more than a second after the change; connections already open keep theirs,
// and files that fail to load are logged and leave the working certificate in place
// (http/tls_context.h). The basic-auth users of `web_config_file` are re-read when it changes;
// a version of the file that would turn authentication off, change TLS, or that cannot be used
// (empty, unreadable, invalid) is not applied and is warned about until fixed
// (http/web_config_reloader.h).
//
// Thread-safety: handlers run concurrently on up to `threads` worker threads, so they must be
// thread-safe. Start, port and the destructor may be called from any one thread.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "http/login_limiter.h"
#include "http/web_config.h"

namespace neuron {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD" (others only with Options::write_methods)
  std::string path;    // "/metrics", URL-decoded, without the query
  std::string query;   // after '?', raw; "" when none
  std::vector<std::pair<std::string, std::string>> headers;
  std::string remote_address;  // "127.0.0.1"
  bool tls = false;
  std::string body;  // only with Options::write_methods (otherwise bodies are discarded)

  // The first header of that name (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

class HttpServer {
 public:
  struct Options {
    // "host:port", ":port" or "port" (all IPv4 interfaces); port 0 picks a free port. Or
    // "unix:PATH": a Unix socket of mode 0660 (a stale socket file there is replaced, and the
    // file is removed at stop); port() is then 0 and every client counts as address "unix".
    std::string listen_address = "127.0.0.1:0";
    std::optional<WebConfig> web_config;
    // The file `web_config` was read from, when there is one: its basic_auth_users are re-read
    // when it changes (http/web_config_reloader.h). Empty: `web_config` holds for good.
    std::string web_config_file;
    std::map<std::string, HttpHandler> handlers;  // path -> handler
    // Paths without an exact handler go here when set (404 otherwise): a handler that routes by
    // prefix itself, such as the simulator's API stand-in (driver-sim/controlplane/).
    HttpHandler fallback;
    // Also accept POST, PUT, PATCH and DELETE and hand their bodies (within max_request_bytes) to
    // the handler. Off everywhere but in the simulator's API stand-in: the agent's own endpoints
    // are read-only (docs/OPERATIONS.md#privilege-model).
    bool write_methods = false;
    size_t max_request_bytes = 16 * 1024;  // request line + headers (+ body)
    int threads = 4;                       // handler threads
    // Deadlines (http/connection_loop.h): the whole request (head and body) from its first byte,
    // a connection's first request from accept (from the end of its TLS handshake); the TLS
    // handshake from accept; a keep-alive connection without a request; an answer the client
    // does not take.
    int request_timeout_ms = 10000;
    int handshake_timeout_ms = 10000;
    int idle_timeout_ms = 120000;
    int write_timeout_ms = 10000;
    size_t max_connections = 512;
    size_t max_connections_per_address = 64;
    // Paths answered without credentials when basic auth is on.
    std::set<std::string> public_paths = {"/healthz", "/readyz"};
    LoginLimits login_limits;  // http/login_limiter.h
    std::string logger_name = "http";
  };

  // Binds and starts serving. Errors: InvalidArgument for a bad address, Unavailable when the
  // port cannot be bound, FailedPrecondition naming the file when TLS set-up fails.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(Options options);
  ~HttpServer();  // stops accepting, waits for running handlers
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port
  bool tls() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neuron

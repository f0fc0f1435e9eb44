#pragma once
// A small HTTP(S) server for the agent's endpoints (/metrics, /healthz, /readyz, landing pages),
// shared by the exporter and the device plugin. Our own small server; TLS through OpenSSL and basic
// auth per the exporter-toolkit web config (http/web_config.h).
//
// Routing is by exact path. Unregistered paths get 404, methods other than GET and HEAD 405,
// requests larger than `max_request_bytes` 413 (or 400 for malformed ones), and with basic auth
// configured every path answers 401 with `WWW-Authenticate` until credentials match. HEAD answers
// as GET without the body.
//
// With TLS, a certificate, key or client CA replaced on disk is served, without a restart, on every
// connection accepted more than a second after the change; connections already open keep theirs,
// and files that fail to load are logged and leave the working certificate in place
// (http/tls_context.h). The same holds for the basic-auth users of `web_config_file`.
//
// Thread-safety: handlers run concurrently on up to `threads` worker threads, so they must be
// thread-safe. Start, port and the destructor may be called from any one thread.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "http/web_config.h"

namespace neuron {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD" (others never reach a handler)
  std::string path;    // "/metrics", URL-decoded, without the query
  std::string query;   // after '?', raw; "" when none
  std::vector<std::pair<std::string, std::string>> headers;
  std::string remote_address;  // "127.0.0.1"
  bool tls = false;

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
    // "host:port", ":port" or "port" (all IPv4 interfaces); port 0 picks a free port.
    std::string listen_address = "127.0.0.1:0";
    std::optional<WebConfig> web_config;
    // The file `web_config` was read from, when there is one: its basic_auth_users are re-read
    // when it changes (http/web_config_reloader.h). Empty: `web_config` holds for good.
    std::string web_config_file;
    std::map<std::string, HttpHandler> handlers;  // path -> handler
    size_t max_request_bytes = 16 * 1024;         // request line + headers (+ body)
    int threads = 4;
    int request_timeout_ms = 10000;
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

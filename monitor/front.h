#pragma once
// The exporter's unprivileged front (docs/architecture.md#privilege-split): the process that
// listens for Prometheus, with TLS, basic auth and the server's abuse limits (http/http_server.h),
// and holds no device, no host mount and no privilege. Each authorized scrape is forwarded to
// the privileged collector, a `neuron-exporter` serving on a Unix socket in a directory only the
// pod's containers mount, as a request this process writes itself (http/local_client.h): no byte
// a network client sent reaches the privileged side.
//
// Paths: the telemetry path and /readyz go to the collector's same paths; /plugin/metrics to the
// device plugin's /metrics when `plugin_upstream` is set (the plugin has no network port);
// /healthz is answered here, so that a slow or restarting collector never gets the front killed
// by its liveness probe. An upstream that cannot be reached, is too slow, or answers garbage gives
// 503 with the reason in the body, logged (at most once every 10 s per upstream, with a count).
//
// At most `threads - 1` forwards run at once (one worker always stays free for /healthz and
// /readyz); a scrape beyond that is answered 503 at once rather than queued behind a stuck
// upstream.
//
// Thread-safety: the handlers are called concurrently by the server's workers; they share only
// atomics.

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "http/http_server.h"

namespace neuron::monitor {

struct FrontOptions {
  std::string upstream;         // the collector: "unix:/run/neuron-node-agent/exporter.sock"
  std::string plugin_upstream;  // the device plugin's HTTP socket, or "" for no /plugin/metrics
  std::string telemetry_path = "/metrics";
  std::chrono::milliseconds timeout{5000};  // one forward, connect to last byte
  int threads = 4;                          // the server's workers (HttpServer::Options::threads)
};

// The front's handlers, for HttpServer::Options::handlers.
std::map<std::string, HttpHandler> FrontHandlers(const FrontOptions& options);

}  // namespace neuron::monitor

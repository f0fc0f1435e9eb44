#pragma once
// A small blocking HTTP/1.1 client for the agent's own sockets: the exporter's front asks the
// privileged collector for /metrics over a Unix socket (docs/architecture.md#privilege-split),
// and `neuron-device-plugin --probe` asks the plugin for /healthz. One request per connection
// (`Connection: close`), plain HTTP only, and one deadline for the whole exchange (connect,
// send, read), so a caller never waits longer than it asked however the server behaves.
//
// The request is written here from fixed parts (method GET, a path, Host: localhost): nothing a
// network client sent is passed through, so the server behind the socket parses only what this
// code writes.
//
// Thread-safe: no shared state.

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace neuron {

struct LocalResponse {
  int status = 0;
  std::string content_type;  // "" when the answer has none
  std::string body;
};

struct LocalRequestOptions {
  std::chrono::milliseconds timeout{2000};  // the whole exchange
  size_t max_response_bytes = 64 << 20;     // head and body; past it the answer is refused
};

// GET `path` from `address`: "unix:PATH" or "host:port". Errors: InvalidArgument for a bad
// address, Unavailable when it cannot connect or the connection breaks, DeadlineExceeded past
// the timeout, DataLoss for an answer that is not HTTP/1.x, is cut short or too large.
absl::StatusOr<LocalResponse> LocalGet(std::string_view address, std::string_view path,
                                       const LocalRequestOptions& options = {});

// The exec probes of the DaemonSet (`--probe PATH` of both binaries): GET `path` within
// `timeout` (the kubelet's exec probe default is 1 s); OK on 200, otherwise an error naming the
// address and what went wrong (the status and body of another answer).
absl::Status Probe(std::string_view address, std::string_view path,
                   std::chrono::milliseconds timeout = std::chrono::seconds(1));

}  // namespace neuron

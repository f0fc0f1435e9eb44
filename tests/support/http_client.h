#pragma once
// A minimal blocking HTTP/1.0 client over TCP for tests and benchmarks: one request per
// connection, the whole answer read until the server closes; and the two helpers every user of
// it needs. No GoogleTest dependency, so benchmarks link it too. Thread-safe (no shared state).

#include <string>
#include <string_view>

namespace neuron::testing {

struct HttpResult {
  int status = -1;  // -1: connection failed or no HTTP answer
  std::string headers;
  std::string body;
};

// Sends `raw` (a complete request) to 127.0.0.1:port and reads the answer.
HttpResult HttpRaw(int port, const std::string& raw, int timeout_ms = 10000);
// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();
// Percent-encodes everything but unreserved characters (RFC 3986), for query strings.
std::string UrlEncode(std::string_view s);

// GET `target` ("/metrics?x=1") with optional extra header lines ("Authorization: ...\r\n").
HttpResult HttpGet(int port, const std::string& target, const std::string& extra_headers = "");

}  // namespace neuron::testing

#pragma once
// A minimal blocking HTTP/1.0 client over TCP for tests: one request per connection, the whole
// answer read until the server closes. Thread-safe (no shared state).

#include <string>

namespace neuron::testing {

struct HttpResult {
  int status = -1;  // -1: connection failed or no HTTP answer
  std::string headers;
  std::string body;
};

// Sends `raw` (a complete request) to 127.0.0.1:port and reads the answer.
HttpResult HttpRaw(int port, const std::string& raw, int timeout_ms = 10000);
// GET `target` ("/metrics?x=1") with optional extra header lines ("Authorization: ...\r\n").
HttpResult HttpGet(int port, const std::string& target, const std::string& extra_headers = "");

}  // namespace neuron::testing

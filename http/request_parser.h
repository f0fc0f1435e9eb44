#pragma once
// The parts of the HTTP server that read bytes from the network, as pure functions on a buffer:
// the request head (request line, header lines, the limits and refusals the server applies) and
// the credentials of an `Authorization: Basic` header. Kept apart from the sockets so that they
// can be fuzzed (tests/fuzz/http_request_fuzz.cc, docs/RELIABILITY.md#fuzzing).
//
// The head parser is deliberately lenient where leniency cannot hurt a GET-only server: the
// request line is split at its first and last space (a target may hold spaces), header names are
// taken verbatim up to the first ':', values lose surrounding spaces and tabs. Anything with a
// transfer coding (chunked or any other) is refused with 400: request bodies need a
// Content-Length, and are read and discarded.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/http_server.h"

namespace neuron {

struct ParsedRequest {
  enum class Outcome {
    kIncomplete,  // no blank line yet and still within the limit: read more
    kParsed,      // `request` is complete; a GET or HEAD with a valid path
    kRefused,     // answer `status` with `reason` as the body
  };
  Outcome outcome = Outcome::kIncomplete;
  HttpRequest request;      // method, path, query, headers (as far as parsed when refused)
  size_t head_bytes = 0;    // bytes of the buffer the head took, blank line included
  size_t body_bytes = 0;    // Content-Length: read and discard these before answering
  bool keep_alive = false;  // whether the connection may serve another request
  int status = 0;           // kRefused: 400, 405 or 413
  std::string reason;       // kRefused: the answer's body
  bool omit_body = false;   // kRefused: a HEAD request whose answer carries no body
};

// Parses the request at the start of `buffer`. `max_bytes` bounds the head, and the head plus its
// body (the server's Options::max_request_bytes, at least 1024); beyond it the answer is 413.
// A refusal with body_bytes > 0 (405, bad target) comes after the head was parsed: the server
// reads the body first so that the connection stays in step.
ParsedRequest ParseRequest(std::string_view buffer, size_t max_bytes);

struct BasicCredentials {
  std::string user;
  std::string password;
};

// The user and password of an Authorization header value "Basic base64(user:password)" (scheme
// case-insensitive, RFC 7617; base64 per RFC 4648 with optional padding). The user ends at the
// first ':'; the password may hold any bytes. nullopt for other schemes and malformed values.
std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view header);

}  // namespace neuron

#pragma once
// The parts of the HTTP server that read bytes from the network, as pure functions on a buffer:
// the request head (request line, header lines, the limits and refusals the server applies) and
// the credentials of an `Authorization: Basic` header. Kept apart from the sockets so that they
// can be fuzzed (tests/fuzz/http_request_fuzz.cc, docs/RELIABILITY.md#fuzzing).
//
// Strict, as RFC 9112 asks of a server (lenient parsing is how requests get smuggled): a head is
// served only when it follows the grammar exactly, and anything else is refused with 400 and the
// connection closed. In particular (RFC 9112 section in brackets):
//   - the request line is method SP request-target SP HTTP-version, single spaces [3];
//   - lines end in CRLF; a bare CR, a bare LF or a NUL anywhere in the head is refused [2.2], as
//     is a control character in a field value (RFC 9110 5.5);
//   - a field name is a token followed directly by ':' (whitespace before the colon: 400) [5.1];
//     a line starting with whitespace is obsolete line folding: 400 [5.2];
//   - HTTP/1.1 needs exactly one Host field, HTTP/1.0 at most one, and its value is empty or
//     uri-host [":" port] (RFC 3986 3.2.2) [3.2];
//   - Content-Length is one field of 1*DIGIT; a second one, even with the same value, or a list
//     is 400 [6.3]; any Transfer-Encoding is 400 (bodies need a Content-Length; they are read
//     and discarded);
//   - the target is origin-form ("/path?query") or absolute-form ("http://host:port/path"; no
//     userinfo, RFC 9110 4.2.4), whose path is used and whose authority is ignored like Host
//     [3.2.1, 3.2.2]; its characters are those of RFC 3986's path and query, percent-encoding
//     included, plus '[' and ']' in the query, which clients send unencoded;
//   - HTTP-version is "HTTP/" DIGIT "." DIGIT: 1.0 is 1.0, 1.x above is served as 1.1 (RFC 9110
//     2.5), another major version is 505.
// Empty lines before the request line, which a server SHOULD ignore [2.2], are refused instead:
// no client of these endpoints sends them.
//
// When a head has several faults, the status is the first that applies in this order: 431 (head
// beyond the limit, RFC 6585 5); 400 (bytes, request line, field lines); 505; 400 (Host,
// Content-Length, Transfer-Encoding); 413 (body beyond the limit); 405 (method); 400 (target).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/http_server.h"

namespace neuron {

struct ParsedRequest {
  enum class Outcome {
    kIncomplete,  // no blank line yet and still within the limit: read more
    kParsed,      // `request` is complete; a GET or HEAD (or a write method) with a valid path
    kRefused,     // answer `status` with `reason` as the body
  };
  Outcome outcome = Outcome::kIncomplete;
  HttpRequest request;      // method, path, query, headers (as far as parsed when refused)
  size_t head_bytes = 0;    // bytes of the buffer the head took, blank line included (0: unknown)
  size_t body_bytes = 0;    // Content-Length: read and discard these before answering
  bool keep_alive = false;  // whether the connection may serve another request
  int status = 0;           // kRefused: 400, 405, 413, 431 or 505
  std::string reason;       // kRefused: the answer's body
  bool omit_body = false;   // kRefused: a HEAD request, whose answer carries no body
};

// Parses the request at the start of `buffer`. `max_bytes` bounds the head, and the head plus its
// body (the server's Options::max_request_bytes, at least 1024); a head beyond it is answered
// 431, a body beyond it 413.
// A bad byte (NUL, bare CR or LF) is refused as soon as it is in the buffer, before the head is
// complete. Only a 405 keeps the connection (body_bytes tells the server what to discard first);
// every other refusal closes it.
// `write_methods` also accepts POST, PUT, PATCH and DELETE (HttpServer::Options::write_methods).
ParsedRequest ParseRequest(std::string_view buffer, size_t max_bytes, bool write_methods = false);

struct BasicCredentials {
  std::string user;
  std::string password;
};

// The user and password of an Authorization header value "Basic base64(user:password)" (scheme
// case-insensitive, RFC 7617; base64 per RFC 4648 with optional padding). The user ends at the
// first ':'; the password may hold any bytes. nullopt for other schemes and malformed values.
std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view header);

}  // namespace neuron

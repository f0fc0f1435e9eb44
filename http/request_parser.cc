#include "http/request_parser.h"

#include <cctype>
#include <charconv>
#include <cstdint>

namespace neuron {
namespace {

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "%2F" -> "/"; nullopt unless every '%' is followed by two hex digits (RFC 3986 pct-encoded).
std::optional<std::string> UrlDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return std::nullopt;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The request line and header lines of `head` (without the blank line) into `req`, and the
// request target, which points into `head`. An error for a 400 answer when they are malformed.
std::optional<std::string> ParseHead(std::string_view head, HttpRequest* req,
                                     std::string_view* target, bool* keep_alive) {
  const size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return "bad request line\n";
  req->method = std::string(line.substr(0, sp1));
  *target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return "unsupported HTTP version\n";
  if (line_end != std::string_view::npos) {
    std::string_view rest = head.substr(line_end + 2);
    while (!rest.empty()) {
      const size_t e = rest.find("\r\n");
      const std::string_view h = rest.substr(0, e);
      rest = e == std::string_view::npos ? std::string_view() : rest.substr(e + 2);
      const size_t colon = h.find(':');
      if (colon == std::string_view::npos || colon == 0) return "malformed header\n";
      req->headers.emplace_back(std::string(h.substr(0, colon)),
                                std::string(Trim(h.substr(colon + 1))));
    }
  }
  *keep_alive = version == "HTTP/1.1";
  if (const auto conn = req->Header("Connection")) {
    if (StartsWithNoCase(*conn, "close")) *keep_alive = false;
    if (StartsWithNoCase(*conn, "keep-alive")) *keep_alive = true;
  }
  return std::nullopt;
}

ParsedRequest Refuse(ParsedRequest p, int status, std::string reason) {
  p.outcome = ParsedRequest::Outcome::kRefused;
  p.status = status;
  p.reason = std::move(reason);
  p.keep_alive = false;
  return p;
}

// RFC 4648 base64 (standard alphabet, padding optional). nullopt on any invalid character.
std::optional<std::string> DecodeBase64(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace

ParsedRequest ParseRequest(std::string_view buffer, size_t max_bytes) {
  ParsedRequest p;
  const size_t end = buffer.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (buffer.size() > max_bytes) return Refuse(std::move(p), 413, "request too large\n");
    return p;  // kIncomplete
  }
  if (end + 4 > max_bytes) return Refuse(std::move(p), 413, "request too large\n");
  p.head_bytes = end + 4;
  std::string_view target;
  if (std::optional<std::string> bad =
          ParseHead(buffer.substr(0, end), &p.request, &target, &p.keep_alive)) {
    return Refuse(std::move(p), 400, *std::move(bad));
  }
  if (p.request.Header("Transfer-Encoding")) {
    return Refuse(std::move(p), 400, "request bodies must have a Content-Length\n");
  }
  if (const auto cl = p.request.Header("Content-Length")) {
    uint64_t length = 0;
    const auto [ptr, ec] = std::from_chars(cl->data(), cl->data() + cl->size(), length);
    if (ec != std::errc() || ptr != cl->data() + cl->size()) {
      return Refuse(std::move(p), 400, "bad Content-Length\n");
    }
    // The limit counts the head without its blank line, as the server always has.
    if (length > max_bytes - end) return Refuse(std::move(p), 413, "request too large\n");
    p.body_bytes = static_cast<size_t>(length);
  }
  const bool head = p.request.method == "HEAD";
  if (p.request.method != "GET" && !head) {
    const bool keep_alive = p.keep_alive;
    p = Refuse(std::move(p), 405, "method not allowed\n");
    p.keep_alive = keep_alive;
    return p;
  }
  const size_t q = target.find('?');
  std::optional<std::string> path = UrlDecode(target.substr(0, q));
  if (!path || path->empty() || path->front() != '/') {
    p = Refuse(std::move(p), 400, "bad request target\n");
    p.omit_body = head;
    return p;
  }
  p.request.path = *std::move(path);
  if (q != std::string_view::npos) p.request.query = std::string(target.substr(q + 1));
  p.outcome = ParsedRequest::Outcome::kParsed;
  return p;
}

std::optional<BasicCredentials> ParseBasicAuthorization(std::string_view header) {
  constexpr std::string_view kPrefix = "Basic ";
  if (header.size() <= kPrefix.size() || !StartsWithNoCase(header, kPrefix)) return std::nullopt;
  header.remove_prefix(kPrefix.size());
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  std::optional<std::string> decoded = DecodeBase64(header);
  if (!decoded) return std::nullopt;
  const size_t colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return BasicCredentials{decoded->substr(0, colon), decoded->substr(colon + 1)};
}

}  // namespace neuron

#include "http/request_parser.h"

#include <cctype>
#include <charconv>
#include <cstdint>
#include <utility>

namespace neuron {
namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsNoCase(s.substr(0, prefix.size()), prefix);
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// RFC 9110 5.6.2 tchar.
bool IsTchar(char c) {
  return IsDigit(c) || IsAlpha(c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTchar(c)) return false;
  }
  return true;
}

// RFC 3986 2.3 unreserved and 2.2 sub-delims.
bool IsUnreserved(char c) {
  return IsDigit(c) || IsAlpha(c) || c == '-' || c == '.' || c == '_' || c == '~';
}
bool IsSubDelim(char c) {
  return std::string_view("!$&'()*+,;=").find(c) != std::string_view::npos;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Every character is unreserved, a sub-delim, in `extra`, or a '%' starting two hex digits.
bool IsUriPart(std::string_view s, std::string_view extra) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || HexValue(s[i + 1]) < 0 || HexValue(s[i + 2]) < 0) return false;
      i += 2;
    } else if (!IsUnreserved(c) && !IsSubDelim(c) && extra.find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

// "%2F" -> "/"; the caller has checked the encoding (IsUriPart).
std::string UrlDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      out.push_back(static_cast<char>(HexValue(in[i + 1]) * 16 + HexValue(in[i + 2])));
      i += 2;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

// uri-host [ ":" port ] (RFC 3986 3.2.2, 3.2.3), non-empty: an IP-literal ("[" IPv6 "]", its
// characters only) or a reg-name (IPv4 addresses are reg-names too), then optional digits.
bool IsHostPort(std::string_view s) {
  std::string_view host = s;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    for (char c : s.substr(1, close - 1)) {
      if (HexValue(c) < 0 && c != ':' && c != '.') return false;
    }
    host = s.substr(0, close + 1);
    port = s.substr(close + 1);
  } else {
    const size_t colon = s.find(':');
    host = s.substr(0, colon);
    port = colon == std::string_view::npos ? std::string_view() : s.substr(colon);
    if (host.empty() || !IsUriPart(host, "")) return false;
  }
  if (port.empty()) return host.size() == s.size();
  if (port.front() != ':') return false;
  for (char c : port.substr(1)) {
    if (!IsDigit(c)) return false;
  }
  return true;
}

// A NUL, a CR not followed by LF or an LF not preceded by CR in `head` [RFC 9112 2.2]; a CR at
// the very end may yet be followed by its LF.
std::optional<std::string> BadBytes(std::string_view head) {
  for (size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '\0') return "NUL in the request head\n";
    if (c == '\n' && (i == 0 || head[i - 1] != '\r')) return "bare LF in the request head\n";
    if (c == '\r' && i + 1 < head.size() && head[i + 1] != '\n') {
      return "bare CR in the request head\n";
    }
  }
  return std::nullopt;
}

struct RequestLine {
  std::string_view method, target;
  int major = 0, minor = 0;
};

// method SP request-target SP HTTP-version [RFC 9112 3]: the target is 1*VCHAR here; its form is
// checked last (ParseTarget).
std::optional<RequestLine> SplitRequestLine(std::string_view line) {
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return std::nullopt;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  RequestLine r{line.substr(0, sp1), line.substr(sp1 + 1, sp2 - sp1 - 1)};
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(r.method) || r.target.empty()) return std::nullopt;
  for (char c : r.target) {
    if (c <= 0x20 || c >= 0x7f) return std::nullopt;
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !IsDigit(version[5]) ||
      version[6] != '.' || !IsDigit(version[7])) {
    return std::nullopt;
  }
  r.major = version[5] - '0';
  r.minor = version[7] - '0';
  return r;
}

// field-name ":" OWS field-value OWS [RFC 9112 5]; the error for a 400 otherwise.
std::optional<std::string> ParseFieldLine(std::string_view line, HttpRequest* req) {
  if (line.empty()) return "empty header line\n";  // cannot follow the request line's CRLF alone
  if (line.front() == ' ' || line.front() == '\t') return "obsolete line folding\n";
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "header line without ':'\n";
  const std::string_view name = line.substr(0, colon);
  if (name.find_first_of(" \t") != std::string_view::npos) return "whitespace before ':'\n";
  if (!IsToken(name)) return "bad header name\n";
  std::string_view value = line.substr(colon + 1);
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return "control character in a header value\n";
  }
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  req->headers.emplace_back(std::string(name), std::string(value));
  return std::nullopt;
}

// The head without its blank line: the request line into `line`, the fields into `req`.
std::optional<std::string> ParseHead(std::string_view head, HttpRequest* req, RequestLine* line) {
  const size_t line_end = head.find("\r\n");
  std::optional<RequestLine> rl = SplitRequestLine(head.substr(0, line_end));
  if (!rl) return "bad request line\n";
  *line = *rl;
  req->method = std::string(rl->method);
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    const size_t e = rest.find("\r\n");
    const std::string_view field = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view() : rest.substr(e + 2);
    if (std::optional<std::string> bad = ParseFieldLine(field, req)) return bad;
  }
  return std::nullopt;
}

// Whether the connection stays open after the answer: RFC 9112 9.3, from the version and the
// Connection field's options (a comma-separated list, any number of fields).
bool KeepAlive(const HttpRequest& req, int minor) {
  bool close = false;
  bool keep = false;
  for (const auto& [name, value] : req.headers) {
    if (!EqualsNoCase(name, "Connection")) continue;
    std::string_view list = value;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      std::string_view option = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      while (!option.empty() && (option.front() == ' ' || option.front() == '\t')) {
        option.remove_prefix(1);
      }
      while (!option.empty() && (option.back() == ' ' || option.back() == '\t')) {
        option.remove_suffix(1);
      }
      close = close || EqualsNoCase(option, "close");
      keep = keep || EqualsNoCase(option, "keep-alive");
    }
  }
  return !close && (minor >= 1 || keep);
}

// Host [RFC 9112 3.2], Content-Length [6.3] and Transfer-Encoding; sets *length.
std::optional<std::string> CheckFraming(const HttpRequest& req, int minor, uint64_t* length) {
  int hosts = 0;
  int lengths = 0;
  for (const auto& [name, value] : req.headers) {
    if (EqualsNoCase(name, "Transfer-Encoding")) {
      return "request bodies must have a Content-Length\n";
    }
    if (EqualsNoCase(name, "Host")) {
      if (++hosts > 1) return "more than one Host\n";
      if (!value.empty() && !IsHostPort(value)) return "bad Host\n";
    }
    if (EqualsNoCase(name, "Content-Length")) {
      if (++lengths > 1) return "repeated Content-Length\n";
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), *length);
      if (value.empty() || !IsDigit(value.front()) || ec != std::errc() ||
          ptr != value.data() + value.size()) {
        return "bad Content-Length\n";
      }
    }
  }
  if (hosts == 0 && minor >= 1) return "HTTP/1.1 request without Host\n";
  return std::nullopt;
}

// The path and query of an origin-form or absolute-form target [RFC 9112 3.2.1, 3.2.2];
// nullopt for any other form or a character outside RFC 3986's path and query (plus '[' and ']'
// in the query, which clients send unencoded).
std::optional<std::pair<std::string, std::string>> ParseTarget(std::string_view target) {
  if (target.front() != '/') {
    const size_t sep = target.find("://");
    if (sep == std::string_view::npos) return std::nullopt;
    const std::string_view scheme = target.substr(0, sep);
    if (!EqualsNoCase(scheme, "http") && !EqualsNoCase(scheme, "https")) return std::nullopt;
    target.remove_prefix(sep + 3);
    const size_t end = target.find_first_of("/?");
    // No userinfo: RFC 9110 4.2.4 says to treat it as an error.
    if (!IsHostPort(target.substr(0, end))) return std::nullopt;
    target = end == std::string_view::npos ? std::string_view() : target.substr(end);
  }
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query =
      q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  if (!IsUriPart(path, ":@/") || !IsUriPart(query, ":@/?[]")) return std::nullopt;
  std::string decoded = path.empty() ? std::string("/") : UrlDecode(path);
  return std::make_pair(std::move(decoded), std::string(query));
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

ParsedRequest ParseRequest(std::string_view buffer, size_t max_bytes, bool write_methods) {
  ParsedRequest p;
  const size_t end = buffer.find("\r\n\r\n");
  const std::string_view head = buffer.substr(0, end == std::string_view::npos ? end : end + 4);
  // RFC 6585 5: a head beyond the limit is 431; 413 is for content (RFC 9110 15.5.14).
  if (head.size() > max_bytes) {
    return Refuse(std::move(p), 431, "request header fields too large\n");
  }
  if (std::optional<std::string> bad = BadBytes(head)) return Refuse(std::move(p), 400, *bad);
  if (end == std::string_view::npos) return p;  // kIncomplete
  p.head_bytes = end + 4;
  RequestLine line;
  const std::optional<std::string> bad_head = ParseHead(buffer.substr(0, end), &p.request, &line);
  p.omit_body = line.method == "HEAD";  // empty when the request line did not parse
  if (bad_head) return Refuse(std::move(p), 400, *bad_head);
  if (line.major != 1) return Refuse(std::move(p), 505, "HTTP version not supported\n");
  uint64_t length = 0;
  if (std::optional<std::string> bad = CheckFraming(p.request, line.minor, &length)) {
    return Refuse(std::move(p), 400, *bad);
  }
  // The limit counts the head without its blank line, as the server always has.
  if (length > max_bytes - end) return Refuse(std::move(p), 413, "request too large\n");
  p.body_bytes = static_cast<size_t>(length);
  p.keep_alive = KeepAlive(p.request, line.minor);
  const bool write = line.method == "POST" || line.method == "PUT" || line.method == "PATCH" ||
                     line.method == "DELETE";
  if (line.method != "GET" && line.method != "HEAD" && !(write_methods && write)) {
    const bool keep_alive = p.keep_alive;
    p = Refuse(std::move(p), 405, "method not allowed\n");
    p.keep_alive = keep_alive;
    return p;
  }
  std::optional<std::pair<std::string, std::string>> target = ParseTarget(line.target);
  if (!target) return Refuse(std::move(p), 400, "bad request target\n");
  p.request.path = std::move(target->first);
  p.request.query = std::move(target->second);
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

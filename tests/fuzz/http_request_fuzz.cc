// Fuzz target: what the HTTP server reads from the network (http/request_parser.h), the request
// head and the Basic credentials of an Authorization header. The input is the bytes a client
// sends.
//
// The reference below is written from the RFCs, not from the parser: RFC 9112's message grammar
// (2.1 message, 2.2 line ends and bare CR, 3 request line, 3.2 request target and Host, 5 field
// lines and obs-fold, 6.3 message length), RFC 9110's field values (5.5), versions (2.5) and
// connection options (7.6.1), RFC 3986's URI characters. For every input it decides the outcome
// on its own (incomplete, the refusal's status, or the parsed request) and the parser must agree
// exactly; there is no "lenient" branch. Where the RFCs leave a choice, the reference takes the
// strict one the server documents (refuse empty lines before the request line, refuse any
// Transfer-Encoding, refuse a repeated Content-Length even with equal values) and the order of
// statuses http/request_parser.h gives. Properties:
//   - the outcome and status agree, at three size limits, and for a second, pipelined request;
//   - a parsed request has the reference's method, decoded path, query, fields, keep-alive and
//     body length; a refusal keeps the connection only for 405;
//   - Basic credentials round-trip through base64, and malformed ones are refused.
// Over-reads are ASan's to find (the asan preset and `make fuzz`).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request_parser.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using neuron::ParsedRequest;
using Outcome = ParsedRequest::Outcome;
using Fields = std::vector<std::pair<std::string, std::string>>;
constexpr size_t kServerLimit = size_t{16} * 1024;  // HttpServer::Options::max_request_bytes

// ---- Character classes, spelled as the ABNF spells them ----
constexpr std::string_view kDigit = "0123456789";
constexpr std::string_view kHexDig = "0123456789ABCDEFabcdef";
constexpr std::string_view kAlpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
constexpr std::string_view kTcharExtra = "!#$%&'*+-.^_`|~";  // RFC 9110 5.6.2
constexpr std::string_view kUnreservedExtra = "-._~";        // RFC 3986 2.3
constexpr std::string_view kSubDelims = "!$&'()*+,;=";       // RFC 3986 2.2

bool In(std::string_view set, char c) { return set.find(c) != std::string_view::npos; }
bool Tchar(char c) { return In(kDigit, c) || In(kAlpha, c) || In(kTcharExtra, c); }
bool Vchar(char c) { return c >= 0x21 && c <= 0x7e; }  // RFC 5234 B.1
bool ObsText(char c) { return static_cast<unsigned char>(c) >= 0x80; }
bool FieldVchar(char c) { return Vchar(c) || ObsText(c); }  // RFC 9110 5.5
bool Unreserved(char c) { return In(kDigit, c) || In(kAlpha, c) || In(kUnreservedExtra, c); }
bool Token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), Tchar); }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
bool SameNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

// RFC 3986: every character is unreserved, a sub-delim, one of `extra`, or pct-encoded.
bool UriChars(std::string_view s, std::string_view extra) {
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '%') {
      if (s.size() - i < 3 || !In(kHexDig, s[i + 1]) || !In(kHexDig, s[i + 2])) return false;
      i += 3;
      continue;
    }
    if (!Unreserved(s[i]) && !In(kSubDelims, s[i]) && !In(extra, s[i])) return false;
    ++i;
  }
  return true;
}

// RFC 3986 3.2.2-3.2.3: uri-host [ ":" port ], with IP-literal as "[" 1*(HEXDIG / ":" / ".") "]"
// (the characters of IPv6address) and reg-name for the rest; the host may not be empty.
bool HostAndPort(std::string_view s) {
  std::string_view rest;
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos || close < 2) return false;
    for (char c : s.substr(1, close - 1)) {
      if (!In(kHexDig, c) && c != ':' && c != '.') return false;
    }
    rest = s.substr(close + 1);
  } else {
    const std::string_view host = s.substr(0, s.find(':'));
    if (host.empty() || !UriChars(host, "")) return false;
    rest = s.substr(host.size());
  }
  if (rest.empty()) return true;
  return rest[0] == ':' &&
         std::all_of(rest.begin() + 1, rest.end(), [](char c) { return In(kDigit, c); });
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// ---- The reference's verdict ----
struct Verdict {
  Outcome outcome = Outcome::kIncomplete;
  int status = 0;
  size_t head_bytes = 0;
  size_t body_bytes = 0;
  bool keep_alive = false;
  bool omit_body = false;
  std::string method, path, query;
  Fields fields;
};

Verdict Refused(Verdict v, int status) {
  v.outcome = Outcome::kRefused;
  v.status = status;
  return v;
}

// RFC 9112 2.2: line ends are CRLF; a bare CR (here: followed by anything but LF) and a bare LF
// are invalid, as is NUL (RFC 9110 5.5).
bool LineEndsValid(std::string_view head) {
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\0') return false;
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) return false;
    if (head[i] == '\r' && i + 1 < head.size() && head[i + 1] != '\n') return false;
  }
  return true;
}

std::vector<std::string_view> Lines(std::string_view head) {
  std::vector<std::string_view> out;
  size_t from = 0;
  for (size_t crlf; (crlf = head.find("\r\n", from)) != std::string_view::npos; from = crlf + 2) {
    out.push_back(head.substr(from, crlf - from));
  }
  out.push_back(head.substr(from));
  return out;
}

// RFC 9112 5 (field-line = field-name ":" OWS field-value OWS) with 5.2 (obs-fold refused).
bool FieldLine(std::string_view line, Fields* fields) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !Token(line.substr(0, colon))) return false;
  std::string_view value = line.substr(colon + 1);
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return FieldVchar(c) || c == ' ' || c == '\t'; })) {
    return false;
  }
  const size_t first = value.find_first_not_of(" \t");
  value = first == std::string_view::npos
              ? std::string_view()
              : value.substr(first, value.find_last_not_of(" \t") - first + 1);
  fields->emplace_back(std::string(line.substr(0, colon)), std::string(value));
  return true;
}

std::vector<std::string_view> All(const Fields& fields, std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& [k, v] : fields) {
    if (SameNoCase(k, name)) out.push_back(v);
  }
  return out;
}

// RFC 9110 7.6.1: Connection is a list of options; RFC 9112 9.3 says what they mean per version.
bool Persistent(const Fields& fields, char minor) {
  bool close = false;
  bool keep = false;
  for (std::string_view list : All(fields, "Connection")) {
    // #element: elements separated by OWS "," OWS, empty ones allowed (RFC 9110 5.6.1).
    size_t from = 0;
    while (from <= list.size()) {
      const size_t comma = std::min(list.find(',', from), list.size());
      std::string_view element = list.substr(from, comma - from);
      while (!element.empty() && (element[0] == ' ' || element[0] == '\t')) {
        element.remove_prefix(1);
      }
      while (!element.empty() && (element.back() == ' ' || element.back() == '\t')) {
        element.remove_suffix(1);
      }
      close = close || SameNoCase(element, "close");
      keep = keep || SameNoCase(element, "keep-alive");
      from = comma + 1;
    }
  }
  return !close && (minor != '0' || keep);
}

// RFC 9112 3.2.1 origin-form and 3.2.2 absolute-form (http or https, uri-host [":" port], no
// userinfo: RFC 9110 4.2.4); path and query characters per RFC 3986 3.3-3.4 plus '[' ']' in the
// query (the server's documented allowance).
bool Target(std::string_view t, std::string* path, std::string* query) {
  if (t[0] != '/') {
    const size_t sep = t.find("://");
    if (sep == std::string_view::npos ||
        (!SameNoCase(t.substr(0, sep), "http") && !SameNoCase(t.substr(0, sep), "https"))) {
      return false;
    }
    t.remove_prefix(sep + 3);
    const size_t end = std::min(t.find('/'), t.find('?'));
    if (!HostAndPort(t.substr(0, end))) return false;
    t = end == std::string_view::npos ? std::string_view() : t.substr(end);
  }
  const size_t q = t.find('?');
  const std::string_view p = t.substr(0, q);
  const std::string_view qs = q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
  if (!UriChars(p, ":@/") || !UriChars(qs, ":@/?[]")) return false;
  *path = p.empty() ? "/" : PercentDecode(p);
  *query = std::string(qs);
  return true;
}

std::optional<uint64_t> Digits(std::string_view s) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return In(kDigit, c); })) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : s) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// Host, Content-Length and Transfer-Encoding (RFC 9112 3.2, 6.1, 6.3); 0 when the framing holds.
int FramingStatus(const Fields& fields, char minor, Verdict* v) {
  const std::vector<std::string_view> hosts = All(fields, "Host");
  const std::vector<std::string_view> lengths = All(fields, "Content-Length");
  if (!All(fields, "Transfer-Encoding").empty() || hosts.size() > 1 || lengths.size() > 1) {
    return 400;
  }
  if (hosts.empty() ? minor != '0' : (!hosts[0].empty() && !HostAndPort(hosts[0]))) return 400;
  if (!lengths.empty()) {
    const std::optional<uint64_t> n = Digits(lengths[0]);
    if (!n) return 400;
    v->body_bytes = *n;
  }
  return 0;
}

Verdict Reference(std::string_view in, size_t max) {
  Verdict v;
  const size_t end = in.find("\r\n\r\n");
  const std::string_view head = end == std::string_view::npos ? in : in.substr(0, end + 4);
  if (head.size() > max) return Refused(v, 431);  // RFC 6585 5
  if (!LineEndsValid(head)) return Refused(v, 400);
  if (end == std::string_view::npos) return v;
  v.head_bytes = end + 4;
  const std::vector<std::string_view> lines = Lines(in.substr(0, end));
  // request-line = method SP request-target SP HTTP-version (RFC 9112 3).
  const std::string_view line = lines[0];
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Refused(v, 400);
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!Token(method) || target.empty() || !std::all_of(target.begin(), target.end(), Vchar) ||
      version.size() != 8 || version.substr(0, 5) != "HTTP/" || !In(kDigit, version[5]) ||
      version[6] != '.' || !In(kDigit, version[7])) {
    return Refused(v, 400);
  }
  v.omit_body = method == "HEAD";
  for (size_t i = 1; i < lines.size(); ++i) {
    if (!FieldLine(lines[i], &v.fields)) return Refused(v, 400);
  }
  if (version[5] != '1') return Refused(v, 505);  // RFC 9110 2.5: 1.x above 1.1 is served as 1.1
  if (const int status = FramingStatus(v.fields, version[7], &v); status != 0) {
    return Refused(v, status);
  }
  if (v.body_bytes > max - end) return Refused(v, 413);
  v.keep_alive = Persistent(v.fields, version[7]);
  v.method = std::string(method);
  if (method != "GET" && method != "HEAD") return Refused(v, 405);
  if (!Target(target, &v.path, &v.query)) {
    v.keep_alive = false;
    return Refused(v, 400);
  }
  v.outcome = Outcome::kParsed;
  return v;
}

void CheckRequest(std::string_view in, size_t max) {
  const ParsedRequest p = neuron::ParseRequest(in, max);
  const Verdict v = Reference(in, max);
  FUZZ_CHECK(p.outcome == v.outcome);
  if (v.outcome == Outcome::kIncomplete) return;
  FUZZ_CHECK(p.head_bytes == v.head_bytes);
  if (v.outcome == Outcome::kRefused) {
    FUZZ_CHECK(p.status == v.status);
    FUZZ_CHECK(p.omit_body == v.omit_body);
    FUZZ_CHECK(p.keep_alive == (v.status == 405 && v.keep_alive));
    if (v.status == 405) FUZZ_CHECK(p.body_bytes == v.body_bytes);
    return;
  }
  FUZZ_CHECK(p.request.method == v.method);
  FUZZ_CHECK(p.request.path == v.path);
  FUZZ_CHECK(p.request.query == v.query);
  FUZZ_CHECK(p.request.headers == v.fields);
  FUZZ_CHECK(p.keep_alive == v.keep_alive);
  FUZZ_CHECK(p.body_bytes == v.body_bytes);
}

std::string Base64(std::string_view in, bool pad) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = 0;
    const size_t n = std::min<size_t>(3, in.size() - i);
    for (size_t k = 0; k < 3; ++k) {
      v = (v << 8) | (k < n ? static_cast<unsigned char>(in[i + k]) : 0u);
    }
    for (size_t k = 0; k < n + 1; ++k) out += kAlphabet[(v >> (18 - 6 * k)) & 63];
    if (pad) out.append(3 - n, '=');
  }
  return out;
}

// Round trip: user (up to the first ':') and password from the input, encoded as curl does.
void CheckCredentials(std::string_view in) {
  const size_t colon = in.find(':');
  const std::string user(in.substr(0, colon));
  const std::string password(colon == std::string_view::npos ? "" : in.substr(colon + 1));
  for (const bool pad : {true, false}) {
    std::string header = pad ? "Basic " : "bAsIc  ";
    header += Base64(user + ":" + password, pad);
    const auto parsed = neuron::ParseBasicAuthorization(header);
    FUZZ_CHECK(parsed && parsed->user == user && parsed->password == password);
  }
  // Without the colon there is no password: refused.
  if (colon == std::string_view::npos) {
    FUZZ_CHECK(!neuron::ParseBasicAuthorization("Basic " + Base64(user, true)));
  }
  // The input as a header value: accepted only when it is "Basic " and base64 of "user:...".
  if (const auto parsed = neuron::ParseBasicAuthorization(in)) {
    FUZZ_CHECK(SameNoCase(in.substr(0, 6), "Basic "));
    FUZZ_CHECK(parsed->user.find(':') == std::string::npos);
    std::string_view b64 = in.substr(6);
    while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
    while (!b64.empty() && b64.back() == '=') b64.remove_suffix(1);
    const std::string again = Base64(parsed->user + ":" + parsed->password, false);
    // Equal but for the last character, whose unused low bits the decoder ignores.
    FUZZ_CHECK(again.size() <= b64.size() && b64.size() - again.size() <= 1);
    FUZZ_CHECK(again.empty() ||
               again.substr(0, again.size() - 1) == b64.substr(0, again.size() - 1));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // The server's default limit, its floor, and one that the input itself passes.
  for (const size_t max : {kServerLimit, size_t{1024}, size / 2 + 1}) CheckRequest(in, max);
  // Pipelined: the second request starts where the first head and body end.
  const ParsedRequest first = neuron::ParseRequest(in, kServerLimit);
  if (first.outcome == Outcome::kParsed && first.head_bytes + first.body_bytes <= in.size()) {
    CheckRequest(in.substr(first.head_bytes + first.body_bytes), kServerLimit);
  }
  CheckCredentials(in.substr(0, 512));
  if (first.outcome == Outcome::kParsed) {
    if (const auto authz = first.request.Header("Authorization")) CheckCredentials(*authz);
  }
  return 0;
}

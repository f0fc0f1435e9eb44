// Fuzz target: what the HTTP server reads from the network (http/request_parser.h), the request
// head and the Basic credentials of an Authorization header. The input is the bytes a client
// sends. Properties:
//   - a head that follows RFC 9112's grammar (method SP target SP version, field-name ":" OWS
//     value OWS, CRLF line ends) parses to exactly what an independent split in this file says,
//     or is refused with the status the server's rules give (405 for other methods, 400 for a
//     bad target or Content-Length, 413 beyond the size limit);
//   - any other input is refused with a 4xx, or accepted only within the parser's documented
//     leniency (request line split at its first and last space, names verbatim to the first ':');
//   - sizes beyond the limit are refused with 413, checked at three limits;
//   - every transfer coding (chunked or not) is refused with 400, as the server has always done;
//   - Basic credentials round-trip through base64, and malformed ones are refused.
// Over-reads are ASan's to find (the asan preset and `make fuzz`).
#include <algorithm>
#include <cctype>
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

bool IsTchar(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTchar(c)) return false;
  }
  return true;
}
bool IsVisible(char c) { return static_cast<unsigned char>(c) > 0x20 && c != 0x7f; }
bool IsFieldChar(char c) { return IsVisible(c) || c == ' ' || c == '\t'; }
bool NoCaseEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The head as RFC 9112's grammar splits it; nullopt when it does not follow the grammar.
struct Reference {
  std::string method, target, version;
  std::vector<std::pair<std::string, std::string>> headers;
};

std::vector<std::string_view> SplitCrlf(std::string_view s) {
  std::vector<std::string_view> lines;
  for (size_t pos = 0;;) {
    const size_t e = s.find("\r\n", pos);
    lines.push_back(s.substr(pos, e == std::string_view::npos ? e : e - pos));
    if (e == std::string_view::npos) return lines;
    pos = e + 2;
  }
}

std::optional<std::pair<std::string, std::string>> SplitField(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) return std::nullopt;
  std::string_view value = line.substr(colon + 1);
  for (char c : value) {
    if (!IsFieldChar(c)) return std::nullopt;
  }
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return std::make_pair(std::string(line.substr(0, colon)), std::string(value));
}

std::optional<Reference> SplitHead(std::string_view head) {
  const std::vector<std::string_view> lines = SplitCrlf(head);
  const std::string_view line = lines[0];
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return std::nullopt;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  Reference ref{std::string(line.substr(0, sp1)),
                std::string(line.substr(sp1 + 1, sp2 - sp1 - 1)),
                std::string(line.substr(sp2 + 1)),
                {}};
  if (!IsToken(ref.method) || ref.target.empty()) return std::nullopt;
  for (char c : ref.target) {
    if (!IsVisible(c)) return std::nullopt;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    auto field = SplitField(lines[i]);
    if (!field) return std::nullopt;
    ref.headers.push_back(*std::move(field));
  }
  return ref;
}

std::optional<std::string_view> First(const Reference& ref, std::string_view name) {
  for (const auto& [k, v] : ref.headers) {
    if (NoCaseEqual(k, name)) return v;
  }
  return std::nullopt;
}

// RFC 3986 percent-decoding of the path; nullopt on a '%' without two hex digits.
std::optional<std::string> DecodePath(std::string_view s) {
  const std::string_view hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (s.size() - i < 3) return std::nullopt;
    const size_t hi =
        hex.find(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 1]))));
    const size_t lo =
        hex.find(static_cast<char>(std::tolower(static_cast<unsigned char>(s[i + 2]))));
    if (hi == std::string_view::npos || lo == std::string_view::npos) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Content-Length as 1*DIGIT within uint64; nullopt otherwise (the server answers 400).
std::optional<uint64_t> Length(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// The status the server's rules give a grammatical head (0: served), independently of the parser.
int ExpectedStatus(const Reference& ref, size_t head_len, size_t max) {
  if (ref.version != "HTTP/1.1" && ref.version != "HTTP/1.0") return 400;
  if (First(ref, "Transfer-Encoding")) return 400;  // chunked or any other coding
  if (const auto cl = First(ref, "Content-Length")) {
    const std::optional<uint64_t> n = Length(*cl);
    if (!n) return 400;
    if (*n > max - head_len) return 413;
  }
  if (ref.method != "GET" && ref.method != "HEAD") return 405;
  const std::string_view target = ref.target;
  const std::optional<std::string> path = DecodePath(target.substr(0, target.find('?')));
  if (!path || path->empty() || path->front() != '/') return 400;
  return 0;
}

void CheckGrammatical(const Reference& ref, const ParsedRequest& p, size_t head_len, size_t max) {
  const int status = ExpectedStatus(ref, head_len, max);
  if (status != 0) {
    FUZZ_CHECK(p.outcome == Outcome::kRefused && p.status == status);
    return;
  }
  FUZZ_CHECK(p.outcome == Outcome::kParsed);
  FUZZ_CHECK(p.request.method == ref.method);
  const std::string_view target = ref.target;
  const size_t q = target.find('?');
  FUZZ_CHECK(p.request.path == *DecodePath(target.substr(0, q)));
  FUZZ_CHECK(p.request.query == (q == std::string_view::npos ? "" : target.substr(q + 1)));
  FUZZ_CHECK(p.request.headers == ref.headers);
  bool keep_alive = ref.version == "HTTP/1.1";
  if (const auto conn = First(ref, "Connection")) {
    if (NoCaseEqual(conn->substr(0, 5), "close")) keep_alive = false;
    if (NoCaseEqual(conn->substr(0, 10), "keep-alive")) keep_alive = true;
  }
  FUZZ_CHECK(p.keep_alive == keep_alive);
  const auto cl = First(ref, "Content-Length");
  FUZZ_CHECK(p.body_bytes == (cl ? *Length(*cl) : 0));
}

// Outside the grammar: refused, or accepted within the documented leniency.
void CheckLenient(std::string_view head, const ParsedRequest& p) {
  if (p.outcome == Outcome::kRefused) {
    FUZZ_CHECK(p.status == 400 || p.status == 405 || p.status == 413);
    return;
  }
  FUZZ_CHECK(p.request.method == "GET" || p.request.method == "HEAD");
  FUZZ_CHECK(!p.request.path.empty() && p.request.path.front() == '/');
  FUZZ_CHECK(p.request.headers.size() + 1 == SplitCrlf(head).size());
  for (const auto& [name, value] : p.request.headers) {
    FUZZ_CHECK(!name.empty() && name.find(':') == std::string::npos);
    FUZZ_CHECK(name.find("\r\n") == std::string::npos && value.find("\r\n") == std::string::npos);
    if (!value.empty()) {
      FUZZ_CHECK(value.front() != ' ' && value.front() != '\t');
      FUZZ_CHECK(value.back() != ' ' && value.back() != '\t' && value.back() != '\r');
    }
  }
}

void CheckRequest(std::string_view in, size_t max) {
  const ParsedRequest p = neuron::ParseRequest(in, max);
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    // Without a blank line: wait for more, unless the limit is already passed.
    FUZZ_CHECK(p.outcome == (in.size() > max ? Outcome::kRefused : Outcome::kIncomplete));
    if (p.outcome == Outcome::kRefused) FUZZ_CHECK(p.status == 413);
    return;
  }
  FUZZ_CHECK(p.outcome != Outcome::kIncomplete);
  if (end + 4 > max) {
    FUZZ_CHECK(p.outcome == Outcome::kRefused && p.status == 413);
    return;
  }
  FUZZ_CHECK(p.head_bytes == end + 4);
  FUZZ_CHECK(p.body_bytes <= max - end);  // head and body within the limit
  if (p.outcome == Outcome::kParsed)
    FUZZ_CHECK(p.request.Header("Transfer-Encoding") == std::nullopt);
  const std::string_view head = in.substr(0, end);
  if (const std::optional<Reference> ref = SplitHead(head)) {
    CheckGrammatical(*ref, p, end, max);
  } else {
    CheckLenient(head, p);
  }
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
    const std::string header = (pad ? "Basic " : "bAsIc  ") + Base64(user + ":" + password, pad);
    const auto parsed = neuron::ParseBasicAuthorization(header);
    FUZZ_CHECK(parsed && parsed->user == user && parsed->password == password);
  }
  // Without the colon there is no password: refused.
  if (colon == std::string_view::npos) {
    FUZZ_CHECK(!neuron::ParseBasicAuthorization("Basic " + Base64(user, true)));
  }
  // The input as a header value: accepted only when it is "Basic " and base64 of "user:...".
  if (const auto parsed = neuron::ParseBasicAuthorization(in)) {
    FUZZ_CHECK(NoCaseEqual(in.substr(0, 6), "Basic "));
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
  for (const size_t max : {size_t{16 * 1024}, size_t{1024}, size / 2 + 1}) CheckRequest(in, max);
  // Pipelined: the second request starts where the first head and body end.
  const ParsedRequest first = neuron::ParseRequest(in, 16 * 1024);
  if (first.outcome == Outcome::kParsed && first.head_bytes + first.body_bytes <= in.size()) {
    CheckRequest(in.substr(first.head_bytes + first.body_bytes), 16 * 1024);
  }
  CheckCredentials(in.substr(0, 512));
  if (first.outcome == Outcome::kParsed) {
    if (const auto authz = first.request.Header("Authorization")) CheckCredentials(*authz);
  }
  return 0;
}

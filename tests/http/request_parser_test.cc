// Strict framing (http/request_parser.h, RFC 9112): each head that used to be accepted
// (space before a colon, a repeated or conflicting Content-Length, HTTP/1.1 without Host, a NUL,
// bare CR and LF, obsolete line folding) is refused with 400 and the reason a client sees; the
// forms RFC 9112 requires a server to accept (absolute-form, a Connection option list, Host with
// an IPv6 literal) are served. tests/fuzz/http_request_fuzz.cc checks the same rules on any input.
#include "http/request_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace neuron {
namespace {

using Outcome = ParsedRequest::Outcome;
constexpr size_t kMax = size_t{16} * 1024;  // the server's default limit

struct Refusal {
  const char* name;
  std::string head;
  int status;
  const char* reason;
};

class RefusedHeadTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(RefusedHeadTest, IsRefusedWithItsStatusAndReasonAndClosesTheConnection) {
  const Refusal& r = GetParam();
  const ParsedRequest p = ParseRequest(r.head, kMax);
  ASSERT_EQ(p.outcome, Outcome::kRefused) << r.name;
  EXPECT_EQ(p.status, r.status) << r.name;
  EXPECT_EQ(p.reason, std::string(r.reason) + "\n") << r.name;
  EXPECT_FALSE(p.keep_alive) << r.name;
}

const std::string kOk = "GET /metrics HTTP/1.1\r\nHost: x\r\n";

INSTANTIATE_TEST_SUITE_P(
    Rfc9112, RefusedHeadTest,
    ::testing::Values(
        Refusal{"space before colon", kOk + "Transfer-Encoding : chunked\r\n\r\n", 400,
                "whitespace before ':'"},
        Refusal{"tab before colon", kOk + "Content-Length\t: 0\r\n\r\n", 400,
                "whitespace before ':'"},
        Refusal{"repeated Content-Length", kOk + "Content-Length: 3\r\nContent-Length: 3\r\n\r\n",
                400, "repeated Content-Length"},
        Refusal{"conflicting Content-Length",
                kOk + "Content-Length: 3\r\nContent-Length: 4\r\n\r\n", 400,
                "repeated Content-Length"},
        Refusal{"Content-Length list", kOk + "Content-Length: 3, 3\r\n\r\n", 400,
                "bad Content-Length"},
        Refusal{"empty Content-Length", kOk + "Content-Length:\r\n\r\n", 400, "bad Content-Length"},
        Refusal{"signed Content-Length", kOk + "Content-Length: +3\r\n\r\n", 400,
                "bad Content-Length"},
        Refusal{"HTTP/1.1 without Host", "GET /metrics HTTP/1.1\r\nUser-Agent: u\r\n\r\n", 400,
                "HTTP/1.1 request without Host"},
        Refusal{"two Hosts", kOk + "Host: y\r\n\r\n", 400, "more than one Host"},
        Refusal{"Host with userinfo", "GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", 400, "bad Host"},
        Refusal{"NUL in a value", kOk + std::string("X-A: a\0b\r\n\r\n", 12), 400,
                "NUL in the request head"},
        Refusal{"bare CR", kOk + "X-A: a\rb\r\n\r\n", 400, "bare CR in the request head"},
        Refusal{"bare LF", "GET /metrics HTTP/1.1\nHost: x\r\n\r\n", 400,
                "bare LF in the request head"},
        Refusal{"obsolete line folding", kOk + "X-A: a\r\n b\r\n\r\n", 400,
                "obsolete line folding"},
        Refusal{"control character",
                kOk + "X-A: a\x01"
                      "b\r\n\r\n",
                400, "control character in a header value"},
        Refusal{"Transfer-Encoding", kOk + "Transfer-Encoding: chunked\r\n\r\n", 400,
                "request bodies must have a Content-Length"},
        Refusal{"two spaces in the request line", "GET  /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                "bad request line"},
        Refusal{"space in the target", "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                "bad request line"},
        Refusal{"empty line first", "\r\n" + kOk + "\r\n", 400, "bad request line"},
        Refusal{"lower-case version", "GET / http/1.1\r\nHost: x\r\n\r\n", 400, "bad request line"},
        Refusal{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP version not supported"},
        Refusal{"unencoded quote in the target", "GET /a\"b HTTP/1.1\r\nHost: x\r\n\r\n", 400,
                "bad request target"},
        Refusal{"fragment", "GET /a#b HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad request target"},
        Refusal{"asterisk-form", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad request target"},
        Refusal{"absolute-form with empty host", "GET http:///metrics HTTP/1.1\r\nHost: x\r\n\r\n",
                400, "bad request target"}),
    [](const ::testing::TestParamInfo<Refusal>& info) {
      std::string name;
      for (const char c : std::string(info.param.name)) name += std::isalnum(c) ? c : '_';
      return name;
    });

TEST(RequestParserTest, ABadByteIsRefusedBeforeTheHeadIsComplete) {
  // Without this, a client sending bare LFs would hold its connection to the deadline.
  const ParsedRequest p = ParseRequest("GET / HTTP/1.0\n", kMax);
  EXPECT_EQ(p.outcome, Outcome::kRefused);
  EXPECT_EQ(p.status, 400);
  // A CR at the end may still be followed by its LF.
  EXPECT_EQ(ParseRequest("GET / HTTP/1.0\r", kMax).outcome, Outcome::kIncomplete);
}

TEST(RequestParserTest, ServesTheFormsRfc9112Requires) {
  ParsedRequest p = ParseRequest(
      "GET http://[::1]:9478/m%65trics?a=1&m[]=2 HTTP/1.1\r\nHost: [::1]:9478\r\n\r\n", kMax);
  ASSERT_EQ(p.outcome, Outcome::kParsed) << p.reason;
  EXPECT_EQ(p.request.path, "/metrics");
  EXPECT_EQ(p.request.query, "a=1&m[]=2");
  EXPECT_TRUE(p.keep_alive);

  p = ParseRequest("GET http://node HTTP/1.1\r\nHost: node\r\n\r\n", kMax);
  ASSERT_EQ(p.outcome, Outcome::kParsed) << p.reason;
  EXPECT_EQ(p.request.path, "/");  // an empty path is "/"

  // Connection is a list of options; HTTP/1.0 keeps the connection only when asked.
  p = ParseRequest("GET / HTTP/1.0\r\nConnection: TE, Keep-Alive\r\n\r\n", kMax);
  ASSERT_EQ(p.outcome, Outcome::kParsed);
  EXPECT_TRUE(p.keep_alive);
  p = ParseRequest("GET / HTTP/1.1\r\nHost: x\r\nConnection: ,close\r\n\r\n", kMax);
  ASSERT_EQ(p.outcome, Outcome::kParsed);
  EXPECT_FALSE(p.keep_alive);
  // HTTP/1.0 needs no Host; an empty Host is allowed (RFC 9112 3.2); HTTP/1.2 is served as 1.1.
  EXPECT_EQ(ParseRequest("GET / HTTP/1.0\r\n\r\n", 1024).outcome, Outcome::kParsed);
  EXPECT_EQ(ParseRequest("GET / HTTP/1.1\r\nHost:\r\n\r\n", 1024).outcome, Outcome::kParsed);
  EXPECT_EQ(ParseRequest("GET / HTTP/1.2\r\nHost: x\r\n\r\n", 1024).outcome, Outcome::kParsed);
  // Field values may carry obs-text; surrounding whitespace is not part of them.
  p = ParseRequest("GET / HTTP/1.1\r\nHost: x\r\nX-A: \t caf\xc3\xa9 \t\r\n\r\n", 1024);
  ASSERT_EQ(p.outcome, Outcome::kParsed);
  EXPECT_EQ(p.request.Header("x-a"), "caf\xc3\xa9");
}

// Writes are the API stand-in's alone (HttpServer::Options::write_methods); everywhere else
// they stay 405.
TEST(RequestParserTest, WriteMethodsOnlyWhenAsked) {
  const std::string put = "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  EXPECT_EQ(ParseRequest(put, 1024).status, 405);
  const ParsedRequest p = ParseRequest(put, 1024, /*write_methods=*/true);
  ASSERT_EQ(p.outcome, Outcome::kParsed);
  EXPECT_EQ(p.request.method, "PUT");
  EXPECT_EQ(p.body_bytes, 2u);
  EXPECT_EQ(ParseRequest("TRACE /x HTTP/1.1\r\nHost: x\r\n\r\n", 1024, true).status, 405);
}

TEST(RequestParserTest, StatusesComeInTheDocumentedOrder) {
  // A bad header line outranks a method we do not serve; a method outranks a bad target.
  EXPECT_EQ(ParseRequest("POST /a\"b HTTP/1.1\r\nHost : x\r\n\r\n", 1024).status, 400);
  const ParsedRequest post = ParseRequest("POST /a\"b HTTP/1.1\r\nHost: x\r\n\r\n", 1024);
  EXPECT_EQ(post.status, 405);
  EXPECT_TRUE(post.keep_alive);  // only a 405 keeps the connection, once its body is read
  // A head beyond the limit is 431 (RFC 6585 5), even before it is complete or when it has other
  // faults; a body beyond the limit is 413 (content) before the method is looked at.
  EXPECT_EQ(
      ParseRequest("GET / HTTP/1.1\r\nHost: x\r\nX-A: " + std::string(2000, 'a'), 1024).status,
      431);
  EXPECT_EQ(
      ParseRequest("POST /a\"b HTTP/1.1\r\nHost : " + std::string(2000, 'a') + "\r\n\r\n", 1024)
          .status,
      431);
  EXPECT_EQ(ParseRequest("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", 1024).status,
            413);
  // A HEAD's refusal carries no body.
  EXPECT_TRUE(ParseRequest("HEAD /a\"b HTTP/1.1\r\nHost: x\r\n\r\n", 1024).omit_body);
}

}  // namespace
}  // namespace neuron

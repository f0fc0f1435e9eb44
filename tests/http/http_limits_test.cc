// The server holds under abuse (http/connection_loop.h): a slow or idle client never holds a
// worker, and is closed at its deadline; beyond the per-address or overall cap the oldest idle
// connection is shed and the new one served; an answer the client does not take is dropped at the
// write deadline; a refusal reaches the client whole although it is still sending. Deadlines are
// short here (hundreds of milliseconds) and every wait has a ceiling
// (docs/architecture.md#timing-in-tests). bench/http_abuse_bench.cc measures the same at scale.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "tests/support/http_test_client.h"

namespace neuron {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ConnectFrom;
using testing::ReadUntilClosed;
using testing::SendAll;
using testing::StatusFrom;

constexpr char kGet[] = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

HttpServer::Options Hello() {
  HttpServer::Options o;
  o.threads = 1;  // one worker: anything that held it would stall every other client
  o.handlers["/hello"] = [](const HttpRequest&) {
    HttpResponse r;
    r.body = "hello\n";
    return r;
  };
  return o;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A slow client: header lines trickled well inside any per-read timeout, never the
// blank line. With one worker, a server that read requests on its workers would serve nobody
// else until the client gave up; ours closes it at request_timeout_ms and serves others meanwhile.
TEST(HttpLimitsTest, SlowClientIsClosedAtItsDeadlineAndNeverHoldsTheWorker) {
  HttpServer::Options o = Hello();
  o.request_timeout_ms = 1000;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  const auto opened = Clock::now();
  UniqueFd slow = ConnectFrom("127.0.0.1", port);
  ASSERT_TRUE(slow);
  ASSERT_TRUE(SendAll(slow.get(), "GET /hello HTTP/1.1\r\nHost: x\r\n"));
  std::thread trickle([&] {
    for (int i = 0; i < 15; ++i) {
      std::this_thread::sleep_for(200ms);
      if (!SendAll(slow.get(), "X-Trickle: " + std::to_string(i) + "\r\n")) return;
    }
  });
  std::this_thread::sleep_for(300ms);
  // While the slow client trickles, another client is served at once.
  const auto t0 = Clock::now();
  EXPECT_EQ(StatusFrom("127.0.0.2", port, kGet), 200);
  EXPECT_LT(Seconds(Clock::now() - t0), 0.5) << "the worker was held by the slow client";

  const testing::ReadResult r = ReadUntilClosed(slow.get(), 10s);
  trickle.join();
  ASSERT_TRUE(r.closed) << "the slow client was never closed";
  EXPECT_TRUE(r.data.empty()) << "a client past its deadline gets no answer: " << r.data;
  const double life = Seconds(r.when - opened);
  EXPECT_GE(life, 0.9);
  EXPECT_LT(life, 2.5) << "closed long after its 1 s deadline";
}

TEST(HttpLimitsTest, OneByteAndSilenceIsClosedAtTheDeadline) {
  HttpServer::Options o = Hello();
  o.request_timeout_ms = 500;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const auto opened = Clock::now();
  UniqueFd fd = ConnectFrom("127.0.0.1", (*server)->port());
  ASSERT_TRUE(SendAll(fd.get(), "G"));
  const testing::ReadResult r = ReadUntilClosed(fd.get(), 10s);
  ASSERT_TRUE(r.closed);
  EXPECT_LT(Seconds(r.when - opened), 2.0);
  // A connection that sends nothing at all has the same deadline for its first request.
  UniqueFd silent = ConnectFrom("127.0.0.1", (*server)->port());
  EXPECT_TRUE(ReadUntilClosed(silent.get(), 10s).closed);
}

TEST(HttpLimitsTest, IdleKeepAliveConnectionIsClosedAfterTheIdleTimeout) {
  HttpServer::Options o = Hello();
  o.idle_timeout_ms = 600;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  UniqueFd fd = ConnectFrom("127.0.0.1", (*server)->port());
  ASSERT_TRUE(SendAll(fd.get(), "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"));
  const auto answered = Clock::now();
  const testing::ReadResult r = ReadUntilClosed(fd.get(), 10s);
  ASSERT_TRUE(r.closed);
  EXPECT_NE(r.data.find("Connection: keep-alive"), std::string::npos) << r.data;
  EXPECT_GE(Seconds(r.when - answered), 0.5);
  EXPECT_LT(Seconds(r.when - answered), 2.5);
}

TEST(HttpLimitsTest, PerAddressCapShedsThatAddressesOldestIdleConnection) {
  HttpServer::Options o = Hello();
  o.max_connections_per_address = 3;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::vector<UniqueFd> idle(3);
  for (UniqueFd& fd : idle) {
    fd = ConnectFrom("127.0.0.1", port);
    std::this_thread::sleep_for(50ms);  // an order of age the server can see
  }
  UniqueFd other = ConnectFrom("127.0.0.2", port);
  std::this_thread::sleep_for(100ms);
  // The fourth from 127.0.0.1 is served; the oldest of 127.0.0.1 goes, nobody else's.
  EXPECT_EQ(StatusFrom("127.0.0.1", port, kGet), 200);
  EXPECT_TRUE(ReadUntilClosed(idle[0].get(), 5s).closed);
  EXPECT_FALSE(ReadUntilClosed(idle[1].get(), 200ms).closed);
  EXPECT_FALSE(ReadUntilClosed(other.get(), 200ms).closed);
  ASSERT_TRUE(SendAll(other.get(), kGet));
  EXPECT_NE(ReadUntilClosed(other.get(), 5s).data.find("200 OK"), std::string::npos);
}

TEST(HttpLimitsTest, OverallCapShedsFromTheAddressHoldingTheMost) {
  HttpServer::Options o = Hello();
  o.max_connections = 4;
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  UniqueFd mine = ConnectFrom("127.0.0.2", port);
  std::this_thread::sleep_for(50ms);  // the oldest of all, but its address holds one
  std::vector<UniqueFd> flood(3);
  for (UniqueFd& fd : flood) fd = ConnectFrom("127.0.0.1", port);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(StatusFrom("127.0.0.3", port, kGet), 200);
  EXPECT_FALSE(ReadUntilClosed(mine.get(), 300ms).closed);
  int shed = 0;
  for (UniqueFd& fd : flood) shed += ReadUntilClosed(fd.get(), 300ms).closed ? 1 : 0;
  EXPECT_EQ(shed, 1);
}

TEST(HttpLimitsTest, AnswerTheClientDoesNotTakeIsDroppedAtTheWriteDeadline) {
  HttpServer::Options o = Hello();
  o.write_timeout_ms = 500;
  o.handlers["/big"] = [](const HttpRequest&) {
    HttpResponse r;
    r.body.assign(16 << 20, 'x');  // far beyond what the socket buffers hold
    return r;
  };
  auto server = HttpServer::Start(std::move(o));
  ASSERT_TRUE(server.ok()) << server.status();
  UniqueFd reader = ConnectFrom("127.0.0.1", (*server)->port());
  const int small = 4096;
  setsockopt(reader.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(SendAll(reader.get(), "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(2500ms);  // never reads while the deadline passes
  // Meanwhile others are served, and then the server has given up on the reader.
  EXPECT_EQ(StatusFrom("127.0.0.2", (*server)->port(), kGet), 200);
  const testing::ReadResult r = ReadUntilClosed(reader.get(), 10s);
  EXPECT_TRUE(r.closed);
  EXPECT_LT(r.data.size(), size_t{16} << 20);
}

TEST(HttpLimitsTest, RefusalReachesAClientThatIsStillSending) {
  auto server = HttpServer::Start(Hello());
  ASSERT_TRUE(server.ok()) << server.status();
  UniqueFd fd = ConnectFrom("127.0.0.1", (*server)->port());
  // 40 KiB of header: refused at 16 KiB while the rest is still arriving. Closing at once would
  // reset the connection and lose the answer.
  ASSERT_TRUE(SendAll(fd.get(), "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                    std::string(40000, 'x') + "\r\n\r\n"));
  const testing::ReadResult r = ReadUntilClosed(fd.get(), 10s);
  EXPECT_EQ(r.data.substr(0, 12), "HTTP/1.1 431") << r.data.substr(0, 100);
}

TEST(HttpLimitsTest, PipelinedRequestsAreAnsweredInOrder) {
  auto server = HttpServer::Start(Hello());
  ASSERT_TRUE(server.ok()) << server.status();
  UniqueFd fd = ConnectFrom("127.0.0.1", (*server)->port());
  ASSERT_TRUE(SendAll(fd.get(),
                      "GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                      "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string all = ReadUntilClosed(fd.get(), 10s).data;
  const size_t a = all.find("HTTP/1.1 200");
  const size_t b = all.find("HTTP/1.1 404");
  const size_t c = all.rfind("HTTP/1.1 200");
  EXPECT_TRUE(a < b && b < c && c != a) << all;
}

}  // namespace
}  // namespace neuron

// A small HTTP/1.1 server: one poller thread (epoll) that accepts and watches idle keep-alive
// connections, and a fixed pool of workers that read one request, run its handler and answer.
//
// Why not civetweb: Debian's libcivetweb 1.15 loads OpenSSL with dlopen and looks up
// SSL_get_peer_certificate, which OpenSSL 3 no longer exports; the NULL pointer it gets is called
// on every TLS connection (segfault). Our needs are narrow (GET/HEAD, exact paths, small bodies),
// so a few hundred lines of our own cost less than working around that.

#include "http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/status/status.h"
#include "core/base/component_log.h"
#include "core/base/unique_fd.h"
#include "fmt/format.h"
#include "http/request_parser.h"
#include "http/tls_context.h"
#include "http/web_config_reloader.h"

namespace neuron {

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return std::nullopt;
}

namespace {

constexpr uint64_t kListenKey = 0;
constexpr uint64_t kWakeKey = 1;
// Idle keep-alive connections are closed after this long; Prometheus reconnects on demand.
constexpr std::chrono::seconds kIdleTimeout{120};
// Open connections beyond this are closed at once, bounding memory under a connection flood.
constexpr size_t kMaxConnections = 512;

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

struct Conn {
  uint64_t id = 0;
  UniqueFd fd;
  SSL* ssl = nullptr;
  bool handshaken = false;
  bool busy = false;
  std::string remote;
  std::string buf;  // bytes read, not yet consumed
  std::chrono::steady_clock::time_point last_active;

  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);  // first: it refers to fd, which closes after
  }
};

HttpResponse Plain(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// The outcome of one step of reading a request.
enum class ReadStep { kOk, kGone };

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)) {
    log_ = ComponentLogger(options_.logger_name);
    const WebConfig initial = options_.web_config.value_or(WebConfig{});
    if (!options_.web_config_file.empty()) {
      web_config_ = std::make_unique<WebConfigReloader>(options_.web_config_file, initial, log_);
    } else if (!initial.basic_auth_users.empty()) {
      auth_ = std::make_shared<const BasicAuthenticator>(initial.basic_auth_users);
    }
  }
  ~Impl() { Stop(); }

  absl::Status Start();
  int port() const { return port_; }
  bool tls() const { return tls_ != nullptr; }

 private:
  absl::Status SetUpTls();
  absl::Status Bind();
  void Stop();
  void PollLoop();
  void Accept();
  void WorkerLoop();
  // Serves requests on `c` while complete ones are buffered; false = close the connection.
  bool Serve(Conn& c);
  // Reads one request and answers it; false = close.
  bool ServeOne(Conn& c);
  // Steps of ServeOne: reads until c.buf holds a whole request head or a refusal
  // (http/request_parser.h), then reads and discards `length` body bytes.
  ReadStep ReadHead(Conn& c, size_t max, ParsedRequest* parsed);
  ReadStep SkipBody(Conn& c, size_t length);
  HttpResponse Dispatch(const HttpRequest& req);
  ssize_t Read(Conn& c, char* data, size_t n);
  bool WriteAll(Conn& c, std::string_view data);
  bool Answer(Conn& c, bool head, bool keep_alive, const HttpResponse& r);
  void Release(Conn* c, bool keep);

  Options options_;
  std::shared_ptr<spdlog::logger> log_;
  // One or the other: fixed users, or users re-read from the web config file.
  std::shared_ptr<const BasicAuthenticator> auth_;
  std::unique_ptr<WebConfigReloader> web_config_;
  // Owned by the poller thread after Start (it accepts); http/tls_context.h says how
  // certificates rotate.
  std::unique_ptr<TlsContextReloader> tls_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread poller_;
  std::vector<std::thread> workers_;

  std::mutex mu_;  // guards everything below
  std::condition_variable work_cv_;
  std::deque<Conn*> queue_;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 2;
};

absl::Status HttpServer::Impl::SetUpTls() {
  absl::StatusOr<std::unique_ptr<TlsContextReloader>> tls =
      TlsContextReloader::Create(*options_.web_config->tls, log_);
  if (!tls.ok()) return tls.status();
  tls_ = *std::move(tls);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::Bind() {
  std::string_view address = options_.listen_address;
  std::string host;
  std::string_view port = address;
  if (const size_t colon = address.rfind(':'); colon != std::string_view::npos) {
    host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int value = -1;
  const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value < 0 ||
      value > 65535) {
    return absl::InvalidArgumentError(
        fmt::format("listen address \"{}\": expected host:port with a port 0-65535", address));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(value);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        fmt::format("listen address \"{}\": {}", address, gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) continue;
    const int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd.get(), 256) == 0) {
      listen_fd_ = std::move(fd);
      break;
    }
    last_error = std::strerror(errno);
  }
  freeaddrinfo(res);
  if (!listen_fd_) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}: {}", options_.listen_address, last_error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::Start() {
  if (options_.web_config && options_.web_config->tls) {
    if (absl::Status s = SetUpTls(); !s.ok()) return s;
  }
  if (absl::Status s = Bind(); !s.ok()) return s;
  epoll_fd_.Reset(epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_fd_ || !wake_fd_) return absl::InternalError("epoll/eventfd failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenKey;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev);
  ev.data.u64 = kWakeKey;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  poller_ = std::thread([this] { PollLoop(); });
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  log_->info("serving HTTP{} on {} (port {})", tls() ? "S" : "", options_.listen_address, port_);
  return absl::OkStatus();
}

void HttpServer::Impl::Stop() {
  if (!stop_.exchange(true) && poller_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);
    poller_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_cv_.notify_all();
    }
    // A worker blocked in a read of a slow client: shutting its socket down wakes it.
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, c] : conns_) shutdown(c->fd.get(), SHUT_RDWR);
    }
    for (std::thread& t : workers_) t.join();
  }
  conns_.clear();
  listen_fd_.Reset();
  epoll_fd_.Reset();
  wake_fd_.Reset();
  tls_.reset();
}

void HttpServer::Impl::PollLoop() {
  epoll_event events[64];
  auto last_sweep = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    const int n = epoll_wait(epoll_fd_.get(), events, 64, 1000);
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kListenKey) {
        Accept();
      } else if (key != kWakeKey) {
        std::lock_guard<std::mutex> lock(mu_);
        const auto it = conns_.find(key);
        if (it == conns_.end() || it->second->busy) continue;
        it->second->busy = true;
        queue_.push_back(it->second.get());
        work_cv_.notify_one();
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_sweep > std::chrono::seconds(1)) {
      last_sweep = now;
      std::lock_guard<std::mutex> lock(mu_);
      std::erase_if(conns_, [&](const auto& kv) {
        return !kv.second->busy && now - kv.second->last_active > kIdleTimeout;
      });
    }
  }
}

void HttpServer::Impl::Accept() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd =
        accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: all accepted
    auto c = std::make_unique<Conn>();
    c->fd.Reset(fd);  // c owns it from here; `fd` is only its number
    char host[INET6_ADDRSTRLEN] = "";
    if (addr.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, host, sizeof host);
    } else if (addr.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, host, sizeof host);
    }
    c->remote = host;
    // Blocking sockets with timeouts: a worker never waits on a slow client longer than this.
    timeval tv{options_.request_timeout_ms / 1000, (options_.request_timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->last_active = std::chrono::steady_clock::now();
    if (tls_ != nullptr) {
      c->ssl = SSL_new(tls_->ForNewConnection(c->last_active));
      if (c->ssl == nullptr) {
        log_->error("SSL_new: {}", OpenSslError());
        continue;  // closed by ~Conn
      }
      SSL_set_fd(c->ssl, fd);
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (conns_.size() >= kMaxConnections) continue;  // closed by ~Conn
    c->id = next_id_++;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.u64 = c->id;
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev);
    conns_.emplace(c->id, std::move(c));
  }
}

void HttpServer::Impl::WorkerLoop() {
  // A write to a peer that went away raises SIGPIPE; blocked here it stays pending on this
  // thread instead of killing the process, and the write fails with EPIPE.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  for (;;) {
    Conn* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_.load() || !queue_.empty(); });
      if (stop_.load()) return;
      c = queue_.front();
      queue_.pop_front();
    }
    const bool keep = Serve(*c);
    Release(c, keep);
    timespec zero{0, 0};
    while (sigtimedwait(&set, nullptr, &zero) > 0) {
    }
  }
}

void HttpServer::Impl::Release(Conn* c, bool keep) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!keep || stop_.load()) {
    conns_.erase(c->id);
    return;
  }
  c->busy = false;
  c->last_active = std::chrono::steady_clock::now();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.u64 = c->id;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c->fd.get(), &ev);
}

ssize_t HttpServer::Impl::Read(Conn& c, char* data, size_t n) {
  if (c.ssl == nullptr) return recv(c.fd.get(), data, n, 0);
  const int r = SSL_read(c.ssl, data, static_cast<int>(n));
  return r > 0 ? r : -1;
}

bool HttpServer::Impl::WriteAll(Conn& c, std::string_view data) {
  while (!data.empty()) {
    ssize_t n;
    if (c.ssl != nullptr) {
      n = SSL_write(c.ssl, data.data(), static_cast<int>(data.size()));
    } else {
      n = send(c.fd.get(), data.data(), data.size(), MSG_NOSIGNAL);
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool HttpServer::Impl::Answer(Conn& c, bool head, bool keep_alive, const HttpResponse& r) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
                                r.status, Reason(r.status), r.content_type, r.body.size());
  for (const auto& [k, v] : r.headers) out += fmt::format("{}: {}\r\n", k, v);
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!head) out += r.body;
  return WriteAll(c, out) && keep_alive;
}

bool HttpServer::Impl::Serve(Conn& c) {
  if (c.ssl != nullptr && !c.handshaken) {
    // Plain HTTP or an old TLS version fails here and the connection is closed unanswered.
    if (SSL_accept(c.ssl) != 1) {
      log_->debug("TLS handshake with {} failed: {}", c.remote, OpenSslError());
      return false;
    }
    c.handshaken = true;
  }
  for (;;) {
    if (!ServeOne(c)) return false;
    // Pipelined requests already read (or decrypted) are served now; epoll would not see them.
    const bool more =
        c.buf.find("\r\n\r\n") != std::string::npos || (c.ssl != nullptr && SSL_pending(c.ssl) > 0);
    if (!more || stop_.load()) return true;
  }
}

bool HttpServer::Impl::ServeOne(Conn& c) {
  const size_t max = std::max<size_t>(1024, options_.max_request_bytes);
  ParsedRequest parsed;
  if (ReadHead(c, max, &parsed) == ReadStep::kGone) return false;  // closed, timed out, broken
  c.buf.erase(0, std::min(parsed.head_bytes, c.buf.size()));
  // A body (unusual for GET) is read and discarded so that the next request starts cleanly.
  if (parsed.body_bytes > 0 && SkipBody(c, parsed.body_bytes) == ReadStep::kGone) return false;
  if (parsed.outcome == ParsedRequest::Outcome::kRefused) {
    HttpResponse r = Plain(parsed.status, std::move(parsed.reason));
    if (parsed.status == 405) r.headers.emplace_back("Allow", "GET, HEAD");
    return Answer(c, parsed.omit_body, parsed.keep_alive, r);
  }
  HttpRequest& req = parsed.request;
  req.remote_address = c.remote;
  req.tls = c.ssl != nullptr;
  return Answer(c, req.method == "HEAD", parsed.keep_alive, Dispatch(req));
}

ReadStep HttpServer::Impl::ReadHead(Conn& c, size_t max, ParsedRequest* parsed) {
  char chunk[8192];
  for (;;) {
    *parsed = ParseRequest(c.buf, max);
    if (parsed->outcome != ParsedRequest::Outcome::kIncomplete) return ReadStep::kOk;
    const ssize_t n = Read(c, chunk, sizeof chunk);
    if (n <= 0) return ReadStep::kGone;
    c.buf.append(chunk, static_cast<size_t>(n));
  }
}

ReadStep HttpServer::Impl::SkipBody(Conn& c, size_t length) {
  char chunk[8192];
  while (c.buf.size() < length) {
    const ssize_t n = Read(c, chunk, sizeof chunk);
    if (n <= 0) return ReadStep::kGone;
    c.buf.append(chunk, static_cast<size_t>(n));
  }
  c.buf.erase(0, length);
  return ReadStep::kOk;
}

HttpResponse HttpServer::Impl::Dispatch(const HttpRequest& req) {
  HttpResponse r;
  const std::shared_ptr<const BasicAuthenticator> auth =
      web_config_ != nullptr ? web_config_->Current(std::chrono::steady_clock::now()) : auth_;
  if (auth != nullptr) {
    const std::optional<std::string_view> authz = req.Header("Authorization");
    if (!authz || !auth->Check(*authz)) {
      r.status = 401;
      r.body = "Unauthorized\n";
      r.headers.emplace_back("WWW-Authenticate", "Basic");
      return r;
    }
  }
  const auto it = options_.handlers.find(req.path);
  if (it == options_.handlers.end()) {
    r.status = 404;
    r.body = "not found\n";
    return r;
  }
  try {
    return it->second(req);
  } catch (const std::exception& e) {
    log_->error("handler for {} threw: {}", req.path, e.what());
    r.status = 500;
    r.body = "internal error\n";
    return r;
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->port(); }
bool HttpServer::tls() const { return impl_->tls(); }

}  // namespace neuron

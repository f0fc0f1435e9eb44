// The HTTP/1.1 server: a connection loop that owns the sockets (http/connection_loop.h) and a
// fixed pool of workers that run handlers, checking credentials first.
//
// Why not civetweb: Debian's libcivetweb 1.15 loads OpenSSL with dlopen and looks up
// SSL_get_peer_certificate, which OpenSSL 3 no longer exports; the NULL pointer it gets is called
// on every TLS connection (segfault). Our needs are narrow (GET/HEAD, exact paths, small bodies;
// writes only in the simulator's API stand-in), so a few hundred lines of our own cost less than
// working around that. Why not Boost.Beast: docs/architecture.md#http-server.

#include "http/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "core/base/component_log.h"
#include "core/base/unique_fd.h"
#include "fmt/format.h"
#include "http/connection_loop.h"
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

HttpResponse Plain(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse Unauthorized() {
  HttpResponse r = Plain(401, "Unauthorized\n");
  r.headers.emplace_back("WWW-Authenticate", "Basic");
  return r;
}

HttpResponse TooManyRequests(std::chrono::steady_clock::duration wait, std::string_view why) {
  const auto seconds = std::max<int64_t>(1, std::chrono::ceil<std::chrono::seconds>(wait).count());
  HttpResponse r = Plain(429, fmt::format("{}; retry in {} s\n", why, seconds));
  r.headers.emplace_back("Retry-After", std::to_string(seconds));
  return r;
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)), limiter_(options_.login_limits) {
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
  bool tls() const { return loop_ != nullptr && loop_->tls(); }

 private:
  struct Job {
    LoopJob loop;
    bool authorized = false;  // its credentials passed a check already
  };
  // A request whose credentials need a bcrypt check, for the check threads.
  struct Check {
    Job job;
    BasicCredentials credentials;
    std::shared_ptr<const BasicAuthenticator> auth;
  };
  // What a worker answers: a response (a refusal may be held back by `delay`), or nothing when
  // the request went to the check threads.
  struct Answer {
    HttpResponse response;
    std::chrono::milliseconds delay{0};
  };

  absl::Status Bind();
  absl::Status BindUnix(const std::string& path);
  void Stop();
  void WorkerLoop();
  void CheckLoop();
  std::optional<Answer> Handle(Job& job);
  HttpResponse RunHandler(const HttpRequest& req);
  void Finish(const Job& job, const Answer& answer);
  Answer Refuse(std::chrono::steady_clock::duration retry_after, std::string_view why) const;

  Options options_;
  std::shared_ptr<spdlog::logger> log_;
  // One or the other: fixed users, or users re-read from the web config file.
  std::shared_ptr<const BasicAuthenticator> auth_;
  std::unique_ptr<WebConfigReloader> web_config_;
  LoginLimiter limiter_;
  UniqueFd listen_fd_;
  int port_ = 0;
  std::string unix_path_;  // the socket file we made, removed at Stop; empty for TCP
  std::unique_ptr<ConnectionLoop> loop_;
  std::vector<std::thread> workers_;
  std::vector<std::thread> checkers_;

  std::mutex mu_;  // guards everything below
  std::condition_variable work_cv_;
  std::condition_variable check_cv_;
  std::deque<Job> jobs_;
  std::deque<Check> checks_;
  bool stop_ = false;
};

// A Unix socket, mode 0660: the owner and the group the directory gives (a pod's fsGroup on a
// shared emptyDir, deploy/base/daemonset.yaml) connect, nobody else. A socket file left by an
// earlier run is replaced; anything else at the path is an error, never removed.
absl::Status HttpServer::Impl::BindUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(
        fmt::format("listen address \"unix:{}\": expected a path of 1-{} bytes", path,
                    sizeof addr.sun_path - 1));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          fmt::format("cannot listen on unix:{}: the path exists and is not a socket", path));
    }
    unlink(path.c_str());
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd || bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return absl::UnavailableError(
        fmt::format("cannot listen on unix:{}: {}", path, std::strerror(errno)));
  }
  unix_path_ = path;
  if (chmod(path.c_str(), 0660) != 0 || listen(fd.get(), 1024) != 0) {
    return absl::UnavailableError(
        fmt::format("cannot listen on unix:{}: {}", path, std::strerror(errno)));
  }
  listen_fd_ = std::move(fd);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::Bind() {
  std::string_view address = options_.listen_address;
  if (address.substr(0, 5) == "unix:") return BindUnix(std::string(address.substr(5)));
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
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd.get(), 1024) == 0) {
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
  std::unique_ptr<TlsContextReloader> certificates;
  if (options_.web_config && options_.web_config->tls) {
    absl::StatusOr<std::unique_ptr<TlsContextReloader>> made =
        TlsContextReloader::Create(*options_.web_config->tls, log_);
    if (!made.ok()) return made.status();
    certificates = *std::move(made);
  }
  if (absl::Status s = Bind(); !s.ok()) return s;
  LoopLimits limits;
  limits.handshake_timeout = std::chrono::milliseconds(options_.handshake_timeout_ms);
  limits.request_timeout = std::chrono::milliseconds(options_.request_timeout_ms);
  limits.idle_timeout = std::chrono::milliseconds(options_.idle_timeout_ms);
  limits.write_timeout = std::chrono::milliseconds(options_.write_timeout_ms);
  limits.max_connections = std::max<size_t>(1, options_.max_connections);
  limits.max_connections_per_address = std::max<size_t>(1, options_.max_connections_per_address);
  limits.max_request_bytes = options_.max_request_bytes;
  limits.write_methods = options_.write_methods;
  loop_ = std::make_unique<ConnectionLoop>(std::move(listen_fd_), std::move(certificates), limits,
                                           log_, [this](LoopJob job) {
                                             std::lock_guard<std::mutex> lock(mu_);
                                             jobs_.push_back(Job{std::move(job)});
                                             work_cv_.notify_one();
                                           });
  if (absl::Status s = loop_->Start(); !s.ok()) return s;
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  // Password checks only where there can be passwords (a web config file may add users later).
  if (auth_ != nullptr || web_config_ != nullptr) {
    for (int i = 0; i < std::max(1, options_.login_limits.concurrent_checks); ++i) {
      checkers_.emplace_back([this] { CheckLoop(); });
    }
  }
  log_->info("serving HTTP{} on {} (port {})", tls() ? "S" : "", options_.listen_address, port_);
  const bool users =
      auth_ != nullptr || (options_.web_config && !options_.web_config->basic_auth_users.empty());
  WarnIfPlainHttpAuth(*log_, users, tls());
  return absl::OkStatus();
}

void HttpServer::Impl::Stop() {
  // The loop first: no job is submitted after it stops; then the workers finish theirs (their
  // answers go to a loop that drops them).
  if (loop_ != nullptr) loop_->Stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
    check_cv_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
  for (std::thread& t : checkers_) t.join();
  workers_.clear();
  checkers_.clear();
  loop_.reset();
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
  unix_path_.clear();
}

void HttpServer::Impl::WorkerLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (const std::optional<Answer> answer = Handle(job)) Finish(job, *answer);
  }
}

// A check thread: bcrypt, its outcome recorded for the address, then the request goes back to
// the workers (checked) or is answered 401.
void HttpServer::Impl::CheckLoop() {
  for (;;) {
    Check check;
    {
      std::unique_lock<std::mutex> lock(mu_);
      check_cv_.wait(lock, [&] { return stop_ || !checks_.empty(); });
      if (stop_) return;
      check = std::move(checks_.front());
      checks_.pop_front();
    }
    const bool ok = check.auth->Check(check.credentials);
    limiter_.Record(check.job.loop.request.remote_address, ok, std::chrono::steady_clock::now());
    if (!ok) {
      Finish(check.job, Answer{Unauthorized()});
      continue;
    }
    check.job.authorized = true;
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_front(std::move(check.job));  // it has waited its turn already
    work_cv_.notify_one();
  }
}

HttpServer::Impl::Answer HttpServer::Impl::Refuse(std::chrono::steady_clock::duration retry_after,
                                                  std::string_view why) const {
  return Answer{TooManyRequests(retry_after, why), options_.login_limits.refusal_delay};
}

std::optional<HttpServer::Impl::Answer> HttpServer::Impl::Handle(Job& job) {
  const HttpRequest& req = job.loop.request;
  if (job.authorized || options_.public_paths.count(req.path) > 0) return Answer{RunHandler(req)};
  const std::shared_ptr<const BasicAuthenticator> auth =
      web_config_ != nullptr ? web_config_->Current(std::chrono::steady_clock::now()) : auth_;
  if (auth == nullptr) return Answer{RunHandler(req)};
  const std::optional<std::string_view> header = req.Header("Authorization");
  std::optional<BasicCredentials> credentials =
      header ? ParseBasicAuthorization(*header) : std::nullopt;
  // No or malformed credentials cost no check: a plain 401, not counted as a failure.
  if (!credentials) return Answer{Unauthorized()};
  if (auth->CheckCached(*credentials)) return Answer{RunHandler(req)};
  const auto now = std::chrono::steady_clock::now();
  if (const auto locked = limiter_.LockedFor(req.remote_address, now); locked.count() > 0) {
    return Refuse(locked, "too many failed logins from this address");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (checks_.size() >= options_.login_limits.queued_checks) {
    return Refuse(std::chrono::seconds(1), "password checks busy");
  }
  checks_.push_back(Check{std::move(job), *std::move(credentials), auth});
  check_cv_.notify_one();
  return std::nullopt;
}

HttpResponse HttpServer::Impl::RunHandler(const HttpRequest& req) {
  const auto it = options_.handlers.find(req.path);
  const HttpHandler* handler = it != options_.handlers.end() ? &it->second : nullptr;
  if (handler == nullptr && options_.fallback) handler = &options_.fallback;
  if (handler == nullptr) return Plain(404, "not found\n");
  try {
    return (*handler)(req);
  } catch (const std::exception& e) {
    log_->error("handler for {} threw: {}", req.path, e.what());
    return Plain(500, "internal error\n");
  }
}

void HttpServer::Impl::Finish(const Job& job, const Answer& answer) {
  // A refusal closes the connection: the client comes back, if at all, after Retry-After.
  const bool keep_alive = job.loop.keep_alive && answer.response.status != 429;
  loop_->Complete(job.loop.conn,
                  SerializeResponse(answer.response, job.loop.request.method == "HEAD", keep_alive),
                  keep_alive, answer.delay);
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

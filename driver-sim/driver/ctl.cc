#include "driver-sim/driver/ctl.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "core/base/unique_fd.h"
#include "driver-sim/driver/sim_paths.h"

namespace neuron::sim {
namespace {

bool Takes(CtlArg a) { return a != CtlArg::kNo; }

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<uint64_t> ParseNumber(std::string_view option, std::string_view text, uint64_t max) {
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v > max) {
    return Usage(fmt::format("{} takes a number from 0 to {}, not '{}'", option, max, text));
  }
  return v;
}

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

std::string ErrnoText(int err) { return std::strerror(err); }

// What the driver's printk ioctl and our one-line protocol accept (ctl.h).
absl::Status CheckPrintkText(std::string_view text) {
  if (text.empty()) return Usage("printk needs text after --");
  if (text.size() > kPrintkMaxText) {
    return Usage(fmt::format("printk text is {} bytes; the driver takes at most {}", text.size(),
                             kPrintkMaxText));
  }
  if (text.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos) {
    return Usage("printk text cannot hold a newline, carriage return or NUL");
  }
  return absl::OkStatus();
}

// `words` are the words before printk's "--" (all of them for other commands); `text` is what
// follows it, or nullopt when there was no "--".
absl::StatusOr<CtlRequest> ParseWords(const std::vector<std::string>& words,
                                      std::optional<std::string> text);

}  // namespace

const CtlVerb* FindCtlVerb(std::string_view name) {
  for (const CtlVerb& v : CtlVerbs()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::string_view CtlUsage() {
  static const std::string usage = [] {
    std::string text = "commands:\n";
    for (const CtlVerb& v : CtlVerbs()) text += fmt::format("  {}\n", v.usage);
    return text;
  }();
  return usage;
}

namespace {

// The verb `name` takes printk's text after "--".
bool TakesText(std::string_view name) {
  const CtlVerb* verb = FindCtlVerb(name);
  return verb != nullptr && Takes(verb->args.text);
}

}  // namespace

absl::StatusOr<CtlRequest> ParseCtlArgs(const std::vector<std::string>& words) {
  const auto sep = std::find(words.begin(), words.end(), "--");
  if (sep == words.end() || words.empty() || !TakesText(words[0])) {
    return ParseWords(words, std::nullopt);
  }
  return ParseWords(std::vector<std::string>(words.begin(), sep),
                    fmt::format("{}", fmt::join(sep + 1, words.end(), " ")));
}

namespace {

// The verb word and, for inject, its fault kind, into `req`: the index of the first option.
absl::StatusOr<size_t> ParseCommand(const std::vector<std::string>& words, CtlRequest* req) {
  if (words.empty()) return Usage("missing command");
  const CtlVerb* verb = FindCtlVerb(words[0]);
  if (verb == nullptr) return Usage(fmt::format("unknown command '{}'", words[0]));
  req->command = words[0];
  if (!Takes(verb->args.fault)) return 1;
  if (words.size() < 2 || words[1].starts_with("-")) {
    return Usage(
        fmt::format("{} needs a fault: hbm-ue, sram-ue, nan, dma-abort or hang", words[0]));
  }
  const std::optional<FaultKind> kind = ParseFaultKind(words[1]);
  if (!kind || *kind == FaultKind::kLinkDown) {
    return Usage(fmt::format("unknown fault '{}'; {} takes hbm-ue, sram-ue, nan, dma-abort or hang",
                             words[1], words[0]));
  }
  req->fault = kind;
  return 2;
}

// The value of option `name`: `inline_value` ("--opt=value"), else the next word, which moves *i
// past it.
absl::StatusOr<std::string> TakeValue(const std::vector<std::string>& words, size_t* i,
                                      const std::string& name,
                                      const std::optional<std::string>& inline_value) {
  if (inline_value) return *inline_value;
  if (*i + 1 >= words.size() || words[*i + 1].starts_with("--")) {
    return Usage(fmt::format("{} needs a value", name));
  }
  return words[++*i];
}

// One option word, words[*i] ("--opt", "--opt=value" or "--opt" then its value), into `req`, if
// the command takes it.
absl::Status ParseOption(const std::vector<std::string>& words, size_t* i, CtlRequest* req) {
  constexpr uint64_t kMaxIndex = 1 << 20;
  const std::string_view cmd_name = req->command;
  const CtlArgs& allowed = FindCtlVerb(req->command)->args;
  const std::string& word = words[*i];
  if (!word.starts_with("--")) {
    return Usage(fmt::format("unexpected argument '{}' for {}", word, cmd_name));
  }
  std::string name = word;
  std::optional<std::string> value;
  if (const size_t eq = word.find('='); eq != std::string::npos) {
    name = word.substr(0, eq);
    value = word.substr(eq + 1);
  }
  auto take_value = [&] { return TakeValue(words, i, name, value); };
  auto reject_repeat = [&](bool seen) -> absl::Status {
    if (seen) return Usage(fmt::format("{} given twice", name));
    return absl::OkStatus();
  };
  // A numeric option once, parsed within `limit`, into the request field it names.
  auto take_number = [&]<typename T>(std::optional<T>* field, uint64_t limit) -> absl::Status {
    if (absl::Status s = reject_repeat(field->has_value()); !s.ok()) return s;
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    absl::StatusOr<uint64_t> n = ParseNumber(name, *v, limit);
    if (!n.ok()) return n.status();
    *field = static_cast<T>(*n);
    return absl::OkStatus();
  };
  if (name == "--device" && Takes(allowed.device)) return take_number(&req->device, kMaxIndex);
  if (name == "--core" && Takes(allowed.core)) return take_number(&req->core, kMaxIndex);
  if (name == "--peer" && Takes(allowed.peer)) return take_number(&req->peer, kMaxIndex);
  if (name == "--id" && Takes(allowed.id)) return take_number(&req->fault_id, UINT64_MAX);
  if (name == "--efa" && Takes(allowed.efa)) {
    if (absl::Status s = reject_repeat(!req->efa.empty()); !s.ok()) return s;
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    if (v->empty()) return Usage("--efa needs a name");
    req->efa = *v;
    return absl::OkStatus();
  }
  if (name == "--level" && Takes(allowed.level)) {
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    absl::StatusOr<uint64_t> n = ParseNumber(name, *v, 7);
    if (!n.ok()) return n.status();
    req->level = static_cast<int>(*n);
    return absl::OkStatus();
  }
  if (name == "--fail" && Takes(allowed.fail)) {
    if (value) return Usage("--fail takes no value");
    if (absl::Status s = reject_repeat(req->fail); !s.ok()) return s;
    req->fail = true;
    return absl::OkStatus();
  }
  return Usage(fmt::format("{} does not take {}", cmd_name, name));
}

// The options the verb requires, and printk's text.
absl::Status CheckComplete(std::optional<std::string> text, CtlRequest* req) {
  const CtlVerb& verb = *FindCtlVerb(req->command);
  const CtlArgs& args = verb.args;
  const auto missing = [&](CtlArg a, bool given) { return a == CtlArg::kRequired && !given; };
  if (missing(args.device, req->device.has_value())) {
    return Usage(fmt::format("{} needs --device N", verb.name));
  }
  if (missing(args.peer, req->peer.has_value())) {
    return Usage(fmt::format("{} needs --peer B", verb.name));
  }
  if (missing(args.efa, !req->efa.empty())) {
    return Usage(fmt::format("{} needs --efa NAME", verb.name));
  }
  if (missing(args.id, req->fault_id.has_value())) {
    return Usage(fmt::format("{} needs --id ID", verb.name));
  }
  if (Takes(args.text)) {
    if (!text) {
      return Usage(fmt::format("{} needs -- before its text: {}", verb.name, verb.usage));
    }
    if (absl::Status s = CheckPrintkText(*text); !s.ok()) return s;
    req->text = std::move(*text);
  }
  return absl::OkStatus();
}

absl::StatusOr<CtlRequest> ParseWords(const std::vector<std::string>& words,
                                      std::optional<std::string> text) {
  CtlRequest req;
  absl::StatusOr<size_t> first_option = ParseCommand(words, &req);
  if (!first_option.ok()) return first_option.status();
  for (size_t i = *first_option; i < words.size(); ++i) {
    if (absl::Status s = ParseOption(words, &i, &req); !s.ok()) return s;
  }
  if (absl::Status s = CheckComplete(std::move(text), &req); !s.ok()) return s;
  return req;
}

// A reply as a Status for the one-shot senders: usage errors are InvalidArgument, the daemon's
// failures `error_code` (what a failure means differs per command).
absl::Status OutcomeStatus(const absl::StatusOr<CtlReply>& reply, absl::StatusCode error_code) {
  if (!reply.ok()) return reply.status();
  switch (reply->outcome) {
    case CtlOutcome::kOk:
      return absl::OkStatus();
    case CtlOutcome::kUsage:
      return absl::InvalidArgumentError(reply->message);
    case CtlOutcome::kError:
      break;
  }
  return absl::Status(error_code, reply->message);
}

}  // namespace

std::string FormatCtlRequest(const CtlRequest& req) {
  std::string line = req.command;
  if (req.fault) line += fmt::format(" {}", FaultKindName(*req.fault));
  if (req.device) line += fmt::format(" --device {}", *req.device);
  if (req.core) line += fmt::format(" --core {}", *req.core);
  if (req.peer) line += fmt::format(" --peer {}", *req.peer);
  if (req.fail) line += " --fail";
  if (!req.efa.empty()) line += fmt::format(" --efa {}", req.efa);
  if (req.fault_id) line += fmt::format(" --id {}", *req.fault_id);
  if (TakesText(req.command)) line += fmt::format(" --level {} -- {}", req.level, req.text);
  return line;
}

absl::StatusOr<CtlRequest> ParseCtlLine(std::string_view line) {
  std::vector<std::string> words;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t start = line.find_first_not_of(" \t\r\n", pos);
    if (start == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t\r\n", start);
    if (end == std::string_view::npos) end = line.size();
    words.emplace_back(line.substr(start, end - start));
    pos = end;
    // printk's text is the rest of the line after "-- ", verbatim (a CRLF client's '\r' aside).
    if (words.size() > 1 && words.back() == "--" && TakesText(words.front())) {
      words.pop_back();
      std::string_view text = end < line.size() ? line.substr(end + 1) : std::string_view();
      if (text.ends_with('\r')) text.remove_suffix(1);
      return ParseWords(words, std::string(text));
    }
  }
  return ParseCtlArgs(words);
}

absl::Status SendPrintk(const RootPaths& paths, int level, std::string_view text,
                        std::chrono::milliseconds timeout) {
  if (level < 0 || level > 7) {
    return absl::InvalidArgumentError(fmt::format("printk level {} is not 0-7", level));
  }
  if (absl::Status s = CheckPrintkText(text); !s.ok()) return s;
  CtlRequest req;
  req.command = "printk";
  req.level = level;
  req.text = std::string(text);
  return OutcomeStatus(SendCtlRequest(paths, req, timeout), absl::StatusCode::kInternal);
}

std::string FormatCtlReply(const CtlReply& reply) {
  std::string head;
  switch (reply.outcome) {
    case CtlOutcome::kOk:
      head = "ok\n";
      break;
    case CtlOutcome::kError:
      head = fmt::format("error: {}\n", reply.message);
      break;
    case CtlOutcome::kUsage:
      head = fmt::format("usage: {}\n", reply.message);
      break;
  }
  return head + reply.payload;
}

absl::StatusOr<CtlReply> ParseCtlReply(std::string_view text) {
  const size_t nl = text.find('\n');
  const std::string_view head = text.substr(0, nl);
  CtlReply reply;
  reply.payload = nl == std::string_view::npos ? "" : std::string(text.substr(nl + 1));
  if (head == "ok") {
    reply.outcome = CtlOutcome::kOk;
  } else if (head.starts_with("error: ")) {
    reply.outcome = CtlOutcome::kError;
    reply.message = std::string(head.substr(7));
  } else if (head.starts_with("usage: ")) {
    reply.outcome = CtlOutcome::kUsage;
    reply.message = std::string(head.substr(7));
  } else {
    return absl::DataLossError(
        fmt::format("malformed reply from the daemon: '{}'", head.substr(0, 80)));
  }
  return reply;
}

int CtlExitCode(CtlOutcome outcome) {
  switch (outcome) {
    case CtlOutcome::kOk:
      return 0;
    case CtlOutcome::kError:
      return 1;
    case CtlOutcome::kUsage:
      return 2;
  }
  return 1;
}

absl::Status CheckCtlSocketPath(const RootPaths& paths) {
  const std::string path = sim::CtlSocketPath(paths).string();
  const size_t suffix = path.size() - paths.root().string().size();
  if (path.size() <= kMaxSocketPath) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "root {} is too long: the control socket {} would be {} bytes, and Unix socket paths "
      "allow at most {}; use a --root of at most {} bytes",
      paths.root().string(), path, path.size(), kMaxSocketPath,
      kMaxSocketPath > suffix ? kMaxSocketPath - suffix : 0));
}

namespace {

// A connected, non-blocking client socket to the daemon at `paths`.
absl::StatusOr<UniqueFd> ConnectCtl(const RootPaths& paths) {
  const std::filesystem::path sock_path = sim::CtlSocketPath(paths);
  struct stat st {};
  if (lstat(sock_path.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        fmt::format("no simulated node at {} (ctl.sock missing); start it with neuron-sim up",
                    paths.root().string()));
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return absl::InternalError(fmt::format("socket: {}", ErrnoText(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.native().size() + 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    if (err == ECONNREFUSED || err == ENOENT) {
      return absl::FailedPreconditionError(
          fmt::format("no simulated node at {} (ctl.sock is stale: no daemon listens on it); "
                      "start it with neuron-sim up",
                      paths.root().string()));
    }
    return absl::UnavailableError(
        fmt::format("connect {}: {}", sock_path.string(), ErrnoText(err)));
  }
  if (fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK) != 0) {
    return absl::InternalError(fmt::format("fcntl: {}", ErrnoText(errno)));
  }
  return fd;
}

// One request's exchange with the daemon over a connected socket it does not own, all before
// `deadline` (`timeout` after the request began, for the message).
class CtlExchange {
 public:
  CtlExchange(const RootPaths& paths, int fd, std::chrono::milliseconds timeout,
              std::chrono::steady_clock::time_point deadline)
      : paths_(paths), fd_(fd), timeout_(timeout), deadline_(deadline) {}

  absl::Status Send(std::string_view line) {
    size_t sent = 0;
    while (sent < line.size()) {
      const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (absl::Status s = WaitFor(POLLOUT); !s.ok()) return s;
      } else {
        const int err = errno;
        return absl::UnavailableError(
            fmt::format("send to {}: {}", sim::CtlSocketPath(paths_).string(), ErrnoText(err)));
      }
    }
    return absl::OkStatus();
  }

  // Everything the daemon writes before it closes the connection.
  absl::StatusOr<std::string> ReceiveAll() {
    std::string reply;
    std::array<char, 4096> buf;
    for (;;) {
      const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n > 0) {
        reply.append(buf.data(), static_cast<size_t>(n));
        if (reply.size() > (1u << 22)) return absl::DataLossError("reply from the daemon too long");
      } else if (n == 0) {
        return reply;
      } else if (errno == EAGAIN || errno == EINTR) {
        if (absl::Status s = WaitFor(POLLIN); !s.ok()) return s;
      } else {
        const int err = errno;
        return absl::UnavailableError(
            fmt::format("recv from {}: {}", sim::CtlSocketPath(paths_).string(), ErrnoText(err)));
      }
    }
  }

 private:
  absl::Status WaitFor(int16_t events) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline_ - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(fmt::format("the daemon at {} did not answer within {} ms",
                                                     paths_.root().string(), timeout_.count()));
    }
    pollfd p{fd_, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) {
      return absl::InternalError(fmt::format("poll: {}", ErrnoText(errno)));
    }
    return absl::OkStatus();
  }

  const RootPaths& paths_;
  int fd_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

absl::StatusOr<CtlReply> SendCtlRequest(const RootPaths& paths, const CtlRequest& request,
                                        std::chrono::milliseconds timeout) {
  if (absl::Status s = CheckCtlSocketPath(paths); !s.ok()) return s;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::StatusOr<UniqueFd> fd = ConnectCtl(paths);
  if (!fd.ok()) return fd.status();
  CtlExchange exchange(paths, fd->get(), timeout, deadline);
  if (absl::Status s = exchange.Send(FormatCtlRequest(request) + "\n"); !s.ok()) return s;
  absl::StatusOr<std::string> reply = exchange.ReceiveAll();
  if (!reply.ok()) return reply.status();
  if (reply->empty()) {
    return absl::UnavailableError(fmt::format(
        "the daemon at {} closed the connection without a reply", paths.root().string()));
  }
  return ParseCtlReply(*reply);
}

absl::Status SendClearFault(const RootPaths& paths, uint64_t id,
                            std::chrono::milliseconds timeout) {
  CtlRequest req;
  req.command = "clear-fault";
  req.fault_id = id;
  return OutcomeStatus(SendCtlRequest(paths, req, timeout), absl::StatusCode::kNotFound);
}

absl::StatusOr<UniqueFd> ListenCtlSocket(const std::filesystem::path& path) {
  if (path.native().size() > kMaxSocketPath) {
    return absl::InvalidArgumentError(
        fmt::format("socket path {} is longer than {} bytes", path.string(), kMaxSocketPath));
  }
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return absl::InternalError(fmt::format("socket: {}", ErrnoText(errno)));
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    const int err = errno;
    return absl::InternalError(fmt::format("remove stale {}: {}", path.string(), ErrnoText(err)));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.native().size() + 1);
  // The umask makes the socket 0600 from the moment it exists; chmod below states it explicitly.
  const mode_t old_mask = umask(0177);
  const int rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_err = errno;
  umask(old_mask);
  if (rc != 0) {
    return absl::InternalError(fmt::format("bind {}: {}", path.string(), ErrnoText(bind_err)));
  }
  if (chmod(path.c_str(), 0600) != 0 || listen(fd.get(), 16) != 0) {
    const int err = errno;
    unlink(path.c_str());
    return absl::InternalError(fmt::format("listen {}: {}", path.string(), ErrnoText(err)));
  }
  return fd;
}

CtlConnection::CtlConnection(UniqueFd fd)
    : fd_(std::move(fd)), accepted_at_(std::chrono::steady_clock::now()) {}

CtlConnection::ReadResult CtlConnection::Read(std::string* line) {
  std::array<char, 1024> buf;
  for (;;) {
    const ssize_t n = recv(fd_.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf.data(), static_cast<size_t>(n));
      if (const size_t nl = in_.find('\n'); nl != std::string::npos) {
        *line = in_.substr(0, nl);
        return ReadResult::kLine;
      }
      if (in_.size() > kMaxRequestBytes) return ReadResult::kTooLong;
      continue;
    }
    if (n == 0) {
      if (in_.empty()) return ReadResult::kClosed;
      *line = in_;
      return ReadResult::kLine;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadResult::kNeedMore;
    return ReadResult::kClosed;
  }
}

bool CtlConnection::Flush() {
  while (out_pos_ < out_.size()) {
    const ssize_t n = send(fd_.get(), out_.data() + out_pos_, out_.size() - out_pos_,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_pos_ += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return false;
    } else {
      return true;  // the client went away; nothing more to do for it
    }
  }
  return true;
}

}  // namespace neuron::sim

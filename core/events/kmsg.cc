#include "core/events/kmsg.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/base/component_log.h"

namespace neuron {
namespace {

// The kernel formats a record into an 8 KiB buffer (CONSOLE_EXT_LOG_MAX), so a larger read
// buffer never sees EINVAL from the real device.
constexpr size_t kStreamBuffer = size_t{16} * 1024;
// Regular files are read in chunks; a line longer than this is discarded as garbage.
constexpr size_t kFileChunk = size_t{256} * 1024;
// Guard against a device that keeps failing with EINVAL/EPIPE without making progress.
constexpr int kMaxSkipsPerCall = 1024;

spdlog::logger& KmsgLog() {
  static std::shared_ptr<spdlog::logger> log = ComponentLogger("kmsg");
  return *log;
}

std::string Quote(std::string_view raw) {
  std::string shown(raw.substr(0, 60));
  for (char& c : shown) {
    if (c == '\n') c = ' ';
  }
  return shown;
}

template <typename T>
bool ParseNumber(std::string_view text, T* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

absl::StatusOr<KmsgRecord> ParseKmsgRecord(std::string_view data) {
  auto bad = [&](std::string_view why) {
    return absl::DataLossError(fmt::format("kmsg record \"{}\": {}", Quote(data), why));
  };
  if (!data.empty() && data.back() == '\n') data.remove_suffix(1);
  const size_t eol = data.find('\n');
  const std::string_view line = data.substr(0, eol);
  const size_t semi = line.find(';');
  if (semi == std::string_view::npos) return bad("no ';' after the header");
  std::string_view header = line.substr(0, semi);

  // Fields: prio, seq, usec, flags, then possibly more (newer kernels append ",caller=...").
  std::vector<std::string_view> fields;
  for (;;) {
    const size_t comma = header.find(',');
    fields.push_back(header.substr(0, comma));
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  if (fields.size() < 4) return bad("header needs <prio>,<seq>,<usec>,<flags>");
  KmsgRecord rec;
  int prio = 0;
  if (!ParseNumber(fields[0], &prio) || prio < 0) return bad("priority is not a number");
  if (!ParseNumber(fields[1], &rec.seq)) return bad("sequence is not a number");
  if (!ParseNumber(fields[2], &rec.usec)) return bad("timestamp is not a number");
  rec.facility = prio >> 3;
  rec.level = prio & 7;
  rec.flags = std::string(fields[3]);
  rec.text = std::string(line.substr(semi + 1));

  std::string_view rest = eol == std::string_view::npos ? std::string_view() : data.substr(eol + 1);
  while (!rest.empty()) {
    const size_t next = rest.find('\n');
    std::string_view cont = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    if (cont.empty() || cont.front() != ' ') return bad("continuation line without leading space");
    cont.remove_prefix(1);
    const size_t eq = cont.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad("continuation line is not KEY=value");
    rec.dict.emplace_back(std::string(cont.substr(0, eq)), std::string(cont.substr(eq + 1)));
  }
  return rec;
}

std::optional<HwErrorRecord> ParseHwError(std::string_view text) {
  const size_t at = text.find(kHwErrToken);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + kHwErrToken.size());
  size_t end = 0;
  while (end < rest.size() && !IsSpace(rest[end])) ++end;
  if (end == 0) return std::nullopt;
  HwErrorRecord rec;
  rec.type = std::string(rest.substr(0, end));
  rec.text = std::string(text);
  rest.remove_prefix(end);
  while (!rest.empty()) {
    while (!rest.empty() && IsSpace(rest.front())) rest.remove_prefix(1);
    size_t len = 0;
    while (len < rest.size() && !IsSpace(rest[len])) ++len;
    const std::string_view token = rest.substr(0, len);
    rest.remove_prefix(len);
    const size_t eq = token.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = token.substr(0, eq);
    const std::string_view value = token.substr(eq + 1);
    int id = 0;
    if (key == "nd-id") {
      if (ParseNumber(value, &id) && id >= 0) rec.nd_id = id;
    } else if (key == "nc-id") {
      if (ParseNumber(value, &id) && id >= 0) rec.nc_id = id;
    } else if (key == "instance-id") {
      rec.instance_id = std::string(value);
    } else if (key == "hostname") {
      rec.hostname = std::string(value);
    } else if (key == "serial-num") {
      rec.serial_number = std::string(value);
    } else if (key == "action") {
      rec.action = std::string(value);
    }
  }
  return rec;
}

bool IsOpenCloseRecord(std::string_view text) {
  return text.find("npid_attach: pid=") != std::string_view::npos ||
         text.find("npid_detach: pid=") != std::string_view::npos;
}

std::optional<ResetRecord> ParseResetRecord(std::string_view text) {
  constexpr std::string_view kThread = "nr_reset_thread_fn: nd";
  const size_t at = text.find(kThread);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + kThread.size());
  const size_t colon = rest.find(": ");
  ResetRecord rec;
  if (colon == std::string_view::npos || !ParseNumber(rest.substr(0, colon), &rec.device)) {
    return std::nullopt;
  }
  rest.remove_prefix(colon + 2);
  // "initiating device reset request N" | "reset request N completed" | "reset request N failed"
  constexpr std::string_view kInitiating = "initiating device reset request ";
  constexpr std::string_view kRequest = "reset request ";
  std::string_view id;
  if (rest.starts_with(kInitiating)) {
    id = rest.substr(kInitiating.size());
  } else if (rest.starts_with(kRequest)) {
    rest.remove_prefix(kRequest.size());
    const size_t space = rest.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    id = rest.substr(0, space);
    const std::string_view outcome = rest.substr(space + 1);
    if (outcome == "completed") {
      rec.step = ResetStep::kCompleted;
    } else if (outcome == "failed") {
      rec.step = ResetStep::kFailed;
    } else {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  uint32_t request = 0;
  if (!ParseNumber(id, &request) || request != kDeviceResetRequest) return std::nullopt;
  return rec;
}

std::vector<std::string_view> SplitKmsgRecords(std::string_view data) {
  std::vector<std::string_view> out;
  size_t start = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t eol = data.find('\n', pos);
    if (eol == std::string_view::npos) eol = data.size() - 1;
    const size_t next = eol + 1;
    // A record ends where the following line does not start with a space.
    if (next >= data.size() || data[next] != ' ') {
      out.push_back(data.substr(start, next - start));
      start = next;
    }
    pos = next;
  }
  return out;
}

KmsgReader::KmsgReader(int fd, std::string display, std::filesystem::path path, bool regular)
    : fd_(fd), display_(std::move(display)), path_(std::move(path)), regular_(regular) {}

KmsgReader::~KmsgReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<KmsgReader>> KmsgReader::Open(const std::filesystem::path& path,
                                                             StartAt start) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const std::string msg = fmt::format("open {}: {}", path.string(), std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(msg) : absl::UnavailableError(msg);
  }
  absl::StatusOr<std::unique_ptr<KmsgReader>> reader = Adopt(fd, path.string());
  if (reader.ok() && (*reader)->regular_) {
    (*reader)->path_ = path;
    if (start == StartAt::kBeginning) (*reader)->offset_ = 0;
  }
  return reader;
}

absl::StatusOr<std::unique_ptr<KmsgReader>> KmsgReader::Adopt(int fd, std::string display) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(fmt::format("fstat {}: {}", display, std::strerror(err)));
  }
  const bool regular = S_ISREG(st.st_mode);
  // The reader never blocks its owner's poll loop.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  std::unique_ptr<KmsgReader> reader(new KmsgReader(fd, std::move(display), {}, regular));
  if (regular) {
    reader->offset_ = static_cast<uint64_t>(st.st_size);
    reader->inode_ = st.st_ino;
  } else if (S_ISCHR(st.st_mode)) {
    // /dev/kmsg: start after the last record (docs/architecture.md#health). Pipes and sockets
    // cannot seek.
    ::lseek(fd, 0, SEEK_END);
  }
  return reader;
}

int KmsgReader::pollable_fd() const { return regular_ ? -1 : fd_; }

absl::Status KmsgReader::ReadAvailable(const RecordFn& on_record, const MalformedFn& on_malformed) {
  return regular_ ? ReadFile(on_record, on_malformed) : ReadStream(on_record, on_malformed);
}

namespace {

void Deliver(std::string_view chunk, const KmsgReader::RecordFn& on_record,
             const KmsgReader::MalformedFn& on_malformed) {
  for (std::string_view raw : SplitKmsgRecords(chunk)) {
    if (raw == "\n" || raw.empty()) continue;
    absl::StatusOr<KmsgRecord> rec = ParseKmsgRecord(raw);
    if (rec.ok()) {
      on_record(*rec);
    } else if (on_malformed) {
      on_malformed(raw, rec.status());
    }
  }
}

}  // namespace

absl::Status KmsgReader::ReadStream(const RecordFn& on_record, const MalformedFn& on_malformed) {
  buffer_.resize(kStreamBuffer);
  int skips = 0;
  for (;;) {
    const ssize_t n = ::read(fd_, buffer_.data(), buffer_.size());
    if (n > 0) {
      Deliver(std::string_view(buffer_.data(), static_cast<size_t>(n)), on_record, on_malformed);
      continue;
    }
    if (n == 0) return absl::OkStatus();  // a closed pipe or socket: nothing more now
    const int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return absl::OkStatus();
    if ((err == EPIPE || err == EINVAL) && ++skips <= kMaxSkipsPerCall) {
      // EPIPE: the ring buffer overwrote records we had not read; the next read continues with
      // the oldest one left. EINVAL: a record did not fit; the kernel has moved past it.
      KmsgLog().warn("{}: {}; skipping", display_,
                     err == EPIPE ? "kernel log records were overwritten before we read them"
                                  : "a record was larger than the read buffer");
      continue;
    }
    return absl::UnavailableError(fmt::format("read {}: {}", display_, std::strerror(err)));
  }
}

absl::Status KmsgReader::ReopenIfReplaced() {
  if (path_.empty()) return absl::OkStatus();
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    // Gone for now (the simulator may be between removal and creation); keep the old fd.
    return absl::OkStatus();
  }
  if (st.st_ino == inode_) return absl::OkStatus();
  const int fd = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return absl::OkStatus();
  ::close(fd_);
  fd_ = fd;
  inode_ = st.st_ino;
  // The writer replaces the file whole (write + rename), so the new file starts with what we
  // have read; keep the offset unless the new file is shorter (a new log).
  if (static_cast<uint64_t>(st.st_size) < offset_) {
    offset_ = 0;
    skipping_line_ = false;
  }
  return absl::OkStatus();
}

absl::Status KmsgReader::ReadFile(const RecordFn& on_record, const MalformedFn& on_malformed) {
  if (absl::Status s = ReopenIfReplaced(); !s.ok()) return s;
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) < offset_) {
    offset_ = 0;  // truncated in place
    skipping_line_ = false;
  }
  buffer_.resize(kFileChunk);
  for (;;) {
    const ssize_t n = ::pread(fd_, buffer_.data(), buffer_.size(), static_cast<off_t>(offset_));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(fmt::format("read {}: {}", display_, std::strerror(errno)));
    }
    if (n == 0) return absl::OkStatus();
    std::string_view data(buffer_.data(), static_cast<size_t>(n));
    if (skipping_line_) {
      const size_t eol = data.find('\n');
      if (eol == std::string_view::npos) {
        offset_ += data.size();
        continue;
      }
      offset_ += eol + 1;
      skipping_line_ = false;
      continue;
    }
    const size_t last = data.rfind('\n');
    if (last == std::string_view::npos) {
      if (data.size() < buffer_.size()) return absl::OkStatus();  // wait for the rest
      if (on_malformed) {
        on_malformed(data.substr(0, 80),
                     absl::DataLossError(fmt::format("{}: line longer than {} bytes, skipped",
                                                     display_, kFileChunk)));
      }
      offset_ += data.size();
      skipping_line_ = true;
      continue;
    }
    const std::string_view complete = data.substr(0, last + 1);
    offset_ += complete.size();
    Deliver(complete, on_record, on_malformed);
    if (static_cast<size_t>(n) < buffer_.size()) return absl::OkStatus();
  }
}

}  // namespace neuron

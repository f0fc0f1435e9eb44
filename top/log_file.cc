#include "top/log_file.h"

#include <fcntl.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "fmt/format.h"

namespace neuron::top {
namespace {

// Makes the missing directories above `file`, each 0700 (the XDG base directory spec's mode for
// state it creates); existing ones are left as they are.
void MakeParents(const std::filesystem::path& file) {
  std::vector<std::filesystem::path> missing;
  std::error_code ec;
  for (std::filesystem::path p = file.parent_path(); !p.empty() && !std::filesystem::exists(p, ec);
       p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) ::mkdir(it->c_str(), 0700);
}

class FdSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit FdSink(UniqueFd fd) : fd_(std::move(fd)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a full disk loses log lines, never the tool
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  void flush_() override {}  // write(2) leaves nothing buffered here

 private:
  UniqueFd fd_;
};

}  // namespace

absl::StatusOr<std::string> DefaultLogFile(const GetEnvFn& getenv) {
  const auto set = [&](const char* name) -> std::optional<std::string> {
    std::optional<std::string> v = getenv(name);
    if (!v || v->empty()) return std::nullopt;
    return v;
  };
  if (const auto state = set("XDG_STATE_HOME")) return *state + "/neuron-top.log";
  if (const auto home = set("HOME")) return *home + "/.local/state/neuron-top.log";
  std::string dir = set("TMPDIR").value_or("/tmp") + "/neuron-top-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::UnavailableError(
        fmt::format("neither XDG_STATE_HOME nor HOME is set and mkdtemp {} failed: {}", dir,
                    std::strerror(errno)));
  }
  return dir + "/neuron-top.log";
}

absl::StatusOr<UniqueFd> OpenLogFile(const std::string& path) {
  MakeParents(path);
  UniqueFd fd(::open(path.c_str(),
                     O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                     0600));
  if (!fd.valid()) {
    // ELOOP: the last component is a symlink, which is not followed. O_NONBLOCK: a FIFO planted
    // there fails (ENXIO) or is refused below, instead of blocking the open.
    const int err = errno;
    return absl::PermissionDeniedError(
        fmt::format("cannot open log file {}: {}{}", path, std::strerror(err),
                    err == ELOOP ? " (a symlink: not followed)" : ""));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        fmt::format("log file {} is not a regular file of this user; not written", path));
  }
  return fd;
}

std::shared_ptr<spdlog::sinks::sink> MakeFdSink(UniqueFd fd) {
  return std::make_shared<FdSink>(std::move(fd));
}

}  // namespace neuron::top

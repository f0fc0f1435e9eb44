#include "driver-sim/runtime/reservation.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/base/unique_fd.h"
#include "driver-sim/driver/sim_paths.h"

namespace neuron::nrt {
namespace {

absl::Status Errno(std::string_view op, const std::string& path) {
  return absl::InternalError(fmt::format("{} {}: {}", op, path, std::strerror(errno)));
}

absl::Status MakeDirs(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(fmt::format("mkdir {}: {}", dir.string(), ec.message()));
  return absl::OkStatus();
}

// Opens and try-locks one core's lock file; an empty UniqueFd when another process holds it.
absl::StatusOr<UniqueFd> TryLockCore(const std::filesystem::path& dir, int core) {
  const std::string path = (dir / std::to_string(core)).string();
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return Errno("open", path);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
  const int err = errno;
  fd.Reset();
  if (err == EWOULDBLOCK) return UniqueFd();
  errno = err;
  return Errno("flock", path);
}

}  // namespace

absl::StatusOr<ReservationRequest> RequestFromEnv(int total_cores) {
  const CoreRange all{0, total_cores};
  const char* visible = std::getenv("NEURON_RT_VISIBLE_CORES");
  if (visible != nullptr && *visible != '\0') {
    absl::StatusOr<CoreRange> range = ParseVisibleCores(visible);
    if (!range.ok()) return range.status();
    if (absl::Status s = CheckCoreRange(*range, total_cores); !s.ok()) return s;
    return ReservationRequest{*range, range->count,
                              fmt::format("NEURON_RT_VISIBLE_CORES={}", visible)};
  }
  const char* num = std::getenv("NEURON_RT_NUM_CORES");
  if (num != nullptr && *num != '\0') {
    const std::string_view s(num);
    int n = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || ptr != s.data() + s.size() || n < 0) {
      return absl::InvalidArgumentError(
          fmt::format("NEURON_RT_NUM_CORES=\"{}\": expected a non-negative number of cores", s));
    }
    if (n > 0) return ReservationRequest{all, n, fmt::format("NEURON_RT_NUM_CORES={}", n)};
  }
  return ReservationRequest{all, total_cores, "all cores"};
}

absl::StatusOr<std::unique_ptr<CoreReservation>> CoreReservation::Acquire(
    const RootPaths& root, const ReservationRequest& req) {
  const std::filesystem::path dir = sim::CoreLockDir(root);
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return Errno("open", dir.string());
  // One search at a time on this node: the driver marks its table atomically
  // (docs/runtime.md#reservation-and-indices).
  while (::flock(dir_fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Errno("flock", dir.string());
  }
  // Probe every core of the window, holding the free ones for now.
  std::vector<UniqueFd> held(static_cast<size_t>(req.window.count));
  absl::Status error;
  for (int i = 0; i < req.window.count && error.ok(); ++i) {
    absl::StatusOr<UniqueFd> fd = TryLockCore(dir, req.window.first + i);
    if (fd.ok()) {
      held[static_cast<size_t>(i)] = *std::move(fd);
    } else {
      error = fd.status();
    }
  }
  int chosen = -1, longest = 0, run = 0;
  for (int i = 0; i < req.window.count; ++i) {
    run = held[static_cast<size_t>(i)] ? run + 1 : 0;
    longest = std::max(longest, run);
    if (chosen < 0 && run == req.count) chosen = i - req.count + 1;
  }
  std::vector<UniqueFd> mine;
  for (int i = 0; i < req.window.count; ++i) {
    UniqueFd& fd = held[static_cast<size_t>(i)];
    if (!fd) continue;
    if (error.ok() && chosen >= 0 && i >= chosen && i < chosen + req.count) {
      mine.push_back(std::move(fd));
    } else {
      fd.Reset();  // not ours after all: free for others before the search lock ends
    }
  }
  dir_fd.Reset();  // ends the search lock
  if (!error.ok()) return error;
  if (chosen < 0) {
    return absl::ResourceExhaustedError(
        fmt::format("NeuronCore(s) not available - Requested:nc{}-nc{} Available:{}",
                    req.window.first, req.window.last(), longest));
  }
  return std::unique_ptr<CoreReservation>(
      new CoreReservation(CoreRange{req.window.first + chosen, req.count}, std::move(mine)));
}

CoreReservation::~CoreReservation() { Release(); }

void CoreReservation::Release() {
  fds_.clear();  // closing the lock files frees the cores
}

}  // namespace neuron::nrt

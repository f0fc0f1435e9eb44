#include "core/node/withhold.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "core/base/file_io.h"
#include "fmt/format.h"

namespace neuron {
namespace {

std::filesystem::path WithheldDir(std::string_view root) {
  return std::filesystem::path(root.empty() ? "/" : std::string(root)) / "run" /
         "neuron-node-agent" / "withheld";
}

absl::Status OpenError(const std::string& path, int err) {
  return absl::FailedPreconditionError(fmt::format("open {}: {}", path, std::strerror(err)));
}

}  // namespace

std::string WithholdLockPath(std::string_view root, int device) {
  return (WithheldDir(root) / fmt::format("neuron{}.lock", device)).string();
}

std::set<int> DevicesWithLockFiles(std::string_view root) {
  std::set<int> out;
  for (const std::string& name : ListDir(WithheldDir(root))) {
    int device = -1;
    if (std::sscanf(name.c_str(), "neuron%d.lock", &device) == 1 &&
        name == fmt::format("neuron{}.lock", device)) {
      out.insert(device);
    }
  }
  return out;
}

absl::StatusOr<WithholdLock> WithholdLock::Take(std::string_view root, int device, Mode mode) {
  std::error_code ec;
  std::filesystem::create_directories(WithheldDir(root), ec);
  if (ec) {
    return absl::FailedPreconditionError(
        fmt::format("cannot make {}: {}", WithheldDir(root).string(), ec.message()));
  }
  const std::string path = WithholdLockPath(root, device);
  // O_NOFOLLOW: the directory is the agent's, but a planted link must not make it lock elsewhere.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return OpenError(path, errno);
  const int op = (mode == Mode::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  if (::flock(fd.get(), op) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::UnavailableError(
          fmt::format("neuron{} is withheld by another holder ({})", device, path));
    }
    return absl::FailedPreconditionError(fmt::format("flock {}: {}", path, std::strerror(errno)));
  }
  return WithholdLock(device, std::move(fd));
}

absl::StatusOr<AllocationHolds> HoldForAllocation(std::string_view root,
                                                  const std::set<int>& devices) {
  AllocationHolds out;
  for (int device : devices) {
    absl::StatusOr<WithholdLock> lock =
        WithholdLock::Take(root, device, WithholdLock::Mode::kShared);
    if (lock.ok()) {
      out.locks.push_back(*std::move(lock));
    } else if (absl::IsFailedPrecondition(lock.status())) {
      if (out.unusable.empty()) out.unusable = std::string{lock.status().message()};
    } else {
      return lock.status();
    }
  }
  return out;
}

absl::StatusOr<bool> IsWithheld(std::string_view root, int device) {
  const std::string path = WithholdLockPath(root, device);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT || errno == ENOTDIR) return false;  // no lock file: nobody holds one
    return OpenError(path, errno);
  }
  // A shared lock conflicts only with an exclusive one: taking and dropping it asks exactly
  // "does anyone withhold the device", and never blocks the plugin's own shared holds.
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) return false;
  if (errno == EWOULDBLOCK) return true;
  return absl::UnavailableError(fmt::format("flock {}: {}", path, std::strerror(errno)));
}

}  // namespace neuron

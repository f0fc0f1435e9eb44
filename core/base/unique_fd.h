#pragma once
// UniqueFd owns one file descriptor and closes it when it goes, so an early return or an
// exception cannot leak one, and a descriptor is never closed twice. Moving transfers ownership;
// copying is not allowed. Not thread-safe (like the descriptor number itself).
//
// close() is called once and its result ignored on purpose: on Linux the descriptor is released
// even when close() reports EINTR or EIO, so retrying could close a descriptor another thread has
// just been given (close(2), "Dealing with error returns from close()"). A caller that must know
// whether buffered data reached a file calls fsync() first.

#include <unistd.h>

#include <utility>

namespace neuron {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }
  // Closes the held descriptor (if any) and holds `fd` instead.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace neuron

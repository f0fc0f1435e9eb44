#pragma once
// A stand-in for a runtime process, for tests of the node daemon's side of the datastores: a
// forked child that opens /dev/neuronN of a simulated node (under the driver's interposer, which
// the test process runs under), claims its datastore slot with DatastoreWriter::Acquire as
// libnrt-sim does, and then writes counters, releases, unmaps or closes the device when the test
// says so. The test drives it over a socket pair, one command and one answer at a time, so every
// call has taken effect in the child's datastore when it returns.
//
// Not thread-safe: one thread drives one RuntimeProcess.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/unique_fd.h"
#include "driver-sim/driver/datastore_writer.h"

namespace neuron::sim::testing {

class RuntimeProcess {
 public:
  // Forks the child, which opens `node` (ROOT/dev/neuron<device>) read-write and acquires its
  // slot. nullptr (with a test failure) when either fails.
  static std::unique_ptr<RuntimeProcess> Start(const std::filesystem::path& node, int device) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      return nullptr;
    }
    UniqueFd ours(sv[0]), theirs(sv[1]);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ours.Reset();
      ::_exit(Serve(theirs.get(), node, device));
    }
    theirs.Reset();  // the child's end is the child's alone: its exit ends the connection
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      return nullptr;
    }
    std::unique_ptr<RuntimeProcess> p(new RuntimeProcess(pid, std::move(ours)));
    Answer ready{};
    if (::recv(p->sock_.get(), &ready, sizeof(ready), 0) != sizeof(ready) || ready.err != 0) {
      ADD_FAILURE() << "runtime stand-in on " << node << " did not start: " << ready.text;
      return nullptr;
    }
    return p;
  }
  ~RuntimeProcess() {
    sock_.Reset();  // a live child sees the end and exits
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  RuntimeProcess(const RuntimeProcess&) = delete;
  RuntimeProcess& operator=(const RuntimeProcess&) = delete;

  pid_t pid() const { return pid_; }

  ::testing::AssertionResult SetCore(int core, int index, uint64_t v) {
    return Call({Op::kSetCore, core, index, v});
  }
  ::testing::AssertionResult SetDevice(int index, uint64_t v) {
    return Call({Op::kSetDevice, 0, index, v});
  }
  ::testing::AssertionResult InitEfa(int efas) { return Call({Op::kInitEfa, efas, 0, 0}); }
  ::testing::AssertionResult AddEfa(int efa, int field, uint64_t delta) {
    return Call({Op::kAddEfa, efa, field, delta});
  }
  // RELEASE_NEURON_DS, what nrt_close does; the process lives on with its device fd.
  ::testing::AssertionResult Release() { return Call({Op::kRelease, 0, 0, 0}); }
  // Unmaps the slot without releasing it, then closes the device fd: the driver's release of
  // the process's last open.
  ::testing::AssertionResult CloseDevice() { return Call({Op::kCloseDevice, 0, 0, 0}); }
  // SIGKILL without reaping: the driver must notice the death of a zombie.
  void Kill() { ::kill(pid_, SIGKILL); }

 private:
  enum class Op : int32_t { kSetCore, kSetDevice, kInitEfa, kAddEfa, kRelease, kCloseDevice };
  struct Command {
    Op op;
    int32_t a, b;
    uint64_t v;
  };
  struct Answer {
    int32_t err;  // 0, or a failure described in text
    char text[252];
  };

  RuntimeProcess(pid_t pid, UniqueFd sock) : pid_(pid), sock_(std::move(sock)) {}

  ::testing::AssertionResult Call(const Command& c) {
    Answer a{};
    if (::send(sock_.get(), &c, sizeof(c), MSG_NOSIGNAL) != sizeof(c) ||
        ::recv(sock_.get(), &a, sizeof(a), 0) != sizeof(a)) {
      return ::testing::AssertionFailure() << "runtime stand-in " << pid_ << " is gone";
    }
    if (a.err != 0) return ::testing::AssertionFailure() << a.text;
    return ::testing::AssertionSuccess();
  }

  // The child's side: its exit code.
  static int Serve(int sock, const std::filesystem::path& node, int device) {
    auto answer = [sock](absl::Status s) {
      Answer a{};
      a.err = s.ok() ? 0 : 1;
      std::strncpy(a.text, std::string{s.message()}.c_str(), sizeof(a.text) - 1);
      return ::send(sock, &a, sizeof(a), MSG_NOSIGNAL) == sizeof(a);
    };
    UniqueFd fd(::open(node.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd) {
      answer(absl::InternalError("open " + node.string() + ": " + std::strerror(errno)));
      return 1;
    }
    absl::StatusOr<std::unique_ptr<DatastoreWriter>> w =
        DatastoreWriter::Acquire(fd.get(), device, ::getpid());
    if (!answer(w.status()) || !w.ok()) return 1;
    Command c{};
    while (::recv(sock, &c, sizeof(c), 0) == sizeof(c)) {
      if (!answer(Execute(c, *w, &fd))) return 1;
    }
    return 0;  // the test let go of us
  }

  static absl::Status Execute(const Command& c, std::unique_ptr<DatastoreWriter>& w, UniqueFd* fd) {
    if (!w && c.op != Op::kCloseDevice) return absl::FailedPreconditionError("no datastore");
    switch (c.op) {
      case Op::kSetCore:
        return w->SetCoreCounter(c.a, c.b, c.v);
      case Op::kSetDevice:
        return w->SetDeviceCounter(c.b, c.v);
      case Op::kInitEfa:
        return w->InitEfaTraffic(c.a);
      case Op::kAddEfa:
        w->AddEfaTraffic(c.a, c.b, c.v);
        return absl::OkStatus();
      case Op::kRelease:
        w->Release();
        w.reset();  // nothing may be written after the release
        return absl::OkStatus();
      case Op::kCloseDevice:
        w.reset();
        fd->Reset();  // the process's last close of the device: the driver releases its slot
        return absl::OkStatus();
    }
    return absl::InvalidArgumentError("unknown command");
  }

  pid_t pid_;
  UniqueFd sock_;
};

}  // namespace neuron::sim::testing

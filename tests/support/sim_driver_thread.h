#pragma once
// The simulated driver's device ABI without the rest of the node daemon, for tests that play
// the daemon's other parts themselves (libnrt-sim's tests write faults.json and device states
// directly): the DriverServer and the DatastoreMirror over an existing SimTree, served on a
// thread of the test process. The test process must run under the interposer (its ctest
// environment preloads it, tests/CMakeLists.txt NEURON_SIM_DRIVER_ENV).
//
// Device state is whatever the tree's sysfs `reset` file says, so a test that writes it sees
// the driver follow (opens wait in RESET, fail in INVALID).
//
// Thread-safety: the SimTree is not thread-safe and this thread reads and writes it (device
// presence, sysfs folds), so a test changes the tree's shape only through Unplug(). Writing
// attribute files (reset, faults.json) from the test thread is fine.

#include <poll.h>
#include <pthread.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "core/base/file_io.h"
#include "driver-sim/driver/driver_server.h"
#include "driver-sim/driver/ds_mirror.h"
#include "driver-sim/driver/sim_tree.h"

namespace neuron::testing {

class SimDriverThread final : private sim::DriverHost {
 public:
  // `tree` must outlive this object and be created already.
  SimDriverThread(sim::SimTree* tree, const InstanceSpec& spec, int lnc)
      : tree_(tree), devices_(spec.devices) {
    log_ = std::make_shared<spdlog::logger>("sim-driver-test",
                                            std::make_shared<spdlog::sinks::null_sink_mt>());
    mirror_ = std::make_unique<sim::DatastoreMirror>(tree, spec, lnc, log_);
    absl::StatusOr<std::unique_ptr<sim::DriverServer>> server =
        sim::DriverServer::Start(tree->paths(), spec, lnc, this, mirror_.get(), log_);
    status_ = server.status();
    if (!server.ok()) return;
    server_ = *std::move(server);
    states_.resize(static_cast<size_t>(spec.devices));
    ForkGate();  // registers the fork handlers before the thread exists
    std::promise<void> looping;
    std::future<void> started = looping.get_future();
    thread_ = std::thread([this, &looping] { Loop(&looping); });
    // The thread's start-up allocates (the sanitizer's bookkeeping too), outside any gate: a
    // fork must not come before it is done, so the constructor returns only once it loops.
    started.wait();
  }
  ~SimDriverThread() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  const absl::Status& status() const { return status_; }

  // Unplugs `device` as `neuron-sim ctl unplug` does: the tree loses it and the driver forgets
  // its processes and slots (their fds then answer ENODEV).
  absl::Status Unplug(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = tree_->RemoveDevice(device); !s.ok()) return s;
    server_->OnUnplug(device);
    return absl::OkStatus();
  }

 private:
  std::optional<DeviceState> StateOf(int device) const override {
    if (device < 0 || device >= devices_ || !tree_->DevicePresent(device)) return std::nullopt;
    absl::StatusOr<std::string> text = ReadAttribute(tree_->paths().NeuronDevice(device) / "reset");
    if (!text.ok() || text->empty()) return DeviceState::kReady;
    switch ((*text)[0]) {
      case '0':
        return DeviceState::kReset;
      case '2':
        return DeviceState::kInvalid;
      default:
        return DeviceState::kReady;
    }
  }
  void Kmsg(int priority, const std::string& text) override {
    (void)tree_->AppendKmsg(priority, text);
  }

  // A fork in the test process (the runtime tests fork their ranks) must not catch this thread
  // inside malloc or holding a lock the child then needs: GCC 12's AddressSanitizer does not
  // lock its allocator around fork. So everything here that may allocate runs under one gate
  // that fork takes first (ForkGate), and the loop's buffers are reused.
  static std::mutex& ForkGate() {
    static std::mutex gate;
    static const int registered =
        pthread_atfork([] { gate.lock(); }, [] { gate.unlock(); }, [] { gate.unlock(); });
    (void)registered;
    return gate;
  }

  void Loop(std::promise<void>* looping) {
    auto next_mirror = std::chrono::steady_clock::now();
    std::vector<pollfd> fds;
    while (!stop_) {
      {
        std::scoped_lock lock(ForkGate(), mu_);
        fds.clear();
        server_->AppendPollFds(&fds);
        if (looping != nullptr) looping->set_value();
        looping = nullptr;
      }
      ::poll(fds.data(), fds.size(), 20);
      std::scoped_lock lock(ForkGate(), mu_);
      server_->Serve(fds);
      for (int d = 0; d < devices_; ++d) {  // state written behind our back
        const std::optional<DeviceState> s = StateOf(d);
        if (s != states_[static_cast<size_t>(d)]) server_->OnStateChange(d);
        states_[static_cast<size_t>(d)] = s;
      }
      if (const auto now = std::chrono::steady_clock::now(); now >= next_mirror) {
        mirror_->Poll(now);
        next_mirror = now + std::chrono::milliseconds(80);
      }
    }
  }

  sim::SimTree* tree_;
  int devices_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<sim::DatastoreMirror> mirror_;
  std::unique_ptr<sim::DriverServer> server_;
  std::vector<std::optional<DeviceState>> states_;
  std::mutex mu_;  // held by the loop while it serves, and by Unplug
  absl::Status status_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace neuron::testing

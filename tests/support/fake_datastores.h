#pragma once
// Datastores for unit tests of the agent without a simulated driver: the test writes them with
// sim::DatastoreWriter::OverMemory and hands the Sampler (or a collector) a DatastoreReader that
// parses them with core's ParseDatastore at each read. Integration tests read through the real
// device ABI instead (neuron-sim up + neuron-sim run/exec).

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/sample/datastore.h"
#include "driver-sim/driver/datastore_writer.h"

namespace neuron::testing {

class FakeDatastores : public std::enable_shared_from_this<FakeDatastores> {
 public:
  static std::shared_ptr<FakeDatastores> Make() {
    return std::shared_ptr<FakeDatastores>(new FakeDatastores());
  }

  // A new, zeroed datastore of (device, pid) with its headers written; replaces an old one.
  sim::DatastoreWriter& Add(int device, int pid) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[{device, pid}];
    e.bytes.assign(nds::kSize, 0);
    e.writer = sim::DatastoreWriter::OverMemory(e.bytes, device, pid);
    return *e.writer;
  }
  void Remove(int device, int pid) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase({device, pid});
  }
  void SetState(SourceState state) {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = std::move(state);
  }

  // A reader over these datastores (the Sampler owns it; the test keeps writing).
  std::unique_ptr<DatastoreReader> Reader();

 private:
  friend class FakeReader;
  FakeDatastores() { state_ = {true, true, ""}; }
  struct Entry {
    std::vector<uint8_t> bytes;
    std::unique_ptr<sim::DatastoreWriter> writer;
  };
  std::mutex mu_;
  std::map<DatastoreKey, Entry> entries_;
  SourceState state_;

  class FakeReader final : public DatastoreReader {
   public:
    explicit FakeReader(std::shared_ptr<FakeDatastores> d) : d_(std::move(d)) {}
    std::vector<DatastoreKey> List() override {
      std::lock_guard<std::mutex> lock(d_->mu_);
      std::vector<DatastoreKey> keys;
      for (const auto& [key, e] : d_->entries_) keys.push_back(key);
      return keys;
    }
    DatastoreScan ReadAll() override {
      std::lock_guard<std::mutex> lock(d_->mu_);
      DatastoreScan scan;
      for (const auto& [key, e] : d_->entries_) {
        absl::StatusOr<DatastoreRecord> r = ParseDatastore(
            std::as_bytes(std::span(e.bytes)), key.device, key.pid, "fake", &scan.errors);
        if (r.ok()) scan.records.push_back(*std::move(r));
      }
      return scan;
    }
    std::string_view name() const override { return "fake"; }
    void SetDevices(std::vector<int>) override {}
    SourceState State() const override {
      std::lock_guard<std::mutex> lock(d_->mu_);
      return d_->state_;
    }
    bool AwaitFirstProbe(std::chrono::milliseconds) override { return true; }

   private:
    std::shared_ptr<FakeDatastores> d_;
  };
};

inline std::unique_ptr<DatastoreReader> FakeDatastores::Reader() {
  return std::make_unique<FakeReader>(shared_from_this());
}

}  // namespace neuron::testing

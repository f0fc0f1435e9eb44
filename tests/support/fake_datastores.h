#pragma once
// Datastores for unit tests of the agent without a simulated driver: the test writes them with
// sim::DatastoreWriter::OverMemory and hands the Sampler (or a collector) a DatastoreReader that
// parses them with core's ParseDatastore at each read, and the runtimes' records as values
// through a RuntimeRecordsReader (Records()), as libnrt would give them. Integration tests read
// through the real device ABI and libnrt-sim's libnrt.so.1 instead (neuron-sim up + neuron-sim
// run/exec).

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/sample/datastore.h"
#include "core/sample/runtime_records.h"
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
    records_.erase({device, pid});
  }
  // The records libnrt gives for (device, pid); without a call, that process's are unknown.
  RuntimeRecords& SetRecords(int device, int pid) {
    std::lock_guard<std::mutex> lock(mu_);
    RuntimeRecords& r = records_[{device, pid}];
    r.device = device;
    r.pid = pid;
    return r;
  }
  // The records reader's state (default: known and up).
  void SetRecordsState(SourceState state) {
    std::lock_guard<std::mutex> lock(mu_);
    records_state_ = std::move(state);
  }
  void SetState(SourceState state) {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = std::move(state);
  }

  // A reader over these datastores (the Sampler owns it; the test keeps writing).
  std::unique_ptr<DatastoreReader> Reader();
  // A records reader over the records set with SetRecords.
  std::shared_ptr<RuntimeRecordsReader> Records();

 private:
  friend class FakeReader;
  friend class FakeRecords;
  FakeDatastores() {
    state_ = {true, true, ""};
    records_state_ = {true, true, ""};
  }
  struct Entry {
    std::vector<uint8_t> bytes;
    std::unique_ptr<sim::DatastoreWriter> writer;
  };
  std::mutex mu_;
  std::map<DatastoreKey, Entry> entries_;
  SourceState state_;
  std::map<DatastoreKey, RuntimeRecords> records_;
  SourceState records_state_;

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
        absl::StatusOr<DatastoreRecord> r =
            ParseDatastore(std::as_bytes(std::span(e.bytes)), key.device, key.pid, "fake");
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

  class FakeRecords final : public RuntimeRecordsReader {
   public:
    explicit FakeRecords(std::shared_ptr<FakeDatastores> d) : d_(std::move(d)) {}
    void ReadHeld(int, std::span<const int>) override {}
    void Release(int) override {}
    RuntimeRecordsScan Latest() const override {
      std::lock_guard<std::mutex> lock(d_->mu_);
      RuntimeRecordsScan scan;
      scan.state = d_->records_state_;
      for (const auto& [key, r] : d_->records_) scan.records.push_back(r);
      return scan;
    }

   private:
    std::shared_ptr<FakeDatastores> d_;
  };
};

inline std::unique_ptr<DatastoreReader> FakeDatastores::Reader() {
  return std::make_unique<FakeReader>(shared_from_this());
}

inline std::shared_ptr<RuntimeRecordsReader> FakeDatastores::Records() {
  return std::make_shared<FakeRecords>(shared_from_this());
}

}  // namespace neuron::testing

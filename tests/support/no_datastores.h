#pragma once
// A DatastoreReader that sees no runtime's datastore, for tests about sysfs alone (fixture trees
// have no driver behind their device nodes). Thread-safe (no state).

#include <chrono>
#include <string_view>
#include <vector>

#include "core/sample/datastore.h"

namespace neuron::testing {

class NoDatastores final : public DatastoreReader {
 public:
  std::vector<DatastoreKey> List() override { return {}; }
  DatastoreScan ReadAll() override { return {}; }
  std::string_view name() const override { return "none"; }
  void SetDevices(std::vector<int> /*devices*/) override {}
  SourceState State() const override { return {true, false, "no datastores in a fixture"}; }
  bool AwaitFirstProbe(std::chrono::milliseconds /*timeout*/) override { return true; }
};

}  // namespace neuron::testing

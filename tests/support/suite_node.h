#pragma once
// A simulated node with its temporary directory, the daemon's clean exit checked when it goes
// (tests/support/sim_testing.h ExpectCleanExit): shared by a suite (made in SetUpTestSuite, gone
// in TearDownTestSuite) or one test's own (a fixture member). Thread-compatible: its owner
// serializes.

#include <string>
#include <utility>
#include <vector>

#include "tests/support/sim_node.h"
#include "tests/support/sim_testing.h"
#include "tests/support/temp_dir.h"

namespace neuron::testing {

class SuiteNode {
 public:
  // `neuron-sim up --instance <instance>` (sim_bin) over a new temporary directory named after
  // `prefix`, with `up_args` after the instance: ROOT is its root/, the processes' logs go beside
  // it. node().ready() says whether it came up, node().Log() why not.
  SuiteNode(const std::string& prefix, const std::string& instance, std::string sim_bin,
            const std::vector<std::string>& up_args = {})
      : dir_(prefix),
        node_({.sim_bin = std::move(sim_bin),
               .root = dir_.path() / "root",
               .logs = dir_.path(),
               .on_stop = ExpectCleanExit}) {
    node_.Up(instance, up_args);
  }

  TempDir& dir() { return dir_; }
  SimNode& node() { return node_; }
  const SimNode& node() const { return node_; }

 private:
  TempDir dir_;  // before node_: the node stops before its directory goes
  SimNode node_;
};

}  // namespace neuron::testing

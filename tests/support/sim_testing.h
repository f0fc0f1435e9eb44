#pragma once
// GoogleTest conveniences over the simulated-node helpers (tests/support/sim_tree_fixture.h,
// tests/support/sim_node.h), whose own API returns errors instead: here they fail the running
// test. Thread-compatible.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "driver-sim/driver/sim_tree.h"
#include "tests/support/sim_tree_fixture.h"

namespace neuron::testing {

// BuildSimTree, failing the test (and returning nullptr) when the tree cannot be built.
std::unique_ptr<sim::SimTree> MakeSimTree(const std::filesystem::path& root,
                                          std::string_view instance,
                                          const SimTreeOptions& options = {});

// A SimNodeOptions::on_stop for tests: the daemon must have exited 0 when the node stopped it,
// since a sanitizer report inside it changes its exit code.
void ExpectCleanExit(std::optional<int> exit_code, const std::string& log);

}  // namespace neuron::testing

#pragma once
// Golden files (docs/style.md#fixtures-and-goldens): what a test renders is compared with a file
// checked in under tests/fixtures/, and NEURON_UPDATE_GOLDENS=1 rewrites the file instead, as
// node_exporter's `-u` does. Header-only: NEURON_SOURCE_DIR is each test target's own definition
// (tests/CMakeLists.txt), not the support library's.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "tests/support/subprocess.h"

namespace neuron::testing {

// Compares `actual` with tests/fixtures/<fixture> (e.g. "monitor/trn1.2xlarge.native.prom");
// rewrites that file when NEURON_UPDATE_GOLDENS=1.
inline void ExpectGolden(const std::filesystem::path& fixture, const std::string& actual) {
  const std::filesystem::path golden =
      std::filesystem::path(NEURON_SOURCE_DIR) / "tests/fixtures" / fixture;
  const char* update = std::getenv("NEURON_UPDATE_GOLDENS");
  if (update != nullptr && std::string_view(update) == "1") {
    WriteFile(golden, actual);  // creates the directories it needs
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(golden))
      << golden << " is missing; run with NEURON_UPDATE_GOLDENS=1";
  EXPECT_EQ(actual, ReadFile(golden))
      << "differs from " << golden << " (NEURON_UPDATE_GOLDENS=1 rewrites it)";
}

}  // namespace neuron::testing

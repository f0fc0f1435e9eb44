// core/base/version.h: the version every binary prints is CMake's project(VERSION).

#include "core/base/version.h"

#include <gtest/gtest.h>

namespace neuron {
namespace {

TEST(VersionTest, IsTheProjectVersion) {
  EXPECT_EQ(AgentVersion(), NEURON_PROJECT_VERSION);
  EXPECT_FALSE(AgentVersion().empty());
}

}  // namespace
}  // namespace neuron

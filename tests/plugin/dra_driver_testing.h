#pragma once
// Shared by the DRA prepare tests (dra_driver_test.cc, dra_ultraserver_test.cc): claims as
// neuron-dra-api would answer them, and a Driver on a NodeState the test fills, writing into a
// temporary directory.

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "plugin/dra/cdi.h"
#include "plugin/dra/claim_source.h"
#include "plugin/dra/driver.h"
#include "tests/support/temp_dir.h"

namespace neuron::plugin::dra::testing {

inline constexpr std::string_view kNode = "node-a";

// Claims by "namespace/name", as neuron-dra-api would answer them; counts the questions.
class FakeClaims : public ClaimSource {
 public:
  absl::StatusOr<ResourceClaim> Get(std::string_view ns, std::string_view name) override {
    ++asked;
    const auto it = claims.find(std::string(ns) + "/" + std::string(name));
    if (it == claims.end()) return absl::NotFoundError("no such claim");
    return it->second;
  }
  // A claim of `devices` (ours, this pool, request "r"), with an optional opaque config. Every
  // result is neuron.aws.com's (as the scheduler allocated EFAs before they had a driver of their
  // own) unless `efa_driver` names the driver of the EFAs.
  ClaimRef Add(const std::string& name, const std::vector<std::string>& devices,
               std::optional<nlohmann::json> parameters = std::nullopt,
               const std::string& efa_driver = "neuron.aws.com") {
    ResourceClaim c;
    c.namespace_ = "default";
    c.name = name;
    c.uid = "uid-" + name;
    c.allocated = true;
    for (const std::string& d : devices) {
      c.results.push_back({.request = "r",
                           .driver = d.starts_with("efa-") ? efa_driver : "neuron.aws.com",
                           .pool = std::string(kNode),
                           .device = d});
    }
    if (parameters) {
      c.config.push_back({.source = "FromClaim",
                          .requests = {"r"},
                          .driver = "neuron.aws.com",
                          .parameters = *parameters});
    }
    claims[c.namespace_ + "/" + name] = c;
    return {c.namespace_, c.name, c.uid};
  }
  std::map<std::string, ResourceClaim> claims;
  std::atomic<int> asked{0};  // Prepare asks for several claims at once
};

// A fixture's base: SetUp fills state_ with the node's hardware.
class DriverTest : public ::testing::Test {
 protected:
  // neuron.aws.com's driver; or with `driver_name`, that driver of ours (its checkpoint apart),
  // looking at `peer`'s claims too.
  std::unique_ptr<Driver> NewDriver(std::string_view driver_name = kDriverName,
                                    const Driver* peer = nullptr) {
    absl::StatusOr<std::unique_ptr<Driver>> d =
        Driver::Create({.node_name = std::string(kNode),
                        .cdi_dir = tmp_.path() / "cdi",
                        .checkpoint_dir = driver_name == kDriverName
                                              ? tmp_.path() / "ck"
                                              : tmp_.path() / ("ck-" + std::string(driver_name)),
                        .state = &state_,
                        .claims = &claims_,
                        .driver_name = driver_name,
                        .peer = peer});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : nullptr;
  }

  absl::StatusOr<std::vector<PreparedDevice>> PrepareOne(Driver& d, const ClaimRef& ref) {
    auto out = d.Prepare({ref});
    return out.at(ref.uid);
  }

  nlohmann::json CdiSpec(const std::string& uid) {
    std::ifstream in(CdiSpecPath({.dir = tmp_.path() / "cdi"}, uid));
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str());
  }

  neuron::testing::TempDir tmp_;
  NodeState state_{std::chrono::milliseconds(1000)};
  FakeClaims claims_;
};

}  // namespace neuron::plugin::dra::testing

// The health policy (plugin/config.h, docs/OPERATIONS.md#remediation): the action per class of
// evidence, the older booleans and dra.taint_effect mapped onto it, and what the actions decide:
// the device's strongest action, its DRA taint's effect and the Node condition.

#include <gtest/gtest.h>

#include "plugin/config.h"
#include "plugin/dra/slice.h"
#include "plugin/node_watcher.h"
#include "tests/support/fake_env.h"

namespace neuron::plugin {
namespace {

using E = EvidenceClass;
using neuron::testing::EnvOf;

TEST(PolicyTest, TheDefaultTaintsTransientFaultsAndHandsPermanentOnesToTheNode) {
  const HealthPolicy p;
  EXPECT_EQ(p.ActionFor(E::kAbsence), Action::kTaint);
  EXPECT_EQ(p.ActionFor(E::kState), Action::kTaint);
  EXPECT_EQ(p.ActionFor(E::kHwErrors), Action::kNode);
  EXPECT_EQ(p.ActionFor(E::kEcc), Action::kNode);
  EXPECT_EQ(p.ActionFor(E::kComponents), Action::kNode);
  EXPECT_EQ(p.ActionFor(E::kEccCorrected), Action::kTaint);
  EXPECT_EQ(p.Counted(), EvidenceClasses::All());
}

TEST(PolicyTest, APolicyFileSetsEachClassAndTheBooleansStillMeanIgnore) {
  Config c;
  ASSERT_TRUE(ApplyConfigYaml("health:\n  policy:\n    ecc: reset\n    efa_port: ignore\n"
                              "  hw_errors: false\n  reset_tries: 5\n  check_programs: /opt/p\n",
                              "p.yaml", &c)
                  .ok());
  EXPECT_EQ(c.health.ActionFor(E::kEcc), Action::kReset);
  EXPECT_EQ(c.health.ActionFor(E::kEfaPort), Action::kIgnore);
  EXPECT_EQ(c.health.ActionFor(E::kHwErrors), Action::kIgnore);
  EXPECT_FALSE(c.health.Counted().Has(E::kHwErrors));
  EXPECT_EQ(c.health.reset_tries, 5);
  EXPECT_EQ(c.health.check_programs, "/opt/p");
}

TEST(PolicyTest, BadPoliciesAreRefusedWithTheirLine) {
  Config c;
  absl::Status s = ApplyConfigYaml("health:\n  policy:\n    ecc: reboot\n", "p.yaml", &c);
  EXPECT_EQ(s.message(),
            "p.yaml:3: health.policy.ecc: 'reboot' is not an action (ignore, taint, evict, reset "
            "or node)");
  s = ApplyConfigYaml("health:\n  policy:\n    ram: taint\n", "p.yaml", &c);
  EXPECT_NE(s.message().find("unknown key 'health.policy.ram'"), std::string::npos) << s;
  s = ApplyConfigYaml("health:\n  ecc: true\n  policy:\n    ecc: node\n", "p.yaml", &c);
  EXPECT_NE(s.message().find("health.ecc and health.policy.ecc both given"), std::string::npos)
      << s;
  s = ApplyConfigYaml("health:\n  reset_tries: 0\n", "p.yaml", &c);
  EXPECT_NE(s.message().find("not a number of tries from 1 to 10"), std::string::npos) << s;
  EXPECT_EQ(c.health.ActionFor(E::kEcc), Action::kNode) << "a refused file changes nothing";
}

TEST(PolicyTest, TaintEffectNoExecuteIsTheOlderSpellingOfEvict) {
  Flags flags;
  flags.dra_taint_effect = "NoExecute";
  const absl::StatusOr<Config> c = ResolveConfig(flags, EnvOf({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health.ActionFor(E::kAbsence), Action::kEvict);
  EXPECT_EQ(c->health.ActionFor(E::kHwErrors), Action::kNode) << "only taints become evictions";
}

DeviceHealth Unhealthy(EvidenceClasses classes) {
  return DeviceHealth{.state = HealthState::kUnhealthy,
                      .components = {},
                      .reasons = {"a fault"},
                      .classes = classes,
                      .hw_error_types = {"HBM_UNCORRECTABLE_ERROR"}};
}

TEST(PolicyTest, TheStrongestActionOfTheFaultsDecides) {
  const HealthPolicy p;
  EXPECT_EQ(StrongestAction(DeviceHealth{}, p), Action::kIgnore);
  EXPECT_EQ(StrongestAction(Unhealthy({E::kState}), p), Action::kTaint);
  EXPECT_EQ(StrongestAction(Unhealthy({E::kState, E::kEcc}), p), Action::kNode);
  DeviceHealth degraded;
  degraded.degraded_classes = {E::kEccCorrected};
  EXPECT_EQ(StrongestAction(degraded, p), Action::kTaint);
}

TEST(PolicyTest, OnlyTheNodeActionSetsTheNodeCondition) {
  HealthPolicy p;
  p.actions[E::kHwErrors] = Action::kReset;
  EXPECT_FALSE(
      JudgeNodeCondition({{2, Unhealthy({E::kHwErrors})}}, p.WithAction(Action::kNode)).problem);
  p.actions[E::kHwErrors] = Action::kNode;
  const NodeConditionVerdict c =
      JudgeNodeCondition({{2, Unhealthy({E::kHwErrors})}}, p.WithAction(Action::kNode));
  EXPECT_TRUE(c.problem);
  EXPECT_EQ(c.reason, "NeuronHasError_HBM_UNCORRECTABLE_ERROR");
}

}  // namespace
}  // namespace neuron::plugin

// The CEL subset of device selectors (core/cel/cel_subset.h): what it matches, CEL's
// error semantics, and that everything outside the subset is refused by name, never matched.
#include "core/cel/cel_subset.h"

#include <gtest/gtest.h>

namespace neuron::cel {
namespace {

DeviceView Trn1Device() {
  DeviceView d{"neuron.aws.com", {}};
  d.attributes["neuron.aws.com"] = {{"resourceType", std::string("neuron_device")},
                                    {"deviceId", int64_t{5}},
                                    {"instanceType", std::string("trn1.32xlarge")},
                                    {"neuronDriverVersion", *ParseSemver("2.24.7")}};
  d.attributes["resource.aws.com"] = {{"devicegroup4_id", std::string("g4-1")}};
  return d;
}

// The expression's verdict on Trn1Device(), or the error's message.
std::string Eval(const std::string& text) {
  absl::StatusOr<CelExpression> e = CelExpression::Compile(text);
  if (!e.ok()) return "compile: " + std::string{e.status().message()};
  absl::StatusOr<bool> m = e->Matches(Trn1Device());
  if (!m.ok()) return "eval: " + std::string{m.status().message()};
  return *m ? "true" : "false";
}

TEST(CelSubsetTest, TheDeviceClassesAndTemplatesOfTheDocsMatch) {
  EXPECT_EQ(Eval(R"(device.driver == "neuron.aws.com" &&
                    device.attributes["neuron.aws.com"].resourceType in ["neuron_device", "neuron_node"])"),
            "true");
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"]["instanceType"] == 'trn2.48xlarge')"),
            "false");
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"].deviceId >= 4 &&
                    device.attributes["neuron.aws.com"].deviceId < 8)"),
            "true");
  EXPECT_EQ(Eval(R"(!(device.attributes["neuron.aws.com"].deviceId != 5))"), "true");
  EXPECT_EQ(Eval(R"(device.attributes["resource.aws.com"].devicegroup4_id.startsWith("g4-"))"),
            "true");
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"].deviceId in [-1, 7])"), "false");
}

TEST(CelSubsetTest, VersionsCompareBySemverPrecedence) {
  EXPECT_EQ(
      Eval(
          R"(device.attributes["neuron.aws.com"].neuronDriverVersion.isGreaterThan(semver("2.23.99")))"),
      "true");
  EXPECT_EQ(
      Eval(
          R"(device.attributes["neuron.aws.com"].neuronDriverVersion.compareTo(semver("2.24.7")) == 0)"),
      "true");
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"].neuronDriverVersion.major() == 2)"),
            "true");
  EXPECT_EQ(CompareSemver(*ParseSemver("1.0.0-alpha"), *ParseSemver("1.0.0")), -1);
  EXPECT_EQ(CompareSemver(*ParseSemver("1.0.0-alpha.1"), *ParseSemver("1.0.0-alpha.beta")), -1);
  EXPECT_EQ(CompareSemver(*ParseSemver("1.0.0-rc.2"), *ParseSemver("1.0.0-rc.10")), -1);
  EXPECT_EQ(CompareSemver(*ParseSemver("1.0.0+build.1"), *ParseSemver("1.0.0")), 0);
  EXPECT_FALSE(ParseSemver("1.02.0").ok());
  EXPECT_FALSE(ParseSemver("1.2").ok());
  EXPECT_EQ(Eval(R"(semver("2.x.0").major() == 2)"),
            "eval: CEL: semver(\"2.x.0\").major() == 2: not a semantic version: \"2.x.0\"");
}

// A missing attribute or a type mismatch is an error, unless && or || is decided by its other
// side; has() asks without failing.
TEST(CelSubsetTest, ErrorsFollowCelSemantics) {
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"].model == "x")"),
            "eval: CEL: device.attributes[\"neuron.aws.com\"].model == \"x\": no such key: model");
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"].model == "x" && device.driver == "other")"),
            "false");
  EXPECT_EQ(Eval(R"(device.driver == "neuron.aws.com" || device.attributes["x"].y == 1)"), "true");
  EXPECT_EQ(Eval(R"(has(device.attributes["neuron.aws.com"].model))"), "false");
  EXPECT_EQ(Eval(R"(has(device.attributes["neuron.aws.com"].deviceId))"), "true");
  EXPECT_EQ(Eval(R"(device.attributes["neuron.aws.com"].deviceId == "5")"),
            "eval: CEL: device.attributes[\"neuron.aws.com\"].deviceId == \"5\": no such overload: "
            "int == string");
  EXPECT_EQ(Eval(R"(device.driver)"),
            "eval: CEL: device.driver: the result is a string, not a bool");
}

TEST(CelSubsetTest, WhatIsOutsideTheSubsetIsRefusedByName) {
  const std::string outside = " is outside the CEL subset";
  EXPECT_EQ(Eval("device.attributes[\"neuron.aws.com\"].deviceId + 1 == 6"),
            "compile: CEL: '+' at column 46" + outside + " (core/cel/cel_subset.h)");
  EXPECT_NE(Eval("device.driver == \"a\" ? true : false").find("'?' at column 22" + outside),
            std::string::npos);
  EXPECT_NE(Eval("device.capacity[\"neuron.aws.com\"].cores == 8")
                .find("device.capacity at column 7" + outside),
            std::string::npos);
  EXPECT_NE(Eval("device.attributes[\"a\"].m.compareTo(quantity(\"1Gi\")) >= 0")
                .find("the name 'quantity' at column 36" + outside),
            std::string::npos);
  EXPECT_NE(Eval("device.driver.matches(\"^neuron\")").find("the method matches() at column 15"),
            std::string::npos);
  EXPECT_NE(Eval("device.attributes.exists(d, true)").find("the method exists()"),
            std::string::npos);
  EXPECT_NE(Eval("size(device.driver) > 0").find("the name 'size'"), std::string::npos);
  EXPECT_NE(Eval("device.driver == 1.5").find("a double, unsigned or hex literal"),
            std::string::npos);
}

TEST(CelSubsetTest, MalformedExpressionsSayWhereTheyBreak) {
  EXPECT_EQ(Eval("device.driver == \"neuron"), "compile: CEL: an unterminated string at column 18");
  EXPECT_EQ(Eval("device.driver == \"a\" \"b\""), "compile: CEL: unexpected 'b' at column 22");
  EXPECT_EQ(Eval("(device.driver == \"a\""), "compile: CEL: expected ')' at column 22");
  EXPECT_EQ(Eval("has(device)"),
            "compile: CEL: has() takes a field selection, e.g. has(x.name) at column 1");
}

Data Str(std::string s) { return Data{.type = Data::Type::kString, .s = std::move(s)}; }

// An admission request as a ValidatingAdmissionPolicy sees it: who asks (a service account
// whose token is bound to node-a) and the Node it writes.
Variables AdmissionOf(const std::string& node) {
  Data extra{.type = Data::Type::kMap};
  extra.map["authentication.kubernetes.io/node-name"] = {.type = Data::Type::kList,
                                                         .list = {Str("node-a")}};
  Data user{.type = Data::Type::kMap};
  user.map["username"] = Str("system:serviceaccount:neuron-system:neuron-dra-api");
  user.map["extra"] = std::move(extra);
  Data request{.type = Data::Type::kMap};
  request.map["userInfo"] = std::move(user);
  request.map["dryRun"] = {.type = Data::Type::kBool, .b = false};
  Data metadata{.type = Data::Type::kMap};
  metadata.map["name"] = Str(node);
  metadata.map["deletionTimestamp"] = {};  // null
  Data object{.type = Data::Type::kMap};
  object.map["metadata"] = std::move(metadata);
  return {{"request", std::move(request)}, {"object", std::move(object)}};
}

// The verdict of `text` over AdmissionOf(node), or the error's message.
std::string EvalOver(const std::string& text, const std::string& node = "node-a") {
  absl::StatusOr<CelExpression> e = CelExpression::CompileOver(text, {"request", "object"});
  if (!e.ok()) return "compile: " + std::string{e.status().message()};
  absl::StatusOr<bool> m = e->Evaluate(AdmissionOf(node));
  if (!m.ok()) return "eval: " + std::string{m.status().message()};
  return *m ? "true" : "false";
}

// What the API stand-in evaluates of the shipped ValidatingAdmissionPolicy: fields by name,
// map keys by index and by `in`, list items by int index, with CEL's errors for what is missing.
TEST(CelSubsetTest, VariablesOfDataAsAnAdmissionPolicyReadsThem) {
  const std::string bound = "request.userInfo.extra['authentication.kubernetes.io/node-name']";
  EXPECT_EQ(EvalOver(bound + "[0] == object.metadata.name"), "true");
  EXPECT_EQ(EvalOver(bound + "[0] == object.metadata.name", "node-b"), "false");
  EXPECT_EQ(EvalOver("'authentication.kubernetes.io/node-name' in request.userInfo.extra"), "true");
  EXPECT_EQ(EvalOver("'x' in request.userInfo.extra || request.userInfo.username.endsWith("
                     "':neuron-dra-api')"),
            "true");
  EXPECT_EQ(EvalOver("has(request.userInfo.extra) && !has(object.spec)"), "true");
  EXPECT_EQ(EvalOver("request.dryRun == false && object.metadata.deletionTimestamp == "
                     "object.metadata.deletionTimestamp"),
            "true");
  EXPECT_EQ(EvalOver(bound + "[1] == 'node-a'"),
            "eval: CEL: " + bound + "[1] == 'node-a': index out of bounds: 1");
  EXPECT_EQ(EvalOver("request.userInfo.extra['other'][0] == 'a'"),
            "eval: CEL: request.userInfo.extra['other'][0] == 'a': no such key: other");
  // An error on one side of || is absorbed when the other side decides.
  EXPECT_EQ(EvalOver("request.userInfo.extra['other'][0] == 'a' || true"), "true");
  EXPECT_EQ(EvalOver("object.metadata.deletionTimestamp == 'x'"),
            "eval: CEL: object.metadata.deletionTimestamp == 'x': no such overload: null_type == "
            "string");
  // Names are the variables given, nothing else: `device` is no variable here, and a device
  // selector knows no `request`.
  EXPECT_NE(EvalOver("device.driver == 'x'").find("the name 'device'"), std::string::npos);
  EXPECT_NE(Eval("request.dryRun == false").find("the name 'request'"), std::string::npos);
}

}  // namespace
}  // namespace neuron::cel

// The ctl protocol (request lines, replies) and the faults.json codec, in process. The daemon
// behind them is tested through the real binary in sim_daemon_test.cc.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/driver/health_counters.h"
#include "driver-sim/driver/ctl.h"
#include "driver-sim/driver/faults.h"

namespace neuron::sim {
namespace {

using ::testing::HasSubstr;

TEST(CtlProtocol, RequestLinesRoundTrip) {
  for (const std::vector<std::string>& words : std::vector<std::vector<std::string>>{
           {"status"},
           {"unplug", "--device", "3"},
           {"plug", "--device=15"},
           {"inject", "hbm-ue", "--device", "0", "--core", "1"},
           {"inject", "hang", "--core", "3", "--device", "2"},
           {"reset", "--fail", "--device", "4"},
           {"link-down", "--device", "0", "--peer", "12"},
           {"efa-down", "--efa", "rdmap16s25"},
           {"clear-fault", "--id", "7"},
           {"inject", "hbm-ce", "--device", "1", "--count", "5"},
           {"inject", "sram-ue", "--count", "2", "--device", "0", "--core", "1"},
           {"heartbeat", "stall", "--device", "3"},
           {"heartbeat", "resume", "--device=3"},
           {"component", "set", "link_efa,hbm", "--device", "2"},
           {"component", "clear", "--device", "2"},
       }) {
    absl::StatusOr<CtlRequest> req = ParseCtlArgs(words);
    ASSERT_TRUE(req.ok()) << req.status() << " " << ::testing::PrintToString(words);
    absl::StatusOr<CtlRequest> again = ParseCtlLine(FormatCtlRequest(*req));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *req);
  }
  absl::StatusOr<CtlRequest> r = ParseCtlLine("inject sram-ue --device 2 --core 1\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fault, FaultKind::kSramUe);
  EXPECT_EQ(r->device, 2);
  EXPECT_EQ(r->core, 1);
  // The components as the file lists them: the vocabulary's order, whatever the order typed.
  r = ParseCtlLine("component set link_efa,hbm --device 2");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->components.Join(), "hbm,link_efa");
  EXPECT_EQ(FormatCtlRequest(*r), "component set hbm,link_efa --device 2");
  r = ParseCtlLine("inject sram-ce --device 4");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->corrected, CorrectedEcc::kSram);
  EXPECT_FALSE(r->fault.has_value());
  EXPECT_FALSE(r->count.has_value());  // the daemon counts 1
}

// The words of a verb's usage line with every optional part given: "[--core C]" as "--core 1",
// "hbm-ue|sram-ue" as "hbm-ue", a metavar (N, NAME, TEXT...) as "1", but LIST (of health
// components) as "hbm,sram".
std::vector<std::string> UsageWords(std::string_view usage) {
  std::vector<std::string> words;
  std::istringstream in{std::string(usage)};
  for (std::string w; in >> w;) {
    std::erase_if(w, [](char c) { return c == '[' || c == ']'; });
    if (w.empty()) continue;
    w = w.substr(0, w.find('|'));
    const bool metavar = !w.starts_with("-") && std::none_of(w.begin(), w.end(), ::islower);
    if (!metavar) {
      words.push_back(w);
    } else if (w == "LIST") {
      words.emplace_back("hbm,sram");
    } else if (w == "COUNTER") {  // raise's: any row of core/driver/health_counters.h
      words.emplace_back(kHealthCounters.front().name);
    } else {
      words.emplace_back("1");
    }
  }
  return words;
}

// Every row of the daemon's table, so a new verb is covered without a test of its own here: its
// usage line names every option it takes and parses as that verb, round-tripping.
TEST(CtlProtocol, EveryVerbsUsageLineParsesAsTheVerbAndRoundTrips) {
  ASSERT_GE(CtlVerbs().size(), 10u);
  for (const CtlVerb& verb : CtlVerbs()) {
    SCOPED_TRACE(std::string(verb.usage));
    EXPECT_EQ(FindCtlVerb(verb.name), &verb);
    EXPECT_THAT(std::string(CtlUsage()), HasSubstr("  " + std::string(verb.usage) + "\n"));
    const CtlArgs& a = verb.args;
    for (const auto& [arg, flag] :
         std::vector<std::pair<CtlArg, std::string>>{{a.device, "--device"},
                                                     {a.core, "--core"},
                                                     {a.peer, "--peer"},
                                                     {a.fail, "--fail"},
                                                     {a.efa, "--efa"},
                                                     {a.id, "--id"},
                                                     {a.level, "--level"},
                                                     {a.count, "--count"},
                                                     {a.text, "-- "}}) {
      EXPECT_EQ(arg != CtlArg::kNo, verb.usage.find(flag) != std::string_view::npos) << flag;
    }
    absl::StatusOr<CtlRequest> req = ParseCtlArgs(UsageWords(verb.usage));
    ASSERT_TRUE(req.ok()) << req.status();
    EXPECT_EQ(req->command, verb.name);
    absl::StatusOr<CtlRequest> again = ParseCtlLine(FormatCtlRequest(*req));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *req);
  }
}

TEST(CtlProtocol, UsageErrorsNameTheWord) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"frobnicate"}, "frobnicate"},
      {{"inject", "nope", "--device", "1"}, "nope"},
      {{"inject", "link-down", "--device", "1"}, "link-down"},
      {{"unplug", "--device", "-1"}, "-1"},
      {{"unplug", "--device", "1", "--device", "2"}, "--device given twice"},
      {{"status", "--device", "1"}, "--device"},
      {{"reset", "--device", "1", "--fail=yes"}, "--fail"},
      {{"efa-down"}, "--efa"},
      {{"unplug", "3"}, "'3'"},
      {{"inject", "nan", "--device", "1", "--count", "2"}, "--count applies to hbm-ue"},
      {{"inject", "hbm-ce", "--device", "1", "--count", "0"}, "from 1 to 1000000, not '0'"},
      {{"inject", "hbm-ce", "--device", "1", "--core", "0"}, "--core does not apply"},
      {{"heartbeat", "--device", "1"}, "heartbeat takes stall or resume first"},
      {{"heartbeat", "pause", "--device", "1"}, "'pause'"},
      {{"component", "set", "--device", "1"}, "comma list of components: hbm, sram"},
      {{"component", "set", "hbm,gpu", "--device", "1"}, "unknown component 'gpu'"},
      {{"component", "set", ",", "--device", "1"}, "at least one component"},
      {{"component", "clear", "hbm", "--device", "1"}, "unexpected argument 'hbm'"},
      {{"component", "set", "hbm"}, "component needs --device N"},
  };
  for (const auto& [words, needle] : cases) {
    absl::StatusOr<CtlRequest> req = ParseCtlArgs(words);
    ASSERT_FALSE(req.ok()) << ::testing::PrintToString(words);
    EXPECT_TRUE(absl::IsInvalidArgument(req.status()));
    EXPECT_THAT(std::string{req.status().message()}, HasSubstr(needle));
  }
}

TEST(CtlProtocol, RepliesRoundTripAndMapToExitCodes) {
  const CtlReply ok{CtlOutcome::kOk, "", "line 1\nline 2\n"};
  EXPECT_EQ(FormatCtlReply(ok), "ok\nline 1\nline 2\n");
  const CtlReply err{CtlOutcome::kError, "unknown device 99: x", ""};
  EXPECT_EQ(FormatCtlReply(err), "error: unknown device 99: x\n");
  for (const CtlReply& r : {ok, err, CtlReply{CtlOutcome::kUsage, "bad", "usage text\n"}}) {
    absl::StatusOr<CtlReply> back = ParseCtlReply(FormatCtlReply(r));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, r);
  }
  EXPECT_FALSE(ParseCtlReply("hello\n").ok());
  EXPECT_EQ(CtlExitCode(CtlOutcome::kOk), 0);
  EXPECT_EQ(CtlExitCode(CtlOutcome::kError), 1);
  EXPECT_EQ(CtlExitCode(CtlOutcome::kUsage), 2);
}

TEST(FaultsJson, RoundTripsAndRejectsBadInput) {
  const std::vector<PendingFault> faults{
      {1, FaultKind::kHbmUe, 3, 1, std::nullopt, 1735689600123},
      {2, FaultKind::kNan, 0, std::nullopt, std::nullopt, 1735689600200},
      {5, FaultKind::kLinkDown, 0, std::nullopt, 12, 1735689601000},
  };
  const std::string json = FaultsToJson(faults);
  absl::StatusOr<std::vector<PendingFault>> back = ParseFaults(json, "faults.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, faults);
  // The documented field names, checked without our parser.
  const nlohmann::json doc = nlohmann::json::parse(json);
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["faults"][0]["kind"], "hbm-ue");
  EXPECT_EQ(doc["faults"][2]["kind"], "link-down");
  EXPECT_EQ(doc["faults"][2]["peer"], 12);

  for (const std::string& bad :
       {std::string("{"), std::string("[]"), std::string(R"({"version":2,"faults":[]})"),
        std::string(R"({"version":1,"faults":[{"id":1,"kind":"zap","device":0}]})"),
        std::string(R"({"version":1,"faults":[{"id":1,"kind":"link-down","device":0}]})")}) {
    absl::StatusOr<std::vector<PendingFault>> r = ParseFaults(bad, "/x/faults.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string{r.status().message()}, HasSubstr("/x/faults.json"));
  }
}

}  // namespace
}  // namespace neuron::sim

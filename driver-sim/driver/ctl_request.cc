// The `neuron-sim ctl` request grammar (ctl.h): the verbs' table looked up, a request's words
// parsed and formatted. The client and the daemon both parse with it; the socket's two ends are
// in ctl.cc.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "core/base/text.h"
#include "core/driver/counters.h"
#include "driver-sim/driver/ctl.h"

namespace neuron::sim {
namespace {

bool Takes(CtlArg a) { return a != CtlArg::kNo; }

absl::Status Usage(const std::string& message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<uint64_t> ParseNumber(std::string_view option, std::string_view text, uint64_t max) {
  uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v > max) {
    return Usage(fmt::format("{} takes a number from 0 to {}, not '{}'", option, max, text));
  }
  return v;
}

// `words` are the words before printk's "--" (all of them for other commands); `text` is what
// follows it, or nullopt when there was no "--".
absl::StatusOr<CtlRequest> ParseWords(const std::vector<std::string>& words,
                                      std::optional<std::string> text);

}  // namespace

absl::Status CheckPrintkText(std::string_view text) {
  if (text.empty()) return Usage("printk needs text after --");
  if (text.size() > kPrintkMaxText) {
    return Usage(fmt::format("printk text is {} bytes; the driver takes at most {}", text.size(),
                             kPrintkMaxText));
  }
  if (text.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos) {
    return Usage("printk text cannot hold a newline, carriage return or NUL");
  }
  return absl::OkStatus();
}

std::string_view CorrectedEccName(CorrectedEcc kind) {
  return kind == CorrectedEcc::kHbm ? "hbm-ce" : "sram-ce";
}

std::string_view CorrectedEccCounter(CorrectedEcc kind) {
  return Name(kind == CorrectedEcc::kHbm ? EccCorrectedCounter::mem_ecc_corrected
                                         : EccCorrectedCounter::sram_ecc_corrected);
}

const CtlVerb* FindCtlVerb(std::string_view name) {
  for (const CtlVerb& v : CtlVerbs()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

std::string_view CtlUsage() {
  static const std::string usage = [] {
    std::string text = "commands:\n";
    for (const CtlVerb& v : CtlVerbs()) text += fmt::format("  {}\n", v.usage);
    return text;
  }();
  return usage;
}

namespace {

// The verb `name` takes printk's text after "--".
bool TakesText(std::string_view name) {
  const CtlVerb* verb = FindCtlVerb(name);
  return verb != nullptr && Takes(verb->args.text);
}

}  // namespace

absl::StatusOr<CtlRequest> ParseCtlArgs(const std::vector<std::string>& words) {
  const auto sep = std::find(words.begin(), words.end(), "--");
  if (sep == words.end() || words.empty() || !TakesText(words[0])) {
    return ParseWords(words, std::nullopt);
  }
  return ParseWords(std::vector<std::string>(words.begin(), sep),
                    fmt::format("{}", fmt::join(sep + 1, words.end(), " ")));
}

namespace {

constexpr std::array<CorrectedEcc, 2> kCorrectedKinds{CorrectedEcc::kHbm, CorrectedEcc::kSram};
constexpr std::string_view kInjectKinds =
    "hbm-ue, sram-ue, hbm-ce, sram-ce, nan, dma-abort, hang or sdc";

// inject's word, a runtime fault or corrected ECC errors, into `req`.
absl::Status ParseInjectKind(const std::vector<std::string>& words, CtlRequest* req) {
  if (words.size() < 2 || words[1].starts_with("-")) {
    return Usage(fmt::format("{} needs a fault: {}", words[0], kInjectKinds));
  }
  for (CorrectedEcc c : kCorrectedKinds) {
    if (words[1] == CorrectedEccName(c)) {
      req->corrected = c;
      return absl::OkStatus();
    }
  }
  const std::optional<FaultKind> kind = ParseFaultKind(words[1]);
  if (!kind || *kind == FaultKind::kLinkDown) {
    return Usage(fmt::format("unknown fault '{}'; {} takes {}", words[1], words[0], kInjectKinds));
  }
  req->fault = kind;
  return absl::OkStatus();
}

// component set's list: words of kHealthComponentNames only, at least one.
absl::Status ParseComponentList(std::string_view text, HealthComponents* out) {
  const ParsedComponents parsed = ParseHealthComponents(text);
  if (!parsed.unknown.empty()) {
    return Usage(fmt::format("unknown component '{}'; known: {}", parsed.unknown.front(),
                             fmt::join(kHealthComponentNames, ", ")));
  }
  if (parsed.known.empty()) {
    return Usage("component set needs at least one component (component clear empties the list)");
  }
  *out = parsed.known;
  return absl::OkStatus();
}

// The verb's action word (one of its `actions`) and, after `set` for a verb that takes
// components, their list, into `req`: the index of the first option.
absl::StatusOr<size_t> ParseAction(const CtlVerb& verb, const std::vector<std::string>& words,
                                   CtlRequest* req) {
  const std::vector<std::string_view> actions = Split(verb.actions, '|');
  if (words.size() < 2 || std::find(actions.begin(), actions.end(), words[1]) == actions.end()) {
    return Usage(fmt::format("{} takes {} first, not {}: {}", verb.name, fmt::join(actions, " or "),
                             words.size() < 2 ? "nothing" : "'" + words[1] + "'", verb.usage));
  }
  req->action = words[1];
  if (!Takes(verb.args.components) || req->action != "set") return 2;
  if (words.size() < 3 || words[2].starts_with("-")) {
    return Usage(fmt::format("{} set needs a comma list of components: {}", verb.name,
                             fmt::join(kHealthComponentNames, ", ")));
  }
  if (absl::Status s = ParseComponentList(words[2], &req->components); !s.ok()) return s;
  return 3;
}

// The verb word and, for inject, its fault kind, for the others their action, into `req`: the
// index of the first option.
absl::StatusOr<size_t> ParseCommand(const std::vector<std::string>& words, CtlRequest* req) {
  if (words.empty()) return Usage("missing command");
  const CtlVerb* verb = FindCtlVerb(words[0]);
  if (verb == nullptr) return Usage(fmt::format("unknown command '{}'", words[0]));
  req->command = words[0];
  if (Takes(verb->args.action)) return ParseAction(*verb, words, req);
  if (!Takes(verb->args.fault)) return 1;
  if (absl::Status s = ParseInjectKind(words, req); !s.ok()) return s;
  return 2;
}

// The value of option `name`: `inline_value` ("--opt=value"), else the next word, which moves *i
// past it.
absl::StatusOr<std::string> TakeValue(const std::vector<std::string>& words, size_t* i,
                                      const std::string& name,
                                      const std::optional<std::string>& inline_value) {
  if (inline_value) return *inline_value;
  if (*i + 1 >= words.size() || words[*i + 1].starts_with("--")) {
    return Usage(fmt::format("{} needs a value", name));
  }
  return words[++*i];
}

// One option word, words[*i] ("--opt", "--opt=value" or "--opt" then its value), into `req`, if
// the command takes it.
absl::Status ParseOption(const std::vector<std::string>& words, size_t* i, CtlRequest* req) {
  constexpr uint64_t kMaxIndex = 1 << 20;
  constexpr uint64_t kMaxCount = 1000000;
  const std::string_view cmd_name = req->command;
  const CtlArgs& allowed = FindCtlVerb(req->command)->args;
  const std::string& word = words[*i];
  if (!word.starts_with("--")) {
    return Usage(fmt::format("unexpected argument '{}' for {}", word, cmd_name));
  }
  std::string name = word;
  std::optional<std::string> value;
  if (const size_t eq = word.find('='); eq != std::string::npos) {
    name = word.substr(0, eq);
    value = word.substr(eq + 1);
  }
  auto take_value = [&] { return TakeValue(words, i, name, value); };
  auto reject_repeat = [&](bool seen) -> absl::Status {
    if (seen) return Usage(fmt::format("{} given twice", name));
    return absl::OkStatus();
  };
  // A numeric option once, parsed within `limit`, into the request field it names.
  auto take_number = [&]<typename T>(std::optional<T>* field, uint64_t limit) -> absl::Status {
    if (absl::Status s = reject_repeat(field->has_value()); !s.ok()) return s;
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    absl::StatusOr<uint64_t> n = ParseNumber(name, *v, limit);
    if (!n.ok()) return n.status();
    *field = static_cast<T>(*n);
    return absl::OkStatus();
  };
  if (name == "--device" && Takes(allowed.device)) return take_number(&req->device, kMaxIndex);
  if (name == "--core" && Takes(allowed.core)) return take_number(&req->core, kMaxIndex);
  if (name == "--peer" && Takes(allowed.peer)) return take_number(&req->peer, kMaxIndex);
  if (name == "--id" && Takes(allowed.id)) return take_number(&req->fault_id, UINT64_MAX);
  if (name == "--efa" && Takes(allowed.efa)) {
    if (absl::Status s = reject_repeat(!req->efa.empty()); !s.ok()) return s;
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    if (v->empty()) return Usage("--efa needs a name");
    req->efa = *v;
    return absl::OkStatus();
  }
  if (name == "--count" && Takes(allowed.count)) return take_number(&req->count, kMaxCount);
  if (name == "--level" && Takes(allowed.level)) {
    absl::StatusOr<std::string> v = take_value();
    if (!v.ok()) return v.status();
    absl::StatusOr<uint64_t> n = ParseNumber(name, *v, 7);
    if (!n.ok()) return n.status();
    req->level = static_cast<int>(*n);
    return absl::OkStatus();
  }
  if (name == "--fail" && Takes(allowed.fail)) {
    if (value) return Usage("--fail takes no value");
    if (absl::Status s = reject_repeat(req->fail); !s.ok()) return s;
    req->fail = true;
    return absl::OkStatus();
  }
  return Usage(fmt::format("{} does not take {}", cmd_name, name));
}

// A count is at least 1. What inject's kinds take: a count for ECC errors only, a core for runtime
// faults only (the driver counts corrected errors per device; no execution sees them).
absl::Status CheckInjectOptions(const CtlRequest& req) {
  if (req.count == 0u) return Usage("--count takes a number from 1 to 1000000, not '0'");
  if (req.command != "inject") return absl::OkStatus();  // raise: a count is all it takes
  const bool ecc =
      req.corrected || req.fault == FaultKind::kHbmUe || req.fault == FaultKind::kSramUe;
  if (req.count && !ecc) {
    return Usage(fmt::format("--count applies to hbm-ue, sram-ue, hbm-ce and sram-ce, not {}",
                             req.fault ? FaultKindName(*req.fault) : req.command));
  }
  if (req.core && req.corrected) {
    return Usage(fmt::format(
        "{} counts corrected errors per device, which no execution sees: --core does not apply",
        CorrectedEccName(*req.corrected)));
  }
  return absl::OkStatus();
}

// The options the verb requires, and printk's text.
absl::Status CheckComplete(std::optional<std::string> text, CtlRequest* req) {
  const CtlVerb& verb = *FindCtlVerb(req->command);
  const CtlArgs& args = verb.args;
  const auto missing = [&](CtlArg a, bool given) { return a == CtlArg::kRequired && !given; };
  if (missing(args.device, req->device.has_value())) {
    return Usage(fmt::format("{} needs --device N", verb.name));
  }
  if (missing(args.peer, req->peer.has_value())) {
    return Usage(fmt::format("{} needs --peer B", verb.name));
  }
  if (missing(args.efa, !req->efa.empty())) {
    return Usage(fmt::format("{} needs --efa NAME", verb.name));
  }
  if (missing(args.id, req->fault_id.has_value())) {
    return Usage(fmt::format("{} needs --id ID", verb.name));
  }
  if (absl::Status s = CheckInjectOptions(*req); !s.ok()) return s;
  if (Takes(args.text)) {
    if (!text) {
      return Usage(fmt::format("{} needs -- before its text: {}", verb.name, verb.usage));
    }
    if (absl::Status s = CheckPrintkText(*text); !s.ok()) return s;
    req->text = std::move(*text);
  }
  return absl::OkStatus();
}

absl::StatusOr<CtlRequest> ParseWords(const std::vector<std::string>& words,
                                      std::optional<std::string> text) {
  CtlRequest req;
  absl::StatusOr<size_t> first_option = ParseCommand(words, &req);
  if (!first_option.ok()) return first_option.status();
  for (size_t i = *first_option; i < words.size(); ++i) {
    if (absl::Status s = ParseOption(words, &i, &req); !s.ok()) return s;
  }
  if (absl::Status s = CheckComplete(std::move(text), &req); !s.ok()) return s;
  return req;
}

}  // namespace

std::string FormatCtlRequest(const CtlRequest& req) {
  std::string line = req.command;
  if (req.fault) line += fmt::format(" {}", FaultKindName(*req.fault));
  if (req.corrected) line += fmt::format(" {}", CorrectedEccName(*req.corrected));
  if (!req.action.empty()) line += fmt::format(" {}", req.action);
  if (!req.components.empty()) line += fmt::format(" {}", req.components.Join());
  if (req.device) line += fmt::format(" --device {}", *req.device);
  if (req.core) line += fmt::format(" --core {}", *req.core);
  if (req.peer) line += fmt::format(" --peer {}", *req.peer);
  if (req.fail) line += " --fail";
  if (!req.efa.empty()) line += fmt::format(" --efa {}", req.efa);
  if (req.fault_id) line += fmt::format(" --id {}", *req.fault_id);
  if (req.count) line += fmt::format(" --count {}", *req.count);
  if (TakesText(req.command)) line += fmt::format(" --level {} -- {}", req.level, req.text);
  return line;
}

absl::StatusOr<CtlRequest> ParseCtlLine(std::string_view line) {
  std::vector<std::string> words;
  size_t pos = 0;
  while (pos < line.size()) {
    const size_t start = line.find_first_not_of(" \t\r\n", pos);
    if (start == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t\r\n", start);
    if (end == std::string_view::npos) end = line.size();
    words.emplace_back(line.substr(start, end - start));
    pos = end;
    // printk's text is the rest of the line after "-- ", verbatim (a CRLF client's '\r' aside).
    if (words.size() > 1 && words.back() == "--" && TakesText(words.front())) {
      words.pop_back();
      std::string_view text = end < line.size() ? line.substr(end + 1) : std::string_view();
      if (text.ends_with('\r')) text.remove_suffix(1);
      return ParseWords(words, std::string(text));
    }
  }
  return ParseCtlArgs(words);
}

}  // namespace neuron::sim

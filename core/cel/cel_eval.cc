// The CEL subset's evaluator and its compile-time check (cel_subset.h): values, CEL's error
// semantics for && and ||, and the few functions the subset has.
#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "core/base/text.h"
#include "core/cel/cel_subset.h"
#include "core/cel/internal/cel_node.h"

namespace neuron::cel {

namespace {

// A whole decimal number, digits only.
bool ToInt(std::string_view s, int64_t* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

int CompareSemver(const Semver& a, const Semver& b) {
  for (auto [x, y] : std::array{std::pair{a.major, b.major}, std::pair{a.minor, b.minor},
                                std::pair{a.patch, b.patch}}) {
    if (x != y) return x < y ? -1 : 1;
  }
  // A pre-release sorts before its release; otherwise compare dot-separated identifiers:
  // numeric ones numerically and below alphanumeric ones, shorter lists first (semver.org 11).
  if (a.prerelease == b.prerelease) return 0;
  if (a.prerelease.empty()) return 1;
  if (b.prerelease.empty()) return -1;
  const std::vector<std::string_view> pa = Split(a.prerelease, '.');
  const std::vector<std::string_view> pb = Split(b.prerelease, '.');
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    int64_t na = 0, nb = 0;
    const bool numeric_a = ToInt(pa[i], &na), numeric_b = ToInt(pb[i], &nb);
    if (numeric_a && numeric_b && na != nb) return na < nb ? -1 : 1;
    if (numeric_a != numeric_b) return numeric_a ? -1 : 1;
    if (!numeric_a && pa[i] != pb[i]) return pa[i] < pb[i] ? -1 : 1;
  }
  return pa.size() == pb.size() ? 0 : (pa.size() < pb.size() ? -1 : 1);
}

absl::StatusOr<Semver> ParseSemver(std::string_view text) {
  const std::string_view core_and_pre = text.substr(0, text.find('+'));
  const size_t dash = core_and_pre.find('-');
  Semver v;
  if (dash != std::string_view::npos) v.prerelease = std::string(core_and_pre.substr(dash + 1));
  const std::vector<std::string_view> parts = Split(core_and_pre.substr(0, dash), '.');
  if (parts.size() != 3 || (dash != std::string_view::npos && v.prerelease.empty())) {
    return absl::InvalidArgumentError(Cat("not a semantic version: \"", text, "\""));
  }
  int64_t* fields[] = {&v.major, &v.minor, &v.patch};
  for (size_t i = 0; i < 3; ++i) {
    const bool leading_zero = parts[i].size() > 1 && parts[i][0] == '0';
    if (leading_zero || !ToInt(parts[i], fields[i])) {
      return absl::InvalidArgumentError(Cat("not a semantic version: \"", text, "\""));
    }
  }
  return v;
}

namespace {

using Node = CelExpression::Node;
using Domain = std::map<std::string, AttributeValue, std::less<>>;

// A value during evaluation. Errors are values, as in CEL, so that && and || can absorb them.
struct Value {
  enum Kind {
    kError,
    kBool,
    kInt,
    kString,
    kVersion,
    kList,
    kDevice,
    kAttributes,
    kDomain,
    kNull,
    kMap
  };
  Kind kind = kError;
  bool b = false;
  int64_t i = 0;
  std::string s;  // a string, or the error's message
  Semver v;
  std::vector<Value> list;
  const DeviceView* device = nullptr;
  const Domain* domain = nullptr;
  const Data* map = nullptr;  // kMap: a map of a variable's data
};

// What an expression is evaluated against: a device (Matches) or variables (Evaluate).
struct Env {
  const DeviceView* device = nullptr;
  const Variables* variables = nullptr;
};

Value Of(Value::Kind kind) {
  Value v;
  v.kind = kind;
  return v;
}
Value Error(std::string message) {
  Value v = Of(Value::kError);
  v.s = std::move(message);
  return v;
}
Value Bool(bool b) {
  Value v = Of(Value::kBool);
  v.b = b;
  return v;
}
Value Int(int64_t i) {
  Value v = Of(Value::kInt);
  v.i = i;
  return v;
}
Value String(std::string s) {
  Value v = Of(Value::kString);
  v.s = std::move(s);
  return v;
}
Value Version(Semver semver) {
  Value v = Of(Value::kVersion);
  v.v = std::move(semver);
  return v;
}

Value FromAttribute(const AttributeValue& a) {
  return std::visit(
      [](const auto& x) -> Value {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return Bool(x);
        if constexpr (std::is_same_v<T, int64_t>) return Int(x);
        if constexpr (std::is_same_v<T, std::string>) return String(x);
        if constexpr (std::is_same_v<T, Semver>) return Version(x);
      },
      a);
}

std::string_view KindName(Value::Kind k) {
  static constexpr std::string_view kNames[] = {"error",   "bool",      "int",    "string",
                                                "version", "list",      "device", "attributes",
                                                "map",     "null_type", "map"};
  return kNames[k];
}

// A variable's data as a value: maps stay where they are (looked up by key when selected).
Value FromData(const Data& d) {
  switch (d.type) {
    case Data::Type::kNull:
      return Of(Value::kNull);
    case Data::Type::kBool:
      return Bool(d.b);
    case Data::Type::kInt:
      return Int(d.i);
    case Data::Type::kString:
      return String(d.s);
    case Data::Type::kList: {
      Value list = Of(Value::kList);
      for (const Data& item : d.list) list.list.push_back(FromData(item));
      return list;
    }
    case Data::Type::kMap: {
      Value v = Of(Value::kMap);
      v.map = &d;
      return v;
    }
  }
  return Error("unreachable");
}

Value Evaluate(const Node& n, const Env& env);

// The value a field selection or index yields on a device, its attribute root or a domain.
Value Lookup(const Value& target, const std::string& key, bool* found = nullptr) {
  if (target.kind == Value::kError) return target;
  if (target.kind == Value::kDevice) {
    if (key == "driver") return String(target.device->driver);
    if (key == "attributes") {
      Value v = Of(Value::kAttributes);
      v.device = target.device;
      return v;
    }
    return Error(Cat("no such key: ", key));
  }
  if (target.kind == Value::kAttributes) {
    static const Domain kEmpty;
    const auto it = target.device->attributes.find(key);
    Value v = Of(Value::kDomain);
    v.domain = it == target.device->attributes.end() ? &kEmpty : &it->second;
    return v;
  }
  if (target.kind == Value::kDomain) {
    const auto it = target.domain->find(key);
    if (found != nullptr) *found = it != target.domain->end();
    if (it == target.domain->end()) return Error(Cat("no such key: ", key));
    return FromAttribute(it->second);
  }
  if (target.kind == Value::kMap) {
    const auto it = target.map->map.find(key);
    if (it == target.map->map.end()) return Error(Cat("no such key: ", key));
    return FromData(it->second);
  }
  return Error(Cat("no field '", key, "' on a ", KindName(target.kind)));
}

bool Equal(const Value& a, const Value& b) {
  switch (a.kind) {
    case Value::kBool:
      return a.b == b.b;
    case Value::kInt:
      return a.i == b.i;
    case Value::kString:
      return a.s == b.s;
    case Value::kVersion:
      return CompareSemver(a.v, b.v) == 0;
    case Value::kNull:
      return true;
    default:
      return false;
  }
}

Value Compare(const std::string& op, const Value& a, const Value& b) {
  if (a.kind == Value::kError) return a;
  if (b.kind == Value::kError) return b;
  const bool scalar = a.kind >= Value::kBool && a.kind <= Value::kVersion;
  const bool equality = op == "==" || op == "!=";
  // CEL compares null with null; a field of the data that is null with anything else is an
  // overload error, as a type mismatch is.
  if (a.kind != b.kind || !(scalar || (equality && a.kind == Value::kNull))) {
    return Error(Cat("no such overload: ", KindName(a.kind), " ", op, " ", KindName(b.kind)));
  }
  if (op == "==") return Bool(Equal(a, b));
  if (op == "!=") return Bool(!Equal(a, b));
  if (a.kind != Value::kInt && a.kind != Value::kString) {
    return Error(Cat("no such overload: ", KindName(a.kind), " ", op));
  }
  const int c = a.kind == Value::kInt ? (a.i < b.i ? -1 : a.i > b.i) : a.s.compare(b.s);
  if (op == "<") return Bool(c < 0);
  if (op == "<=") return Bool(c <= 0);
  if (op == ">") return Bool(c > 0);
  return Bool(c >= 0);
}

Value Method(const Node& n, const Env& env) {
  Value target = Evaluate(*n.children[0], env);
  if (target.kind == Value::kError) return target;
  std::vector<Value> args;
  for (size_t k = 1; k < n.children.size(); ++k) {
    args.push_back(Evaluate(*n.children[k], env));
    if (args.back().kind == Value::kError) return args.back();
  }
  const std::string& m = n.name;
  if (target.kind == Value::kVersion) {
    if (m == "major" || m == "minor" || m == "patch") {
      return Int(m == "major" ? target.v.major : m == "minor" ? target.v.minor : target.v.patch);
    }
    if (args.size() == 1 && args[0].kind == Value::kVersion) {
      const int c = CompareSemver(target.v, args[0].v);
      if (m == "compareTo") return Int(c);
      if (m == "isGreaterThan") return Bool(c > 0);
      if (m == "isLessThan") return Bool(c < 0);
    }
  }
  if (target.kind == Value::kString && args.size() == 1 && args[0].kind == Value::kString) {
    if (m == "startsWith") return Bool(target.s.starts_with(args[0].s));
    if (m == "endsWith") return Bool(target.s.ends_with(args[0].s));
    if (m == "contains") return Bool(target.s.find(args[0].s) != std::string::npos);
  }
  return Error(Cat("no such overload: ", KindName(target.kind), ".", m, "()"));
}

// && and ||: CEL's commutative logic, where a decided side absorbs an error on the other.
Value Logic(const Node& n, const Env& env) {
  const bool is_and = n.kind == Node::kAnd;
  Value a = Evaluate(*n.children[0], env);
  Value b = Evaluate(*n.children[1], env);
  for (const Value* v : {&a, &b}) {
    if (v->kind == Value::kBool && v->b != is_and) return Bool(!is_and);
  }
  for (const Value* v : {&a, &b}) {
    if (v->kind == Value::kError) return *v;
    if (v->kind != Value::kBool) {
      return Error(Cat("no such overload: ", KindName(v->kind), " ", n.name));
    }
  }
  return Bool(is_and);
}

Value In(const Node& n, const Env& env) {
  Value item = Evaluate(*n.children[0], env);
  Value list = Evaluate(*n.children[1], env);
  if (item.kind == Value::kError) return item;
  if (list.kind == Value::kError) return list;
  if (list.kind == Value::kMap) {  // a map's keys
    if (item.kind != Value::kString) {
      return Error(Cat("no such overload: ", KindName(item.kind), " in map"));
    }
    return Bool(list.map->map.contains(item.s));
  }
  if (list.kind != Value::kList) return Error(Cat("no such overload: in ", KindName(list.kind)));
  for (const Value& v : list.list) {
    if (v.kind == item.kind && Equal(v, item)) return Bool(true);
  }
  return Bool(false);
}

Value Variable(const std::string& name, const Env& env) {
  if (env.variables == nullptr) return Error(Cat("no such variable: ", name));
  const auto it = env.variables->find(name);
  if (it == env.variables->end()) return Error(Cat("no such variable: ", name));
  return FromData(it->second);
}

// x[key]: a map's value by string key, a list's item by int index.
Value Index(const Node& n, const Env& env) {
  Value target = Evaluate(*n.children[0], env);
  Value key = Evaluate(*n.children[1], env);
  if (target.kind == Value::kError) return target;
  if (key.kind == Value::kError) return key;
  if (target.kind == Value::kList) {
    if (key.kind != Value::kInt) return Error("a list index that is not an int");
    if (key.i < 0 || static_cast<size_t>(key.i) >= target.list.size()) {
      return Error(Cat("index out of bounds: ", key.i));
    }
    return target.list[static_cast<size_t>(key.i)];
  }
  if (key.kind != Value::kString) return Error("an index that is not a string");
  return Lookup(target, key.s);
}

Value Evaluate(const Node& n, const Env& env) {
  switch (n.kind) {
    case Node::kLiteral:
      return FromAttribute(n.literal);
    case Node::kDevice: {
      if (env.device == nullptr) return Error("no device to select from");
      Value v = Of(Value::kDevice);
      v.device = env.device;
      return v;
    }
    case Node::kVariable:
      return Variable(n.name, env);
    case Node::kList: {
      Value list = Of(Value::kList);
      for (const auto& c : n.children) {
        list.list.push_back(Evaluate(*c, env));
        if (list.list.back().kind == Value::kError) return list.list.back();
      }
      return list;
    }
    case Node::kSelect:
      return Lookup(Evaluate(*n.children[0], env), n.name);
    case Node::kIndex:
      return Index(n, env);
    case Node::kHas: {
      const Node& sel = *n.children[0];
      Value target = Evaluate(*sel.children[0], env);
      if (target.kind == Value::kMap) return Bool(target.map->map.contains(sel.name));
      if (target.kind != Value::kDomain) {
        return target.kind == Value::kError ? target : Error("has() on a non-map");
      }
      return Bool(target.domain->count(sel.name) > 0);
    }
    case Node::kSemverCall: {
      Value arg = Evaluate(*n.children[0], env);
      if (arg.kind != Value::kString) {
        return arg.kind == Value::kError ? arg : Error("semver() of a non-string");
      }
      absl::StatusOr<Semver> v = ParseSemver(arg.s);
      if (!v.ok()) return Error(std::string{v.status().message()});
      return Version(*v);
    }
    case Node::kMethod:
      return Method(n, env);
    case Node::kNot: {
      Value v = Evaluate(*n.children[0], env);
      if (v.kind == Value::kError) return v;
      return v.kind == Value::kBool ? Bool(!v.b)
                                    : Error("no such overload: !" + std::string(KindName(v.kind)));
    }
    case Node::kAnd:
    case Node::kOr:
      return Logic(n, env);
    case Node::kCompare:
      return Compare(n.name, Evaluate(*n.children[0], env), Evaluate(*n.children[1], env));
    case Node::kIn:
      return In(n, env);
  }
  return Error("unreachable");
}

}  // namespace

bool IsSubsetMethod(std::string_view name) {
  static constexpr std::string_view kMethods[] = {"compareTo",  "isGreaterThan", "isLessThan",
                                                  "major",      "minor",         "patch",
                                                  "startsWith", "endsWith",      "contains"};
  return std::find(std::begin(kMethods), std::end(kMethods), name) != std::end(kMethods);
}

// What parses but is still outside the subset: device fields other than driver and attributes
// (device.capacity needs quantities). Methods are checked as they are parsed.
absl::Status CheckSubset(const Node& n) {
  if (n.kind == Node::kSelect && n.children[0]->kind == Node::kDevice && n.name != "driver" &&
      n.name != "attributes") {
    return absl::InvalidArgumentError(Cat("CEL: device.", n.name, " at column ", n.column,
                                          " is outside the CEL subset (core/cel/cel_subset.h)"));
  }
  for (const auto& c : n.children) {
    if (absl::Status s = CheckSubset(*c); !s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

// An expression's value as its verdict: a bool, or the error naming the expression.
absl::StatusOr<bool> Verdict(const std::string& text, const Value& v) {
  if (v.kind == Value::kError) {
    return absl::FailedPreconditionError(Cat("CEL: ", text, ": ", v.s));
  }
  if (v.kind != Value::kBool) {
    return absl::FailedPreconditionError(
        Cat("CEL: ", text, ": the result is a ", KindName(v.kind), ", not a bool"));
  }
  return v.b;
}

}  // namespace

absl::StatusOr<bool> CelExpression::Matches(const DeviceView& device) const {
  return Verdict(text_, cel::Evaluate(*root_, Env{.device = &device}));
}

absl::StatusOr<bool> CelExpression::Evaluate(const Variables& variables) const {
  return Verdict(text_, cel::Evaluate(*root_, Env{.variables = &variables}));
}

}  // namespace neuron::cel

#include "tests/support/fixture_tree.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "core/base/unique_fd.h"

namespace neuron::testing {
namespace {

namespace fs = std::filesystem;

// Includes nest this deep at most: deeper is taken for a cycle.
constexpr int kMaxIncludeDepth = 16;

struct Variable {
  std::string value;
  std::string origin;
};

struct Range {
  int first = 0;
  int last = 0;
  std::string origin;
};

struct State {
  std::map<std::string, Variable, std::less<>> vars;
  std::map<std::string, Range, std::less<>> ranges;
  std::vector<FixtureEntry> entries;
  std::map<std::string, std::string, std::less<>> origin_of;  // path -> where it was given
  int depth = 0;
};

// One manifest line, for messages.
struct Line {
  std::string file;
  int number = 0;
  std::string_view text;

  std::string Where() const { return fmt::format("{}:{}", file, number); }
  absl::Status Error(std::string_view why) const {
    return absl::InvalidArgumentError(fmt::format("{}: {} in: {}", Where(), why, text));
  }
};

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// The first blank-separated word and what follows it (trimmed).
std::pair<std::string_view, std::string_view> SplitWord(std::string_view s) {
  s = Trim(s);
  size_t end = 0;
  while (end < s.size() && !IsBlank(s[end])) ++end;
  return {s.substr(0, end), Trim(s.substr(end))};
}

bool IsName(std::string_view s) {
  if (s.empty() || (s.front() >= '0' && s.front() <= '9')) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<int> ParseInt(std::string_view s, const Line& line) {
  if (s.empty() || s.size() > 6) return line.Error(fmt::format("\"{}\" is not a number", s));
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return line.Error(fmt::format("\"{}\" is not a number", s));
    v = v * 10 + (c - '0');
  }
  return v;
}

absl::StatusOr<mode_t> ParseMode(std::string_view s, const Line& line) {
  if (s.size() < 3 || s.size() > 4) {
    return line.Error(fmt::format("mode \"{}\" is not 3 or 4 octal digits", s));
  }
  mode_t m = 0;
  for (char c : s) {
    if (c < '0' || c > '7') return line.Error(fmt::format("mode \"{}\" is not octal", s));
    m = m * 8 + static_cast<mode_t>(c - '0');
  }
  return m;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "..." with \n \t \\ \" \xNN, nothing after the closing quote.
absl::StatusOr<std::string> Unquote(std::string_view s, const Line& line) {
  if (s.size() < 2 || s.back() != '"') return line.Error("unterminated quoted content");
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    if (s[i] == '"') return line.Error("text after the closing quote (or an unescaped \")");
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return line.Error("a backslash ends the quoted content");
    const char e = s[++i];
    if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (e == '\\' || e == '"') {
      out += e;
    } else if (e == 'x' && i + 3 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      return line.Error(fmt::format("unknown escape \\{} (known: \\n \\t \\\\ \\\" \\xNN)", e));
    }
  }
  return out;
}

// The text between each '{' and its '}', in order; braces do not nest.
absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Braces(std::string_view s,
                                                              const Line& line) {
  std::vector<std::pair<size_t, size_t>> out;  // (position of '{', length up to '}' inclusive)
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '}') return line.Error("'}' without '{'");
    if (s[i] != '{') continue;
    const size_t close = s.find_first_of("{}", i + 1);
    if (close == std::string_view::npos || s[close] == '{') {
      return line.Error("'{' without its '}' (braces do not nest)");
    }
    out.emplace_back(i, close - i + 1);
    i = close;
  }
  return out;
}

// Expands every {A,B,...} group of `path` (a group with a comma); {NAME} groups stay.
absl::StatusOr<std::vector<std::string>> Alternatives(std::string_view path, const Line& line) {
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> braces = Braces(path, line);
  if (!braces.ok()) return braces.status();
  std::vector<std::string> out{""};
  size_t at = 0;
  for (const auto& [pos, len] : *braces) {
    const std::string_view inner = path.substr(pos + 1, len - 2);
    std::vector<std::string_view> choices;
    if (inner.find(',') == std::string_view::npos) {
      choices.push_back(path.substr(pos, len));  // a variable: kept for Substitute
    } else {
      for (size_t start = 0;;) {
        const size_t comma = inner.find(',', start);
        choices.push_back(inner.substr(start, comma - start));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
    }
    std::vector<std::string> next;
    for (const std::string& prefix : out) {
      for (std::string_view c : choices) {
        if (c.empty()) return line.Error("an empty alternative in {...}");
        next.push_back(prefix + std::string(path.substr(at, pos - at)) + std::string(c));
      }
    }
    out = std::move(next);
    at = pos + len;
  }
  for (std::string& p : out) p += path.substr(at);
  return out;
}

// A {NAME} or {NAME:RANGE} reference.
struct Ref {
  std::string_view name;
  std::string_view index;  // empty without ":RANGE"
};

absl::StatusOr<Ref> ParseRef(std::string_view inner, const Line& line) {
  Ref r;
  const size_t colon = inner.find(':');
  r.name = inner.substr(0, colon);
  if (colon != std::string_view::npos) r.index = inner.substr(colon + 1);
  if (!IsName(r.name) || (colon != std::string_view::npos && !IsName(r.index))) {
    return line.Error(fmt::format("\"{{{}}}\" is not {{NAME}} or {{NAME:RANGE}}", inner));
  }
  return r;
}

// The range variables `text` uses, directly or as an index.
absl::Status RangesUsed(std::string_view text, const State& st, const Line& line,
                        std::set<std::string>* out) {
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> braces = Braces(text, line);
  if (!braces.ok()) return braces.status();
  for (const auto& [pos, len] : *braces) {
    absl::StatusOr<Ref> ref = ParseRef(text.substr(pos + 1, len - 2), line);
    if (!ref.ok()) return ref.status();
    if (st.ranges.contains(ref->name)) out->insert(std::string(ref->name));
    if (ref->index.empty()) continue;
    if (!st.ranges.contains(ref->index)) {
      return line.Error(
          fmt::format("{{{}:{}}}: {} is not a range", ref->name, ref->index, ref->index));
    }
    out->insert(std::string(ref->index));
  }
  return absl::OkStatus();
}

// `text` with every reference replaced, for the range values in `bound`.
absl::StatusOr<std::string> Substitute(std::string_view text,
                                       const std::map<std::string, int>& bound, const State& st,
                                       const Line& line) {
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> braces = Braces(text, line);
  if (!braces.ok()) return braces.status();
  std::string out;
  size_t at = 0;
  for (const auto& [pos, len] : *braces) {
    out += text.substr(at, pos - at);
    at = pos + len;
    absl::StatusOr<Ref> ref = ParseRef(text.substr(pos + 1, len - 2), line);
    if (!ref.ok()) return ref.status();
    if (auto b = bound.find(std::string(ref->name)); b != bound.end()) {
      out += std::to_string(b->second);
      continue;
    }
    const Variable* v = nullptr;
    if (!ref->index.empty()) {
      const std::string indexed =
          fmt::format("{}.{}", ref->name, bound.at(std::string(ref->index)));
      if (auto it = st.vars.find(indexed); it != st.vars.end()) v = &it->second;
    }
    if (v == nullptr) {
      auto it = st.vars.find(ref->name);
      if (it == st.vars.end()) return line.Error(fmt::format("unknown variable {}", ref->name));
      v = &it->second;
    }
    out += v->value;
  }
  out += text.substr(at);
  return out;
}

// Calls `each` with every combination of the values of `names`.
absl::Status ForEachBinding(
    const std::vector<std::string>& names, const State& st,
    const std::function<absl::Status(const std::map<std::string, int>&)>& each) {
  std::map<std::string, int> bound;
  for (const std::string& n : names) bound[n] = st.ranges.at(n).first;
  for (;;) {
    if (absl::Status s = each(bound); !s.ok()) return s;
    size_t k = 0;
    for (; k < names.size(); ++k) {
      int& v = bound[names[k]];
      if (v < st.ranges.at(names[k]).last) {
        ++v;
        break;
      }
      v = st.ranges.at(names[k]).first;
    }
    if (k == names.size()) return absl::OkStatus();
  }
}

// A relative path without "", "." or ".." components; one trailing '/' is dropped.
absl::StatusOr<std::string> CheckPath(std::string path, const Line& line) {
  if (!path.empty() && path.back() == '/') path.pop_back();
  if (path.empty() || path.front() == '/') {
    return line.Error(fmt::format("path \"{}\" is not relative to the root", path));
  }
  for (const auto& part : fs::path(path)) {
    if (part.empty() || part == "." || part == "..") {
      return line.Error(fmt::format("path \"{}\" has an empty, . or .. component", path));
    }
  }
  if (path.find("//") != std::string::npos) {
    return line.Error(fmt::format("path \"{}\" has an empty component", path));
  }
  return path;
}

// Adds the entries of one PATH line: every alternative, for every range value.
absl::Status AddPattern(const Line& line, FixtureEntry::Kind kind, std::string_view path,
                        mode_t mode, std::string_view content, State* st) {
  absl::StatusOr<std::vector<std::string>> paths = Alternatives(path, line);
  if (!paths.ok()) return paths.status();
  for (const std::string& p : *paths) {
    std::set<std::string> used;
    if (absl::Status s = RangesUsed(p, *st, line, &used); !s.ok()) return s;
    if (absl::Status s = RangesUsed(content, *st, line, &used); !s.ok()) return s;
    absl::Status s = ForEachBinding(
        std::vector<std::string>(used.begin(), used.end()), *st,
        [&](const std::map<std::string, int>& bound) -> absl::Status {
          absl::StatusOr<std::string> expanded = Substitute(p, bound, *st, line);
          if (!expanded.ok()) return expanded.status();
          absl::StatusOr<std::string> checked = CheckPath(*std::move(expanded), line);
          if (!checked.ok()) return checked.status();
          absl::StatusOr<std::string> body = Substitute(content, bound, *st, line);
          if (!body.ok()) return body.status();
          auto [it, fresh] = st->origin_of.emplace(*checked, line.Where());
          if (!fresh) {
            return line.Error(fmt::format("{} is already given at {}", *checked, it->second));
          }
          st->entries.push_back({kind, *checked, mode, *std::move(body), line.Where()});
          return absl::OkStatus();
        });
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ParseFile(const fs::path& manifest, State* st);

absl::Status Directive(const Line& line, std::string_view word, std::string_view rest,
                       const fs::path& dir, std::string* under, State* st) {
  auto [name, value] = SplitWord(rest);
  if (word == "include") {
    if (rest.empty()) return line.Error("include needs a file");
    absl::Status s = ParseFile(dir / rest, st);
    // Not found: the including line is the one to fix.
    if (absl::IsNotFound(s)) return line.Error(std::string{s.message()});
    return s;
  }
  if (word == "under") {
    if (rest.empty()) return line.Error("under needs a directory (\".\" for the root)");
    *under = rest == "." ? "" : std::string(rest) + "/";
    return absl::OkStatus();
  }
  // "NAME.N" sets the value of {NAME:R} for R = N; a range's own name has no dot.
  const bool dotted = name.find('.') != std::string_view::npos;
  if (!IsName(name) || (dotted && word == "range")) {
    return line.Error(fmt::format("\"{}\" is not a variable name", name));
  }
  if (value.empty()) return line.Error(fmt::format("{} {} needs a value", word, name));
  if (auto v = st->vars.find(name); v != st->vars.end()) {
    return line.Error(fmt::format("{} is already set at {}", name, v->second.origin));
  }
  if (auto r = st->ranges.find(name); r != st->ranges.end()) {
    return line.Error(fmt::format("{} is already a range at {}", name, r->second.origin));
  }
  if (word == "set") {
    const std::string_view text = value == "\"\"" ? std::string_view() : value;
    st->vars.emplace(std::string(name), Variable{std::string(text), line.Where()});
    return absl::OkStatus();
  }
  const size_t dash = value.find('-');
  absl::StatusOr<int> first = ParseInt(value.substr(0, dash), line);
  if (!first.ok()) return first.status();
  absl::StatusOr<int> last =
      dash == std::string_view::npos ? first : ParseInt(value.substr(dash + 1), line);
  if (!last.ok()) return last.status();
  if (*last < *first) return line.Error(fmt::format("range {} is empty", value));
  st->ranges.emplace(std::string(name), Range{*first, *last, line.Where()});
  return absl::OkStatus();
}

// One non-blank, non-comment line.
absl::Status ParseLine(const Line& line, const fs::path& dir, std::string* under, State* st) {
  auto [word, rest] = SplitWord(line.text);
  if (word == "set" || word == "range" || word == "include" || word == "under") {
    return Directive(line, word, rest, dir, under, st);
  }
  auto [second, content] = SplitWord(rest);
  const std::string path = *under + std::string(word);
  if (second == "->") {
    if (content.empty()) return line.Error("a link needs a target");
    return AddPattern(line, FixtureEntry::Kind::kSymlink, path, 0, content, st);
  }
  absl::StatusOr<mode_t> mode = ParseMode(second, line);
  if (!mode.ok()) return mode.status();
  if (word.ends_with('/')) {
    if (!content.empty()) return line.Error("a directory has no content");
    return AddPattern(line, FixtureEntry::Kind::kDirectory, path, *mode, "", st);
  }
  if (content.empty()) {
    return line.Error("a file needs content (\"\" for an empty file, \"\\n\" for a newline)");
  }
  if (content.front() == '"') {
    absl::StatusOr<std::string> exact = Unquote(content, line);
    if (!exact.ok()) return exact.status();
    return AddPattern(line, FixtureEntry::Kind::kFile, path, *mode, *exact, st);
  }
  return AddPattern(line, FixtureEntry::Kind::kFile, path, *mode, std::string(content) + "\n", st);
}

absl::Status ParseText(std::string_view text, std::string_view name, const fs::path& dir,
                       State* st) {
  std::string under;  // each file starts at the root
  int number = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++number;
    const std::string_view trimmed = Trim(raw);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    if (absl::Status s = ParseLine({std::string(name), number, trimmed}, dir, &under, st);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ParseFile(const fs::path& manifest, State* st) {
  if (st->depth >= kMaxIncludeDepth) {
    return absl::InvalidArgumentError(
        fmt::format("{}: includes nest deeper than {} (an include cycle?)", manifest.string(),
                    kMaxIncludeDepth));
  }
  std::ifstream in(manifest);
  if (!in) return absl::NotFoundError(fmt::format("cannot read manifest {}", manifest.string()));
  std::stringstream text;
  text << in.rdbuf();
  ++st->depth;
  absl::Status s = ParseText(text.str(), manifest.string(), manifest.parent_path(), st);
  --st->depth;
  return s;
}

absl::Status Errno(std::string_view origin, std::string_view op, const fs::path& path) {
  return absl::InternalError(
      fmt::format("{}: {} {}: {}", origin, op, path.string(), std::strerror(errno)));
}

// mkdir -p with 0755 on what it creates, whatever the umask.
absl::Status MakeDirs(const fs::path& dir, std::string_view origin) {
  fs::path at;
  for (const fs::path& part : dir) {
    at /= part;
    if (::mkdir(at.c_str(), 0755) == 0) {
      if (::chmod(at.c_str(), 0755) != 0) return Errno(origin, "chmod", at);
    } else if (errno != EEXIST) {
      return Errno(origin, "mkdir", at);
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFile(const fs::path& path, const FixtureEntry& e) {
  const UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return Errno(e.origin, "create", path);
  for (size_t done = 0; done < e.content.size();) {
    const ssize_t n = ::write(fd.get(), e.content.data() + done, e.content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(e.origin, "write", path);
    done += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), e.mode) != 0) return Errno(e.origin, "chmod", path);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<FixtureEntry>> ExpandManifest(const fs::path& manifest) {
  State st;
  if (absl::Status s = ParseFile(manifest, &st); !s.ok()) return s;
  return std::move(st.entries);
}

absl::StatusOr<std::vector<FixtureEntry>> ExpandManifestText(std::string_view text,
                                                             std::string_view name,
                                                             const fs::path& include_dir) {
  State st;
  if (absl::Status s = ParseText(text, name, include_dir, &st); !s.ok()) return s;
  return std::move(st.entries);
}

absl::Status WriteFixtureTree(const std::vector<FixtureEntry>& entries, const fs::path& root) {
  if (absl::Status s = MakeDirs(root, "fixture root"); !s.ok()) return s;
  std::vector<const FixtureEntry*> dirs;
  for (const FixtureEntry& e : entries) {
    const fs::path path = root / e.path;
    if (absl::Status s = MakeDirs(path.parent_path(), e.origin); !s.ok()) return s;
    switch (e.kind) {
      case FixtureEntry::Kind::kFile:
        if (absl::Status s = WriteFile(path, e); !s.ok()) return s;
        break;
      case FixtureEntry::Kind::kDirectory:
        if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
          return Errno(e.origin, "mkdir", path);
        dirs.push_back(&e);
        break;
      case FixtureEntry::Kind::kSymlink:
        if (::symlink(e.content.c_str(), path.c_str()) != 0)
          return Errno(e.origin, "symlink", path);
        break;
    }
  }
  // Last, deepest first: a directory's own mode might not let us create what is inside it.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const fs::path path = root / (*it)->path;
    if (::chmod(path.c_str(), (*it)->mode) != 0) return Errno((*it)->origin, "chmod", path);
  }
  return absl::OkStatus();
}

absl::Status BuildFixtureTree(const fs::path& manifest, const fs::path& root) {
  absl::StatusOr<std::vector<FixtureEntry>> entries = ExpandManifest(manifest);
  if (!entries.ok()) return entries.status();
  return WriteFixtureTree(*entries, root);
}

}  // namespace neuron::testing

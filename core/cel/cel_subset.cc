// The CEL subset: a tokenizer, a recursive-descent parser into a small tree, and an evaluator
// with CEL's error semantics. cel_subset.h says what the subset is.
#include "core/cel/cel_subset.h"

#include <cctype>
#include <charconv>
#include <utility>
#include <vector>

#include "core/base/text.h"
#include "core/cel/internal/cel_node.h"

namespace neuron::cel {

namespace {

enum class Tok { kEnd, kIdent, kString, kInt, kPunct };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier, punctuation, or the decoded string literal
  int64_t number = 0;
  size_t column = 1;  // 1-based
};

absl::Status Unsupported(std::string_view what, size_t column) {
  return absl::InvalidArgumentError(Cat("CEL: ", what, " at column ", column,
                                        " is outside the CEL subset (core/cel/cel_subset.h)"));
}

absl::Status Malformed(std::string_view what, size_t column) {
  return absl::InvalidArgumentError(Cat("CEL: ", what, " at column ", column));
}

absl::StatusOr<Token> LexString(std::string_view s, size_t& i) {
  const char quote = s[i];
  Token t{Tok::kString, "", 0, i + 1};
  if (s.substr(i, 3) == std::string(3, quote)) return Unsupported("a triple-quoted string", i + 1);
  for (++i; i < s.size() && s[i] != quote; ++i) {
    if (s[i] != '\\') {
      t.text += s[i];
      continue;
    }
    if (++i == s.size()) break;
    switch (s[i]) {
      case '"':
      case '\'':
      case '\\':
        t.text += s[i];
        break;
      case 'n':
        t.text += '\n';
        break;
      case 't':
        t.text += '\t';
        break;
      default:
        return Unsupported(Cat("the escape \\", std::string(1, s[i])), i);
    }
  }
  if (i == s.size()) return Malformed("an unterminated string", t.column);
  ++i;
  return t;
}

absl::StatusOr<std::vector<Token>> Lex(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '"' || c == '\'') {
      absl::StatusOr<Token> t = LexString(s, i);
      if (!t.ok()) return t.status();
      out.push_back(*std::move(t));
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      Token t{Tok::kInt, "", 0, i + 1};
      const auto [end, ec] = std::from_chars(s.data() + i, s.data() + s.size(), t.number);
      if (ec != std::errc()) return Malformed("an integer out of range", i + 1);
      i = static_cast<size_t>(end - s.data());
      if (i < s.size() && (s[i] == '.' || s[i] == 'u' || s[i] == 'e' || s[i] == 'x')) {
        return Unsupported("a double, unsigned or hex literal", t.column);
      }
      out.push_back(t);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      Token t{Tok::kIdent, "", 0, i + 1};
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) {
        t.text += s[i++];
      }
      out.push_back(t);
    } else {
      static constexpr std::string_view kTwo[] = {"&&", "||", "==", "!=", "<=", ">="};
      Token t{Tok::kPunct, std::string(1, c), 0, i + 1};
      for (std::string_view two : kTwo) {
        if (s.substr(i, 2) == two) t.text = std::string(two);
      }
      if (t.text.find_first_of("+*/%?:") != std::string::npos || t.text == "&" || t.text == "|" ||
          t.text == "=") {
        return Unsupported(Cat("'", t.text, "'"), t.column);
      }
      if (t.text.size() == 1 && std::string_view(".,[]()!<>-").find(c) == std::string_view::npos) {
        return Malformed(Cat("unexpected '", t.text, "'"), t.column);
      }
      i += t.text.size();
      out.push_back(t);
    }
  }
  out.push_back(Token{Tok::kEnd, "", 0, s.size() + 1});
  return out;
}

}  // namespace

namespace {

using Node = CelExpression::Node;
using NodePtr = std::shared_ptr<const Node>;

NodePtr Make(Node::Kind kind, size_t column, std::string name = {},
             std::vector<NodePtr> children = {}) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->column = column;
  n->name = std::move(name);
  n->children = std::move(children);
  return n;
}

class Parser {
 public:
  // `variables`: the names of CompileOver; null for a device selector (`device` alone).
  Parser(std::vector<Token> tokens, const std::set<std::string>* variables)
      : t_(std::move(tokens)), variables_(variables) {}

  absl::StatusOr<NodePtr> ParseAll() {
    absl::StatusOr<NodePtr> root = Or();
    if (root.ok() && Peek().kind != Tok::kEnd) {
      return Malformed(Cat("unexpected '", Peek().text, "'"), Peek().column);
    }
    return root;
  }

 private:
  const Token& Peek() const { return t_[pos_]; }
  bool IsPunct(std::string_view p) const { return Peek().kind == Tok::kPunct && Peek().text == p; }
  bool Accept(std::string_view p) {
    if (!IsPunct(p)) return false;
    ++pos_;
    return true;
  }
  absl::Status Expect(std::string_view p) {
    if (Accept(p)) return absl::OkStatus();
    return Malformed(Cat("expected '", p, "'"), Peek().column);
  }

  // Left-associative binary level: operand (op operand)*.
  template <typename Next>
  absl::StatusOr<NodePtr> Binary(std::string_view op, Node::Kind kind, Next next) {
    absl::StatusOr<NodePtr> left = (this->*next)();
    while (left.ok() && IsPunct(op)) {
      const size_t column = Peek().column;
      ++pos_;
      absl::StatusOr<NodePtr> right = (this->*next)();
      if (!right.ok()) return right;
      left = Make(kind, column, std::string(op), {*left, *right});
    }
    return left;
  }
  absl::StatusOr<NodePtr> Or() { return Binary("||", Node::kOr, &Parser::And); }
  absl::StatusOr<NodePtr> And() { return Binary("&&", Node::kAnd, &Parser::Relation); }

  absl::StatusOr<NodePtr> Relation() {
    absl::StatusOr<NodePtr> left = Unary();
    if (!left.ok()) return left;
    static constexpr std::string_view kOps[] = {"==", "!=", "<", "<=", ">", ">="};
    for (std::string_view op : kOps) {
      if (!IsPunct(op)) continue;
      const size_t column = Peek().column;
      ++pos_;
      absl::StatusOr<NodePtr> right = Unary();
      if (!right.ok()) return right;
      return Make(Node::kCompare, column, std::string(op), {*left, *right});
    }
    if (Peek().kind == Tok::kIdent && Peek().text == "in") {
      const size_t column = Peek().column;
      ++pos_;
      absl::StatusOr<NodePtr> right = Unary();
      if (!right.ok()) return right;
      return Make(Node::kIn, column, "in", {*left, *right});
    }
    return left;
  }

  absl::StatusOr<NodePtr> Unary() {
    const size_t column = Peek().column;
    if (Accept("!")) {
      absl::StatusOr<NodePtr> operand = Unary();
      if (!operand.ok()) return operand;
      return Make(Node::kNot, column, "!", {*operand});
    }
    if (Accept("-")) {
      if (Peek().kind != Tok::kInt) return Unsupported("'-' other than before an integer", column);
      auto n = std::const_pointer_cast<Node>(Make(Node::kLiteral, column));
      n->literal = -Peek().number;
      ++pos_;
      return NodePtr(n);
    }
    return Member();
  }

  absl::StatusOr<NodePtr> Member() {
    absl::StatusOr<NodePtr> node = Primary();
    while (node.ok()) {
      const size_t column = Peek().column;
      if (Accept(".")) {
        if (Peek().kind != Tok::kIdent) return Malformed("expected a name after '.'", column);
        std::string name = t_[pos_++].text;
        if (IsPunct("(")) {
          if (!IsSubsetMethod(name)) return Unsupported(Cat("the method ", name, "()"), column + 1);
          absl::StatusOr<std::vector<NodePtr>> args = Arguments();
          if (!args.ok()) return args.status();
          args->insert(args->begin(), *node);
          node = Make(Node::kMethod, column, std::move(name), *std::move(args));
        } else {
          node = Make(Node::kSelect, column, std::move(name), {*node});
        }
      } else if (Accept("[")) {
        absl::StatusOr<NodePtr> key = Or();
        if (!key.ok()) return key;
        if (absl::Status s = Expect("]"); !s.ok()) return s;
        node = Make(Node::kIndex, column, "[]", {*node, *key});
      } else {
        break;
      }
    }
    return node;
  }

  absl::StatusOr<std::vector<NodePtr>> Arguments() {
    std::vector<NodePtr> args;
    if (absl::Status s = Expect("("); !s.ok()) return s;
    if (Accept(")")) return args;
    do {
      absl::StatusOr<NodePtr> a = Or();
      if (!a.ok()) return a.status();
      args.push_back(*std::move(a));
    } while (Accept(","));
    if (absl::Status s = Expect(")"); !s.ok()) return s;
    return args;
  }

  absl::StatusOr<NodePtr> Primary();

  std::vector<Token> t_;
  const std::set<std::string>* variables_;
  size_t pos_ = 0;
};

absl::StatusOr<NodePtr> Parser::Primary() {
  const Token tok = Peek();
  if (tok.kind == Tok::kString || tok.kind == Tok::kInt) {
    ++pos_;
    auto n = std::const_pointer_cast<Node>(Make(Node::kLiteral, tok.column));
    n->literal = tok.kind == Tok::kString ? AttributeValue(tok.text) : AttributeValue(tok.number);
    return NodePtr(n);
  }
  if (Accept("(")) {
    absl::StatusOr<NodePtr> inner = Or();
    if (!inner.ok()) return inner;
    if (absl::Status s = Expect(")"); !s.ok()) return s;
    return inner;
  }
  if (IsPunct("[")) {
    ++pos_;
    std::vector<NodePtr> items;
    if (!Accept("]")) {
      do {
        absl::StatusOr<NodePtr> item = Or();
        if (!item.ok()) return item;
        items.push_back(*std::move(item));
      } while (Accept(","));
      if (absl::Status s = Expect("]"); !s.ok()) return s;
    }
    return Make(Node::kList, tok.column, "[]", std::move(items));
  }
  if (tok.kind != Tok::kIdent) return Malformed(Cat("unexpected '", tok.text, "'"), tok.column);
  ++pos_;
  if (tok.text == "true" || tok.text == "false") {
    auto n = std::const_pointer_cast<Node>(Make(Node::kLiteral, tok.column));
    n->literal = tok.text == "true";
    return NodePtr(n);
  }
  if (variables_ == nullptr && tok.text == "device") {
    return Make(Node::kDevice, tok.column, "device");
  }
  if (variables_ != nullptr && variables_->contains(tok.text)) {
    return Make(Node::kVariable, tok.column, tok.text);
  }
  if (tok.text == "has" || tok.text == "semver") {
    absl::StatusOr<std::vector<NodePtr>> args = Arguments();
    if (!args.ok()) return args.status();
    if (args->size() != 1) return Malformed(Cat(tok.text, "() takes one argument"), tok.column);
    if (tok.text == "has" && (*args)[0]->kind != Node::kSelect) {
      return Malformed("has() takes a field selection, e.g. has(x.name)", tok.column);
    }
    return Make(tok.text == "has" ? Node::kHas : Node::kSemverCall, tok.column, tok.text,
                *std::move(args));
  }
  return Unsupported(Cat("the name '", tok.text, "'"), tok.column);
}

}  // namespace

CelExpression::CelExpression(std::string text, std::shared_ptr<const Node> root)
    : text_(std::move(text)), root_(std::move(root)) {}

absl::StatusOr<CelExpression> CelExpression::Compile(std::string_view text) {
  return CompileIn(text, nullptr);
}

absl::StatusOr<CelExpression> CelExpression::CompileOver(std::string_view text,
                                                         const std::set<std::string>& variables) {
  return CompileIn(text, &variables);
}

absl::StatusOr<CelExpression> CelExpression::CompileIn(std::string_view text,
                                                       const std::set<std::string>* variables) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(text);
  if (!tokens.ok()) return tokens.status();
  Parser parser(*std::move(tokens), variables);
  absl::StatusOr<NodePtr> root = parser.ParseAll();
  if (!root.ok()) return root.status();
  if (absl::Status s = CheckSubset(**root); !s.ok()) return s;
  return CelExpression(std::string(text), *std::move(root));
}

}  // namespace neuron::cel

#pragma once
#if !defined(NEURON_ROOM_CEL)
#error "core/cel/internal/ is private to core/cel: include its public headers instead"
#endif
// The CEL subset's parse tree, shared by the parser (cel_subset.cc) and the evaluator
// (cel_eval.cc). Internal to core/cel.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/cel/cel_subset.h"

namespace neuron::cel {

// The parse tree.
struct CelExpression::Node {
  enum Kind {
    kLiteral,
    kList,
    kDevice,
    kVariable,  // a variable of CompileOver, by name
    kSelect,
    kIndex,
    kHas,
    kSemverCall,
    kMethod,
    kNot,
    kAnd,
    kOr,
    kCompare,
    kIn
  };
  Kind kind = kLiteral;
  std::string name;  // field, method or operator
  AttributeValue literal;
  std::vector<std::shared_ptr<const Node>> children;  // operands; for kMethod the target first
  size_t column = 1;
};

// Whether the evaluator has the method (cel_eval.cc).
bool IsSubsetMethod(std::string_view name);

// What parses but is still outside the subset (cel_eval.cc): InvalidArgument naming it.
absl::Status CheckSubset(const CelExpression::Node& n);

}  // namespace neuron::cel

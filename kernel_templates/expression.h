#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace evo {

// Values of the names an expression may reference (knobs, problem sizes, device limits).
using Bindings = std::map<std::string, int64_t, std::less<>>;

namespace internal {
struct ExpressionAst;
}  // namespace internal

// A small integer expression language for kernel-template manifests: constraints between knobs
// ("BLOCK_M % (16 * NUM_WARPS) == 0") and launch geometry ("ceil_div(S_q, BLOCK_M)").
//
// Values are int64_t; comparisons and logical operators yield 0 or 1. Operators follow C
// precedence: ?: < || < && < == != < < <= > >= < + - < * / % < unary ! -. &&, || and ?: only
// evaluate the operand they need, so guards like "X == 0 || Y / X > 2" are safe. Functions:
// min(a, b, ...), max(a, b, ...), ceil_div(a, b), is_pow2(a), log2(a) (floor).
//
// Parsing happens once at manifest load; evaluation runs for every candidate configuration, so
// the parsed form is immutable and shared between copies.
class Expression {
 public:
  // The constant "0", so that structs holding expressions can be declared first and filled in
  // field by field.
  Expression();

  // Throws evo::Error("expression 'TEXT': <what> at column N") on a syntax error, an unknown
  // function or a wrong number of arguments.
  static Expression Parse(std::string_view text);

  // Throws evo::Error naming the problem and the expression text on an unbound name, division or
  // modulo by zero, a non-positive ceil_div divisor or log2 argument, or int64_t overflow.
  int64_t Evaluate(const Bindings& bindings) const;

  // The expression's text with every part whose names are all bound replaced by its value, and
  // conditionals with a bound condition replaced by the branch taken: "min(128, (NUM_SMS *
  // CTAS_PER_SM))" for a launch that still needs the device's figures. Fully parenthesized. May
  // throw like Evaluate on the bound parts.
  std::string Fold(const Bindings& bindings) const;

  // Every name the expression references (function names excluded), so callers can reject unknown
  // names at load time instead of on first evaluation.
  std::set<std::string> Identifiers() const;

  // For an expression that is one ordering comparison ("A <= B", "A < B", "B >= A", "B > A"):
  // A, the quantity held under a bound, and B, the bound. nullopt for every other form
  // (equalities, conjunctions and disjunctions, conditionals, arithmetic). May throw like
  // Evaluate where a side's constant part cannot be computed.
  struct UpperBound;
  std::optional<UpperBound> AsUpperBound() const;

  const std::string& text() const { return text_; }

 private:
  Expression(std::string text, std::shared_ptr<const internal::ExpressionAst> ast);

  std::string text_;
  std::shared_ptr<const internal::ExpressionAst> ast_;
};

struct Expression::UpperBound {
  Expression value;
  Expression limit;
};

}  // namespace evo

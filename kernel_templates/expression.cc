#include "kernel_templates/expression.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstddef>
#include <limits>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/error.h"

namespace evo {
namespace internal {

// Nodes live in one vector and refer to their operands by index: cheap to build, and the whole
// tree is freed in one go.
struct ExpressionAst {
  enum class Kind : uint8_t { kLiteral, kName, kNegate, kNot, kBinary, kConditional, kCall };
  enum class BinaryOp : uint8_t {
    kOr,
    kAnd,
    kEq,
    kNe,
    kLt,
    kLe,
    kGt,
    kGe,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kMod
  };
  enum class Function : uint8_t { kMin, kMax, kCeilDiv, kIsPow2, kLog2 };

  struct Node {
    Kind kind = Kind::kLiteral;
    BinaryOp op = BinaryOp::kAdd;        // kBinary
    Function function = Function::kMin;  // kCall
    int64_t value = 0;                   // kLiteral
    std::string name;                    // kName
    std::vector<size_t> operands;        // indices into `nodes`
  };

  std::vector<Node> nodes;
  size_t root = 0;
  std::set<std::string> identifiers;
};

}  // namespace internal

namespace {

using Ast = internal::ExpressionAst;

// Both limits keep recursion (in the parser and in Evaluate) far from the stack limit on
// pathological input; real manifest expressions are a few levels deep.
constexpr int kMaxNesting = 256;
constexpr int kMaxTreeDepth = 1024;

struct BinaryOperator {
  std::string_view symbol;
  int precedence;  // higher binds tighter
  Ast::BinaryOp op;
};

constexpr BinaryOperator kBinaryOperators[] = {
    {"||", 1, Ast::BinaryOp::kOr}, {"&&", 2, Ast::BinaryOp::kAnd}, {"==", 3, Ast::BinaryOp::kEq},
    {"!=", 3, Ast::BinaryOp::kNe}, {"<", 4, Ast::BinaryOp::kLt},   {"<=", 4, Ast::BinaryOp::kLe},
    {">", 4, Ast::BinaryOp::kGt},  {">=", 4, Ast::BinaryOp::kGe},  {"+", 5, Ast::BinaryOp::kAdd},
    {"-", 5, Ast::BinaryOp::kSub}, {"*", 6, Ast::BinaryOp::kMul},  {"/", 6, Ast::BinaryOp::kDiv},
    {"%", 6, Ast::BinaryOp::kMod},
};
constexpr int kLowestBinaryPrecedence = 1;
constexpr int kHighestBinaryPrecedence = 6;

std::string_view SymbolOf(Ast::BinaryOp op) {
  for (const BinaryOperator& entry : kBinaryOperators) {
    if (entry.op == op) return entry.symbol;
  }
  return "?";
}

struct FunctionInfo {
  std::string_view name;
  Ast::Function function;
  size_t min_args;
  size_t max_args;
};

constexpr FunctionInfo kFunctions[] = {
    {"min", Ast::Function::kMin, 2, std::numeric_limits<size_t>::max()},
    {"max", Ast::Function::kMax, 2, std::numeric_limits<size_t>::max()},
    {"ceil_div", Ast::Function::kCeilDiv, 2, 2},
    {"is_pow2", Ast::Function::kIsPow2, 1, 1},
    {"log2", Ast::Function::kLog2, 1, 1},
};

// Two-character symbols come first so that "<=" is not read as "<" followed by "=".
constexpr std::string_view kSymbols[] = {"||", "&&", "==", "!=", "<=", ">=", "?", ":", "<", ">",
                                         "+",  "-",  "*",  "/",  "%",  "!",  "(", ")", ","};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

struct Token {
  enum class Kind : uint8_t { kNumber, kName, kSymbol, kEnd };
  Kind kind = Kind::kEnd;
  std::string_view text;
  size_t column = 0;  // 1-based, as shown to the user
  int64_t value = 0;  // kNumber
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Ast Parse() {
    Tokenize();
    if (Peek().kind == Token::Kind::kEnd) Fail("empty expression", Peek());
    ast_.root = ParseConditional();
    const Token& rest = Peek();
    if (rest.kind != Token::Kind::kEnd) {
      if (rest.text == ")") Fail("unmatched ')'", rest);
      Fail("unexpected " + Describe(rest) + " after the end of the expression", rest);
    }
    return std::move(ast_);
  }

 private:
  // Limits recursion depth through nested parentheses, unary operators and conditionals.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& parser) : parser_(parser) {
      if (++parser_.nesting_ > kMaxNesting)
        parser_.Fail("expression is nested too deeply", parser_.Peek());
    }
    ~NestingGuard() { --parser_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& parser_;
  };

  [[noreturn]] void Fail(const std::string& what, size_t column) const {
    throw Error("expression '" + std::string(text_) + "': " + what + " at column " +
                std::to_string(column));
  }
  [[noreturn]] void Fail(const std::string& what, const Token& token) const {
    Fail(what, token.column);
  }

  static std::string Describe(const Token& token) {
    if (token.kind == Token::Kind::kEnd) return "end of input";
    std::string quoted = "'";
    quoted.append(token.text).append("'");
    return quoted;
  }

  void Tokenize() {
    size_t pos = 0;
    while (true) {
      while (pos < text_.size() && IsSpace(text_[pos])) ++pos;
      Token token;
      token.column = pos + 1;
      if (pos == text_.size()) {
        tokens_.push_back(token);
        return;
      }
      const size_t start = pos;
      const char c = text_[pos];
      if (IsDigit(c)) {
        while (pos < text_.size() && IsNameChar(text_[pos])) ++pos;
        token.kind = Token::Kind::kNumber;
        token.text = text_.substr(start, pos - start);
        const auto [end, error] =
            std::from_chars(token.text.data(), token.text.data() + token.text.size(), token.value);
        if (error == std::errc::result_out_of_range) {
          Fail("integer literal " + Describe(token) + " is out of range", token);
        }
        if (error != std::errc() || end != token.text.data() + token.text.size()) {
          Fail("malformed number " + Describe(token), token);
        }
      } else if (IsNameStart(c)) {
        while (pos < text_.size() && IsNameChar(text_[pos])) ++pos;
        token.kind = Token::Kind::kName;
        token.text = text_.substr(start, pos - start);
      } else {
        for (std::string_view symbol : kSymbols) {
          if (text_.substr(pos, symbol.size()) == symbol) {
            token.kind = Token::Kind::kSymbol;
            token.text = symbol;
            pos += symbol.size();
            break;
          }
        }
        if (token.kind != Token::Kind::kSymbol) FailOnCharacter(c, token.column);
      }
      tokens_.push_back(token);
    }
  }

  // The single-character forms of C's two-character operators are likely typos, so say which
  // operator was probably meant.
  [[noreturn]] void FailOnCharacter(char c, size_t column) const {
    if (c == '=') Fail("unexpected '='; use '==' to compare", column);
    if (c == '&') Fail("unexpected '&'; use '&&' for logical and", column);
    if (c == '|') Fail("unexpected '|'; use '||' for logical or", column);
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f)
      Fail("unexpected character '" + std::string(1, c) + "'", column);
    static constexpr char kHexDigits[] = "0123456789abcdef";
    Fail(std::string("unexpected byte 0x") + kHexDigits[byte >> 4] + kHexDigits[byte & 0xf],
         column);
  }

  const Token& Peek() const { return tokens_[next_]; }
  const Token& Advance() { return tokens_[next_++]; }
  bool IsSymbol(std::string_view symbol) const {
    return Peek().kind == Token::Kind::kSymbol && Peek().text == symbol;
  }
  bool Accept(std::string_view symbol) {
    if (!IsSymbol(symbol)) return false;
    ++next_;
    return true;
  }
  void Expect(std::string_view symbol) {
    if (!Accept(symbol)) {
      Fail("expected '" + std::string(symbol) + "' but found " + Describe(Peek()), Peek());
    }
  }

  size_t AddNode(Ast::Node node, const Token& at) {
    int depth = 1;
    for (size_t operand : node.operands) depth = std::max(depth, depths_[operand] + 1);
    if (depth > kMaxTreeDepth) Fail("expression is nested too deeply", at);
    ast_.nodes.push_back(std::move(node));
    depths_.push_back(depth);
    return ast_.nodes.size() - 1;
  }

  // conditional := or ('?' conditional ':' conditional)?
  size_t ParseConditional() {
    NestingGuard guard(*this);
    const size_t condition = ParseBinary(kLowestBinaryPrecedence);
    if (!IsSymbol("?")) return condition;
    const Token& question = Advance();
    const size_t if_true = ParseConditional();
    Expect(":");
    const size_t if_false = ParseConditional();
    Ast::Node node;
    node.kind = Ast::Kind::kConditional;
    node.operands = {condition, if_true, if_false};
    return AddNode(std::move(node), question);
  }

  // Left-associative binary operators, one precedence level per recursion step.
  size_t ParseBinary(int precedence) {
    if (precedence > kHighestBinaryPrecedence) return ParseUnary();
    size_t lhs = ParseBinary(precedence + 1);
    while (true) {
      const BinaryOperator* matched = nullptr;
      for (const BinaryOperator& entry : kBinaryOperators) {
        if (entry.precedence == precedence && IsSymbol(entry.symbol)) matched = &entry;
      }
      if (matched == nullptr) return lhs;
      const Token& op_token = Advance();
      const size_t rhs = ParseBinary(precedence + 1);
      Ast::Node node;
      node.kind = Ast::Kind::kBinary;
      node.op = matched->op;
      node.operands = {lhs, rhs};
      lhs = AddNode(std::move(node), op_token);
    }
  }

  // unary := ('!' | '-') unary | primary
  size_t ParseUnary() {
    if (!IsSymbol("!") && !IsSymbol("-")) return ParsePrimary();
    NestingGuard guard(*this);
    const Token& op_token = Advance();
    Ast::Node node;
    node.kind = op_token.text == "!" ? Ast::Kind::kNot : Ast::Kind::kNegate;
    node.operands = {ParseUnary()};
    return AddNode(std::move(node), op_token);
  }

  // primary := number | name | name '(' args ')' | '(' conditional ')'
  size_t ParsePrimary() {
    const Token& token = Peek();
    if (token.kind == Token::Kind::kNumber) {
      Advance();
      Ast::Node node;
      node.kind = Ast::Kind::kLiteral;
      node.value = token.value;
      return AddNode(std::move(node), token);
    }
    if (token.kind == Token::Kind::kName) {
      Advance();
      if (IsSymbol("(")) return ParseCall(token);
      Ast::Node node;
      node.kind = Ast::Kind::kName;
      node.name = std::string(token.text);
      ast_.identifiers.insert(node.name);
      return AddNode(std::move(node), token);
    }
    if (IsSymbol("(")) {
      Advance();
      const size_t inner = ParseConditional();
      Expect(")");
      return inner;
    }
    Fail("expected a number, a name or '(' but found " + Describe(token), token);
  }

  size_t ParseCall(const Token& name) {
    const FunctionInfo* info = nullptr;
    for (const FunctionInfo& entry : kFunctions) {
      if (entry.name == name.text) info = &entry;
    }
    if (info == nullptr) Fail("unknown function " + Describe(name), name);

    Expect("(");
    Ast::Node node;
    node.kind = Ast::Kind::kCall;
    node.function = info->function;
    if (!Accept(")")) {
      while (true) {
        node.operands.push_back(ParseConditional());
        if (Accept(")")) break;
        if (!Accept(",")) Fail("expected ',' or ')' but found " + Describe(Peek()), Peek());
      }
    }

    const size_t count = node.operands.size();
    if (count < info->min_args || count > info->max_args) {
      std::string expected;
      if (info->min_args == info->max_args) {
        expected = std::to_string(info->min_args);
      } else {
        expected = "at least " + std::to_string(info->min_args);
      }
      Fail(std::string(info->name) + " takes " + expected +
               (info->min_args == 1 && info->max_args == 1 ? " argument" : " arguments") +
               ", got " + std::to_string(count),
           name);
    }
    return AddNode(std::move(node), name);
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  int nesting_ = 0;
  Ast ast_;
  std::vector<int> depths_;  // parallel to ast_.nodes
};

class Evaluator {
 public:
  Evaluator(const Ast& ast, const Bindings& bindings, const std::string& text)
      : ast_(ast), bindings_(bindings), text_(text) {}

  int64_t Evaluate(size_t index) const {
    const Ast::Node& node = ast_.nodes[index];
    switch (node.kind) {
      case Ast::Kind::kLiteral:
        return node.value;
      case Ast::Kind::kName: {
        const auto it = bindings_.find(node.name);
        if (it == bindings_.end()) Fail("unknown name '" + node.name + "'");
        return it->second;
      }
      case Ast::Kind::kNegate: {
        const int64_t operand = Evaluate(node.operands[0]);
        int64_t result;
        if (__builtin_sub_overflow(int64_t{0}, operand, &result)) {
          Fail("integer overflow in -(" + std::to_string(operand) + ")");
        }
        return result;
      }
      case Ast::Kind::kNot:
        return Evaluate(node.operands[0]) == 0 ? 1 : 0;
      case Ast::Kind::kConditional:
        return Evaluate(node.operands[0]) != 0 ? Evaluate(node.operands[1])
                                               : Evaluate(node.operands[2]);
      case Ast::Kind::kBinary:
        return EvaluateBinary(node);
      case Ast::Kind::kCall:
        return EvaluateCall(node);
    }
    Fail("corrupt expression tree");
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw Error(what + " in '" + text_ + "'");
  }

  [[noreturn]] void FailOverflow(Ast::BinaryOp op, int64_t lhs, int64_t rhs) const {
    Fail("integer overflow in " + std::to_string(lhs) + " " + std::string(SymbolOf(op)) + " " +
         std::to_string(rhs));
  }

  int64_t EvaluateBinary(const Ast::Node& node) const {
    const int64_t lhs = Evaluate(node.operands[0]);
    // The right operand of && and || is only evaluated when it decides the result, which lets
    // manifests guard a division with a zero check.
    if (node.op == Ast::BinaryOp::kAnd) return lhs != 0 && Evaluate(node.operands[1]) != 0;
    if (node.op == Ast::BinaryOp::kOr) return lhs != 0 || Evaluate(node.operands[1]) != 0;
    const int64_t rhs = Evaluate(node.operands[1]);
    int64_t result = 0;
    switch (node.op) {
      case Ast::BinaryOp::kEq:
        return lhs == rhs;
      case Ast::BinaryOp::kNe:
        return lhs != rhs;
      case Ast::BinaryOp::kLt:
        return lhs < rhs;
      case Ast::BinaryOp::kLe:
        return lhs <= rhs;
      case Ast::BinaryOp::kGt:
        return lhs > rhs;
      case Ast::BinaryOp::kGe:
        return lhs >= rhs;
      case Ast::BinaryOp::kAdd:
        if (__builtin_add_overflow(lhs, rhs, &result)) FailOverflow(node.op, lhs, rhs);
        return result;
      case Ast::BinaryOp::kSub:
        if (__builtin_sub_overflow(lhs, rhs, &result)) FailOverflow(node.op, lhs, rhs);
        return result;
      case Ast::BinaryOp::kMul:
        if (__builtin_mul_overflow(lhs, rhs, &result)) FailOverflow(node.op, lhs, rhs);
        return result;
      case Ast::BinaryOp::kDiv:
        if (rhs == 0) Fail("division by zero");
        // INT64_MIN / -1 does not fit and is undefined behavior in C++.
        if (lhs == std::numeric_limits<int64_t>::min() && rhs == -1) {
          FailOverflow(node.op, lhs, rhs);
        }
        return lhs / rhs;
      case Ast::BinaryOp::kMod:
        if (rhs == 0) Fail("modulo by zero");
        // INT64_MIN % -1 is undefined behavior in C++ even though the answer is 0.
        if (rhs == -1) return 0;
        return lhs % rhs;
      case Ast::BinaryOp::kAnd:
      case Ast::BinaryOp::kOr:
        break;
    }
    Fail("corrupt expression tree");
  }

  int64_t EvaluateCall(const Ast::Node& node) const {
    switch (node.function) {
      case Ast::Function::kMin:
      case Ast::Function::kMax: {
        int64_t result = Evaluate(node.operands[0]);
        for (size_t i = 1; i < node.operands.size(); ++i) {
          const int64_t value = Evaluate(node.operands[i]);
          result = node.function == Ast::Function::kMin ? std::min(result, value)
                                                        : std::max(result, value);
        }
        return result;
      }
      case Ast::Function::kCeilDiv: {
        const int64_t numerator = Evaluate(node.operands[0]);
        const int64_t denominator = Evaluate(node.operands[1]);
        if (denominator <= 0) {
          Fail("ceil_div divisor must be positive, got " + std::to_string(denominator));
        }
        // Division truncates toward zero, which already rounds negative quotients up; adding
        // denominator - 1 first would overflow near INT64_MAX.
        return numerator / denominator + (numerator % denominator > 0 ? 1 : 0);
      }
      case Ast::Function::kIsPow2: {
        const int64_t value = Evaluate(node.operands[0]);
        return value > 0 && std::has_single_bit(static_cast<uint64_t>(value));
      }
      case Ast::Function::kLog2: {
        const int64_t value = Evaluate(node.operands[0]);
        if (value <= 0) Fail("log2 argument must be positive, got " + std::to_string(value));
        return static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(value))) - 1;
      }
    }
    Fail("corrupt expression tree");
  }

  const Ast& ast_;
  const Bindings& bindings_;
  const std::string& text_;
};

// Renders an expression with every subtree whose names are all bound replaced by its value.
class Folder {
 public:
  Folder(const Ast& ast, const Bindings& bindings, const std::string& text)
      : ast_(ast), bindings_(bindings), evaluator_(ast, bindings, text) {}

  std::string Fold(size_t index) const {
    if (Bound(index)) return std::to_string(evaluator_.Evaluate(index));
    const Ast::Node& node = ast_.nodes[index];
    switch (node.kind) {
      case Ast::Kind::kLiteral:
        return std::to_string(node.value);
      case Ast::Kind::kName:
        return node.name;
      case Ast::Kind::kNegate:
        return "-(" + Fold(node.operands[0]) + ")";
      case Ast::Kind::kNot:
        return "!(" + Fold(node.operands[0]) + ")";
      case Ast::Kind::kConditional:
        if (Bound(node.operands[0])) {
          return Fold(node.operands[evaluator_.Evaluate(node.operands[0]) != 0 ? 1 : 2]);
        }
        return "(" + Fold(node.operands[0]) + " ? " + Fold(node.operands[1]) + " : " +
               Fold(node.operands[2]) + ")";
      case Ast::Kind::kBinary:
        return "(" + Fold(node.operands[0]) + " " + std::string(SymbolOf(node.op)) + " " +
               Fold(node.operands[1]) + ")";
      case Ast::Kind::kCall: {
        std::string text;
        for (const FunctionInfo& info : kFunctions) {
          if (info.function == node.function) text = std::string(info.name);
        }
        text += "(";
        for (size_t i = 0; i < node.operands.size(); ++i) {
          text += (i > 0 ? ", " : "") + Fold(node.operands[i]);
        }
        return text + ")";
      }
    }
    return "?";
  }

 private:
  bool Bound(size_t index) const {
    const Ast::Node& node = ast_.nodes[index];
    if (node.kind == Ast::Kind::kName) return bindings_.find(node.name) != bindings_.end();
    for (size_t operand : node.operands) {
      if (!Bound(operand)) return false;
    }
    return true;
  }

  const Ast& ast_;
  const Bindings& bindings_;
  Evaluator evaluator_;
};

}  // namespace

Expression::Expression(std::string text, std::shared_ptr<const internal::ExpressionAst> ast)
    : text_(std::move(text)), ast_(std::move(ast)) {}

Expression::Expression() {
  // Shared so that default-constructing arrays of expressions does not parse each time.
  static const Expression* const kZero = new Expression(Parse("0"));
  *this = *kZero;
}

Expression Expression::Parse(std::string_view text) {
  return Expression(std::string(text), std::make_shared<const Ast>(Parser(text).Parse()));
}

int64_t Expression::Evaluate(const Bindings& bindings) const {
  return Evaluator(*ast_, bindings, text_).Evaluate(ast_->root);
}

std::string Expression::Fold(const Bindings& bindings) const {
  return Folder(*ast_, bindings, text_).Fold(ast_->root);
}

std::set<std::string> Expression::Identifiers() const { return ast_->identifiers; }

std::optional<Expression::UpperBound> Expression::AsUpperBound() const {
  const Ast::Node& root = ast_->nodes[ast_->root];
  if (root.kind != Ast::Kind::kBinary) return std::nullopt;
  const bool less = root.op == Ast::BinaryOp::kLt || root.op == Ast::BinaryOp::kLe;
  const bool greater = root.op == Ast::BinaryOp::kGt || root.op == Ast::BinaryOp::kGe;
  if (!less && !greater) return std::nullopt;
  // Each side as an expression of its own: its text rendered from the tree (with nothing
  // bound, only constant parts fold) and parsed again.
  const Bindings nothing;
  const auto side = [&](size_t operand) {
    return Parse(Folder(*ast_, nothing, text_).Fold(root.operands[operand]));
  };
  return less ? UpperBound{side(0), side(1)} : UpperBound{side(1), side(0)};
}

}  // namespace evo

// The dispatch table's evaluator (JSON, expressions, the rule, a call's launches) and the
// launcher over the CUDA driver. The rule and the expression language are the Python export's
// (_rule.py) line for line, messages included: evo's tests compare both over many calls.
#include "evo_attention.h"

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace evo_attention {
namespace data {
// evo_attention_data.cc (generated): the table and the cubins.
extern const char kTable[];
extern const size_t kTableSize;
struct Cubin {
  const char* path;
  const unsigned char* bytes;
  size_t size;
};
extern const Cubin kCubins[];
extern const size_t kCubinCount;
}  // namespace data

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr const char* kRuntimeParams[] = {"B", "H", "H_kv", "S_q", "S_kv"};

// ---------------------------------------------------------------------------------------------
// JSON: the subset table.json uses (objects keep their order).

struct Json {
  enum class Kind { kNull, kBool, kInt, kDouble, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json& operator[](const std::string& key) const {
    for (const auto& [name, value] : members) {
      if (name == key) return value;
    }
    throw std::runtime_error("evo_attention: the table lacks \"" + key + "\"");
  }
  bool Has(const std::string& key) const {
    return std::any_of(members.begin(), members.end(),
                       [&](const auto& member) { return member.first == key; });
  }
  int64_t Int() const {
    if (kind != Kind::kInt) throw std::runtime_error("evo_attention: the table is malformed");
    return integer;
  }
  const std::string& Str() const {
    if (kind != Kind::kString) throw std::runtime_error("evo_attention: the table is malformed");
    return text;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  Json Parse() {
    Json value = Value();
    Skip();
    if (pos_ != text_.size()) Fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error("evo_attention: the embedded table is not JSON (" + what +
                             " at byte " + std::to_string(pos_) + ")");
  }
  void Skip() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
  }
  bool Accept(char c) {
    Skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Accept(c)) Fail(std::string("expected '") + c + "'");
  }
  bool Word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Json Value() {
    Skip();
    if (pos_ >= text_.size()) Fail("unexpected end");
    Json value;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      value.kind = Json::Kind::kObject;
      if (Accept('}')) return value;
      do {
        Skip();
        std::string key = String();
        Expect(':');
        value.members.emplace_back(std::move(key), Value());
      } while (Accept(','));
      Expect('}');
    } else if (c == '[') {
      ++pos_;
      value.kind = Json::Kind::kArray;
      if (Accept(']')) return value;
      do {
        value.items.push_back(Value());
      } while (Accept(','));
      Expect(']');
    } else if (c == '"') {
      value.kind = Json::Kind::kString;
      value.text = String();
    } else if (Word("true") || Word("false")) {
      value.kind = Json::Kind::kBool;
      value.boolean = text_[pos_ - 1] == 'e' && text_[pos_ - 2] == 'u';
    } else if (Word("null")) {
      value.kind = Json::Kind::kNull;
    } else {
      Number(value);
    }
    return value;
  }

  std::string String() {
    if (pos_ >= text_.size() || text_[pos_] != '"') Fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) Fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) Fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (pos_ + 4 > text_.size()) Fail("short \\u escape");
          const uint32_t code =
              static_cast<uint32_t>(std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16));
          pos_ += 4;
          // UTF-8 of a code point of the basic plane (the table holds ASCII and such text).
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xc0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3f));
          } else {
            out += static_cast<char>(0xe0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (code & 0x3f));
          }
          break;
        }
        default:
          out += e;  // \" \\ \/
      }
    }
  }

  void Number(Json& value) {
    const size_t start = pos_;
    bool fraction = false;
    while (pos_ < text_.size() && std::strchr("+-0123456789.eE", text_[pos_]) != nullptr) {
      fraction = fraction || std::strchr(".eE", text_[pos_]) != nullptr;
      ++pos_;
    }
    if (pos_ == start) Fail("unexpected character");
    const std::string digits(text_.substr(start, pos_ - start));
    if (fraction) {
      value.kind = Json::Kind::kDouble;
      value.number = std::strtod(digits.c_str(), nullptr);
    } else {
      value.kind = Json::Kind::kInt;
      value.integer = std::stoll(digits);
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Expressions: evo's manifest language, int64 with C semantics, errors worded as _rule.py's.

class ExpressionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

using Env = std::map<std::string, int64_t, std::less<>>;

struct Node {
  enum class Kind { kLiteral, kName, kNegate, kNot, kBinary, kConditional, kCall };
  Kind kind = Kind::kLiteral;
  int64_t value = 0;
  std::string name;  // kName; the operator (kBinary) or the function (kCall)
  std::vector<std::unique_ptr<Node>> operands;
};

struct Token {
  enum class Kind { kNumber, kName, kSymbol, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  int64_t value = 0;
  size_t column = 0;
};

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

class ExpressionParser {
 public:
  explicit ExpressionParser(const std::string& text) : text_(text) { Tokenize(); }

  std::unique_ptr<Node> Parse() {
    if (Peek().kind == Token::Kind::kEnd) Fail("empty expression");
    auto node = Conditional();
    if (Peek().kind != Token::Kind::kEnd) Fail("unexpected token after the end of the expression");
    return node;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw ExpressionError("expression '" + text_ + "': " + what + " at column " +
                          std::to_string(tokens_[next_].column));
  }

  void Tokenize() {
    static const char* const kSymbols[] = {"||", "&&", "==", "!=", "<=", ">=", "?", ":", "<", ">",
                                           "+",  "-",  "*",  "/",  "%",  "!",  "(", ")", ","};
    size_t pos = 0;
    while (true) {
      while (pos < text_.size() && std::strchr(" \t\r\n", text_[pos]) != nullptr) ++pos;
      Token token;
      token.column = pos + 1;
      if (pos == text_.size()) {
        tokens_.push_back(token);
        return;
      }
      const size_t start = pos;
      const char c = text_[pos];
      if (c >= '0' && c <= '9') {
        while (pos < text_.size() && IsNameChar(text_[pos])) ++pos;
        token.text = text_.substr(start, pos - start);
        if (!std::all_of(token.text.begin(), token.text.end(),
                         [](char d) { return d >= '0' && d <= '9'; })) {
          throw ExpressionError("expression '" + text_ + "': malformed number '" + token.text +
                                "' at column " + std::to_string(start + 1));
        }
        errno = 0;
        const unsigned long long value = std::strtoull(token.text.c_str(), nullptr, 10);
        if (errno == ERANGE || value > static_cast<unsigned long long>(INT64_MAX)) {
          throw ExpressionError("expression '" + text_ + "': integer literal '" + token.text +
                                "' is out of range at column " + std::to_string(start + 1));
        }
        token.kind = Token::Kind::kNumber;
        token.value = static_cast<int64_t>(value);
      } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
        while (pos < text_.size() && IsNameChar(text_[pos])) ++pos;
        token.kind = Token::Kind::kName;
        token.text = text_.substr(start, pos - start);
      } else {
        for (const char* symbol : kSymbols) {
          const size_t length = std::strlen(symbol);
          if (text_.compare(pos, length, symbol) == 0) {
            token.kind = Token::Kind::kSymbol;
            token.text = symbol;
            pos += length;
            break;
          }
        }
        if (token.kind != Token::Kind::kSymbol) {
          throw ExpressionError("expression '" + text_ + "': unexpected character '" +
                                std::string(1, c) + "' at column " + std::to_string(start + 1));
        }
      }
      tokens_.push_back(token);
    }
  }

  const Token& Peek() const { return tokens_[next_]; }
  bool IsSymbol(const char* symbol) const {
    return Peek().kind == Token::Kind::kSymbol && Peek().text == symbol;
  }
  void Expect(const char* symbol) {
    if (!IsSymbol(symbol)) Fail(std::string("expected '") + symbol + "'");
    ++next_;
  }

  static int Precedence(const std::string& op) {
    static const std::map<std::string, int> kPrecedence = {
        {"||", 1}, {"&&", 2}, {"==", 3}, {"!=", 3}, {"<", 4}, {"<=", 4}, {">", 4},
        {">=", 4}, {"+", 5},  {"-", 5},  {"*", 6},  {"/", 6}, {"%", 6}};
    const auto found = kPrecedence.find(op);
    return found == kPrecedence.end() ? 0 : found->second;
  }

  std::unique_ptr<Node> Conditional() {
    auto condition = Binary(1);
    if (!IsSymbol("?")) return condition;
    ++next_;
    auto node = std::make_unique<Node>();
    node->kind = Node::Kind::kConditional;
    node->operands.push_back(std::move(condition));
    node->operands.push_back(Conditional());
    Expect(":");
    node->operands.push_back(Conditional());
    return node;
  }

  std::unique_ptr<Node> Binary(int precedence) {
    if (precedence > 6) return Unary();
    auto lhs = Binary(precedence + 1);
    while (Peek().kind == Token::Kind::kSymbol && Precedence(Peek().text) == precedence) {
      auto node = std::make_unique<Node>();
      node->kind = Node::Kind::kBinary;
      node->name = Peek().text;
      ++next_;
      node->operands.push_back(std::move(lhs));
      node->operands.push_back(Binary(precedence + 1));
      lhs = std::move(node);
    }
    return lhs;
  }

  std::unique_ptr<Node> Unary() {
    if (IsSymbol("!") || IsSymbol("-")) {
      auto node = std::make_unique<Node>();
      node->kind = Peek().text == "!" ? Node::Kind::kNot : Node::Kind::kNegate;
      ++next_;
      node->operands.push_back(Unary());
      return node;
    }
    return Primary();
  }

  std::unique_ptr<Node> Primary() {
    const Token token = Peek();
    auto node = std::make_unique<Node>();
    if (token.kind == Token::Kind::kNumber) {
      ++next_;
      node->kind = Node::Kind::kLiteral;
      node->value = token.value;
      return node;
    }
    if (token.kind == Token::Kind::kName) {
      ++next_;
      if (!IsSymbol("(")) {
        node->kind = Node::Kind::kName;
        node->name = token.text;
        return node;
      }
      static const std::map<std::string, std::pair<size_t, size_t>> kFunctions = {
          {"min", {2, SIZE_MAX}},
          {"max", {2, SIZE_MAX}},
          {"ceil_div", {2, 2}},
          {"is_pow2", {1, 1}},
          {"log2", {1, 1}}};
      const auto function = kFunctions.find(token.text);
      if (function == kFunctions.end()) {
        --next_;
        Fail("unknown function '" + token.text + "'");
      }
      ++next_;
      node->kind = Node::Kind::kCall;
      node->name = token.text;
      if (IsSymbol(")")) {
        ++next_;
      } else {
        while (true) {
          node->operands.push_back(Conditional());
          if (IsSymbol(")")) {
            ++next_;
            break;
          }
          Expect(",");
        }
      }
      const auto [low, high] = function->second;
      const size_t count = node->operands.size();
      if (count < low || count > high) {
        Fail(token.text + " takes " +
             (low == high ? std::to_string(low) : "at least " + std::to_string(low)) + " argument" +
             (low != 1 ? "s" : "") + ", got " + std::to_string(count));
      }
      return node;
    }
    if (IsSymbol("(")) {
      ++next_;
      auto inner = Conditional();
      Expect(")");
      return inner;
    }
    Fail("expected a number, a name or '('");
  }

  const std::string& text_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
};

class Evaluator {
 public:
  Evaluator(const Env& env, const std::string& text) : env_(env), text_(text) {}

  int64_t Evaluate(const Node& node) const {
    switch (node.kind) {
      case Node::Kind::kLiteral:
        return node.value;
      case Node::Kind::kName: {
        const auto found = env_.find(node.name);
        if (found == env_.end()) Fail("unknown name '" + node.name + "'");
        return found->second;
      }
      case Node::Kind::kNegate: {
        const int64_t value = Evaluate(*node.operands[0]);
        int64_t result = 0;
        if (__builtin_sub_overflow(int64_t{0}, value, &result)) {
          Fail("integer overflow in -(" + std::to_string(value) + ")");
        }
        return result;
      }
      case Node::Kind::kNot:
        return Evaluate(*node.operands[0]) == 0 ? 1 : 0;
      case Node::Kind::kConditional:
        return Evaluate(*node.operands[Evaluate(*node.operands[0]) != 0 ? 1 : 2]);
      case Node::Kind::kBinary:
        return Binary(node);
      case Node::Kind::kCall:
        return Call(node);
    }
    Fail("corrupt expression");
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw ExpressionError(what + " in '" + text_ + "'");
  }
  [[noreturn]] void Overflow(int64_t a, const std::string& op, int64_t b) const {
    Fail("integer overflow in " + std::to_string(a) + " " + op + " " + std::to_string(b));
  }

  int64_t Divide(int64_t a, int64_t b) const {
    if (b == 0) Fail("division by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1) Overflow(a, "/", b);
    return a / b;
  }
  int64_t Modulo(int64_t a, int64_t b) const {
    if (b == 0) Fail("modulo by zero");
    if (b == -1) return 0;
    return a % b;
  }

  int64_t Binary(const Node& node) const {
    const std::string& op = node.name;
    const int64_t lhs = Evaluate(*node.operands[0]);
    if (op == "&&") return lhs != 0 && Evaluate(*node.operands[1]) != 0 ? 1 : 0;
    if (op == "||") return lhs != 0 || Evaluate(*node.operands[1]) != 0 ? 1 : 0;
    const int64_t rhs = Evaluate(*node.operands[1]);
    int64_t result = 0;
    if (op == "==") return lhs == rhs;
    if (op == "!=") return lhs != rhs;
    if (op == "<") return lhs < rhs;
    if (op == "<=") return lhs <= rhs;
    if (op == ">") return lhs > rhs;
    if (op == ">=") return lhs >= rhs;
    if (op == "+") {
      if (__builtin_add_overflow(lhs, rhs, &result)) Overflow(lhs, op, rhs);
      return result;
    }
    if (op == "-") {
      if (__builtin_sub_overflow(lhs, rhs, &result)) Overflow(lhs, op, rhs);
      return result;
    }
    if (op == "*") {
      if (__builtin_mul_overflow(lhs, rhs, &result)) Overflow(lhs, op, rhs);
      return result;
    }
    if (op == "/") return Divide(lhs, rhs);
    return Modulo(lhs, rhs);
  }

  int64_t Call(const Node& node) const {
    const std::string& name = node.name;
    if (name == "min" || name == "max") {
      int64_t result = Evaluate(*node.operands[0]);
      for (size_t i = 1; i < node.operands.size(); ++i) {
        const int64_t value = Evaluate(*node.operands[i]);
        result = name == "min" ? std::min(result, value) : std::max(result, value);
      }
      return result;
    }
    if (name == "ceil_div") {
      const int64_t numerator = Evaluate(*node.operands[0]);
      const int64_t denominator = Evaluate(*node.operands[1]);
      if (denominator <= 0) {
        Fail("ceil_div divisor must be positive, got " + std::to_string(denominator));
      }
      return Divide(numerator, denominator) + (Modulo(numerator, denominator) > 0 ? 1 : 0);
    }
    const int64_t value = Evaluate(*node.operands[0]);
    if (name == "is_pow2") return value > 0 && std::has_single_bit(static_cast<uint64_t>(value));
    if (value <= 0) Fail("log2 argument must be positive, got " + std::to_string(value));
    return static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(value))) - 1;
  }

  const Env& env_;
  const std::string& text_;
};

// A table expression: an integer, or a text parsed once.
class Expr {
 public:
  explicit Expr(const Json& json) {
    if (json.kind == Json::Kind::kInt) {
      constant_ = json.integer;
    } else {
      text_ = json.Str();
      root_ = ExpressionParser(text_).Parse();
    }
  }
  int64_t Evaluate(const Env& env) const {
    if (!root_) return constant_;
    return Evaluator(env, text_).Evaluate(*root_);
  }
  const std::string& text() const { return text_; }

 private:
  int64_t constant_ = 0;
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// ---------------------------------------------------------------------------------------------
// The table.

struct Param {
  std::string name;
  std::string kind;  // input, output, scratch, scalar, tensor_map
  std::string dtype;
  std::string role;  // q, k, v, out, q_scale, ... (inputs and outputs)
  std::vector<Expr> shape;
  std::vector<Expr> value;  // scalars: one
  std::string tensor;       // tensor maps
  std::vector<Expr> box;
  std::string swizzle, interleave, l2_promotion, fill;
};

struct Launch {
  std::string entry;
  std::vector<Expr> when;  // empty: always
  std::vector<Expr> grid;
  int64_t block[3] = {1, 1, 1};
  int64_t cluster[3] = {1, 1, 1};  // thread-block cluster extents; all 1 is a plain launch
  int64_t dynamic_smem = 0;
  bool needs_opt_in = false;
  std::vector<Param> params;

  bool clustered() const { return cluster[0] * cluster[1] * cluster[2] > 1; }
};

struct Scratch {
  std::string name;
  std::string dtype;
  std::vector<Expr> shape;
  std::string zero;
};

struct Constraint {
  std::string name;
  Expr expr;
  std::string doc;
};

struct Kernel {
  std::string target;
  int sm = 0;
  bool arch_specific = false;
  int64_t D = 0;
  int64_t causal = 0;
  std::string q_dtype, kv_dtype, out_dtype;
  std::vector<std::string> scales;
  std::vector<std::pair<std::string, Expr>> derived;
  std::vector<Constraint> constraints;
  std::vector<Launch> launches;
  std::vector<Scratch> scratch;
  std::vector<std::string> call;  // "memset NAME" or "launch ENTRY"
  std::string cubin;
};

struct Entry {
  Env shape;
  size_t kernel = 0;
  std::string template_name;
  int64_t run = 0;
  double score_us = 0;
};

struct Table {
  std::vector<Kernel> kernels;
  std::vector<Entry> entries;
};

std::vector<Expr> Exprs(const Json& array) {
  std::vector<Expr> out;
  for (const Json& item : array.items) out.emplace_back(item);
  return out;
}

Param ParamFrom(const Json& json) {
  Param param;
  param.name = json["name"].Str();
  param.kind = json["kind"].Str();
  param.dtype = json["dtype"].Str();
  if (json.Has("role")) param.role = json["role"].Str();
  if (param.kind == "scalar") {
    param.value.emplace_back(json["value"]);
  } else if (param.kind == "tensor_map") {
    param.tensor = json["tensor"].Str();
    param.box = Exprs(json["box"]);
    param.swizzle = json["swizzle"].Str();
    param.interleave = json["interleave"].Str();
    param.l2_promotion = json["l2_promotion"].Str();
    param.fill = json["fill"].Str();
  } else {
    param.shape = Exprs(json["shape"]);
  }
  return param;
}

Table LoadTable() {
  const Json root = JsonParser(std::string_view(data::kTable, data::kTableSize)).Parse();
  if (root["format"].Str() != "evo-dispatch-1") {
    throw std::runtime_error("evo_attention: the embedded table is not of format evo-dispatch-1");
  }
  Table table;
  for (const Json& k : root["kernels"].items) {
    Kernel kernel;
    kernel.target = k["target"].Str();
    kernel.sm = static_cast<int>(k["sm"].Int());
    kernel.arch_specific = k["arch_specific"].boolean;
    const Json& key = k["key"];
    kernel.D = key["D"].Int();
    kernel.causal = key["causal"].Int();
    kernel.q_dtype = key["q_dtype"].Str();
    kernel.kv_dtype = key["kv_dtype"].Str();
    kernel.out_dtype = key["out_dtype"].Str();
    for (const Json& scale : k["scales"].items) kernel.scales.push_back(scale.Str());
    for (const Json& d : k["derived"].items) {
      kernel.derived.emplace_back(d.items.at(0).Str(), Expr(d.items.at(1)));
    }
    for (const Json& c : k["constraints"].items) {
      kernel.constraints.push_back({c["name"].Str(), Expr(c["expr"]), c["doc"].Str()});
    }
    for (const Json& l : k["launches"].items) {
      Launch launch;
      launch.entry = l["entry"].Str();
      if (l.Has("when")) launch.when.emplace_back(l["when"]);
      launch.grid = Exprs(l["grid"]);
      for (size_t i = 0; i < 3; ++i) launch.block[i] = l["block"].items.at(i).Int();
      // Tables from before clusters have no "cluster": plain launches.
      if (l.Has("cluster")) {
        const std::vector<Json>& extents = l["cluster"].items;
        if (extents.size() != 3 || std::any_of(extents.begin(), extents.end(), [](const Json& e) {
              return e.kind != Json::Kind::kInt;
            })) {
          throw std::runtime_error("evo_attention: " + launch.entry +
                                   "'s cluster is not three integer extents");
        }
        for (size_t i = 0; i < 3; ++i) launch.cluster[i] = extents[i].integer;
        const auto [least, most] =
            std::minmax({launch.cluster[0], launch.cluster[1], launch.cluster[2]});
        // Bounded extents first: their product cannot overflow then.
        if (least < 1 || most > 8 ||
            launch.cluster[0] * launch.cluster[1] * launch.cluster[2] > 8) {
          throw std::runtime_error(
              "evo_attention: " + launch.entry + "'s cluster " + std::to_string(launch.cluster[0]) +
              "x" + std::to_string(launch.cluster[1]) + "x" + std::to_string(launch.cluster[2]) +
              " is not 1 to 8 CTAs of extents >= 1");
        }
      }
      launch.dynamic_smem = l["dynamic_smem_bytes"].Int();
      launch.needs_opt_in = l["needs_dynamic_smem_opt_in"].boolean;
      for (const Json& p : l["params"].items) launch.params.push_back(ParamFrom(p));
      kernel.launches.push_back(std::move(launch));
    }
    for (const Json& s : k["scratch"].items) {
      kernel.scratch.push_back(
          {s["name"].Str(), s["dtype"].Str(), Exprs(s["shape"]), s["zero"].Str()});
    }
    for (const Json& step : k["call"].items) {
      kernel.call.push_back(step.Has("memset") ? "memset " + step["memset"].Str()
                                               : "launch " + step["launch"].Str());
    }
    kernel.cubin = k["cubin"].Str();
    table.kernels.push_back(std::move(kernel));
  }
  for (const Json& e : root["entries"].items) {
    Entry entry;
    for (const char* name : kRuntimeParams) entry.shape[name] = e["shape"][name].Int();
    entry.kernel = static_cast<size_t>(e["kernel"].Int());
    entry.template_name = e["template"].Str();
    entry.run = e["run"].Int();
    const Json& score = e["score_us"];
    entry.score_us =
        score.kind == Json::Kind::kInt ? static_cast<double>(score.integer) : score.number;
    table.entries.push_back(std::move(entry));
  }
  return table;
}

const Table& TheTable() {
  static const Table table = LoadTable();
  return table;
}

// ---------------------------------------------------------------------------------------------
// The rule.

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kE4M3:
      return "fp8e4m3";
  }
  return "?";
}

std::string DescribeKey(int64_t D, bool causal, const std::string& q, const std::string& kv) {
  return "D=" + std::to_string(D) + ", " + (causal ? "causal" : "not causal") + ", q " + q +
         ", k/v " + kv;
}

std::string DescribeKey(const Shape& shape) {
  return DescribeKey(shape.D, shape.causal, DTypeName(shape.q_dtype), DTypeName(shape.kv_dtype));
}

std::string DescribeShape(const Env& shape) {
  std::string text;
  for (const char* name : kRuntimeParams) {
    text += (text.empty() ? "" : " ") + std::string(name) + "=" + std::to_string(shape.at(name));
  }
  return text;
}

// A Shape left at H_kv = 0 has a key/value head per query head: a default of 1 would have
// read one KV head for all of them, a wrong result with no error.
int64_t KvHeads(const Shape& shape) { return shape.H_kv == 0 ? shape.H : shape.H_kv; }

Env RuntimeOf(const Shape& shape) {
  return {{"B", shape.B},
          {"H", shape.H},
          {"H_kv", KvHeads(shape)},
          {"S_q", shape.S_q},
          {"S_kv", shape.S_kv}};
}

void CheckCall(const Shape& shape) {
  const Env values = RuntimeOf(shape);
  for (const char* name : kRuntimeParams) {
    const int64_t value = values.at(name);
    if (value < 1 || value > kInt32Max) {
      throw DispatchError(std::string(name) + "=" + std::to_string(value) +
                          " is outside [1, 2^31 - 1]");
    }
  }
  if (shape.D < 1 || shape.D > kInt32Max) {
    throw DispatchError("D=" + std::to_string(shape.D) + " is outside [1, 2^31 - 1]");
  }
  if (shape.H % KvHeads(shape) != 0) {
    throw DispatchError("H=" + std::to_string(shape.H) +
                        " query heads are not a multiple of H_kv=" +
                        std::to_string(KvHeads(shape)) + " key/value heads");
  }
}

bool RunsOn(const Kernel& kernel, int sm) {
  if (kernel.arch_specific) return sm == kernel.sm;
  return sm / 10 == kernel.sm / 10 && sm >= kernel.sm;
}

Env Bindings(const Kernel& kernel, const Shape& shape) {
  Env env = RuntimeOf(shape);
  for (const auto& [name, expr] : kernel.derived) env[name] = expr.Evaluate(env);
  return env;
}

// Why the kernel cannot serve the call, or empty.
std::string Violation(const Kernel& kernel, const Shape& shape) {
  try {
    const Env env = Bindings(kernel, shape);
    for (const Constraint& constraint : kernel.constraints) {
      if (constraint.expr.Evaluate(env) == 0) {
        return constraint.name + " (" + constraint.expr.text() + "): " + constraint.doc;
      }
    }
  } catch (const ExpressionError& error) {
    return error.what();
  }
  return "";
}

int64_t HalfOctaves(int64_t x) {
  x = std::min(std::max<int64_t>(x, 1), kInt32Max);
  return static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(x * x))) - 1;
}

int64_t Distance(const Env& call, const Env& tuned) {
  const auto features = [](const Env& s) {
    return std::vector<int64_t>{s.at("S_q"), s.at("S_kv"), s.at("B") * s.at("H"),
                                s.at("H") / s.at("H_kv")};
  };
  const std::vector<int64_t> a = features(call);
  const std::vector<int64_t> b = features(tuned);
  int64_t sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(HalfOctaves(a[i]) - HalfOctaves(b[i]));
  return sum;
}

Choice PickFrom(const Table& table, const Shape& shape, int sm) {
  CheckCall(shape);
  std::vector<size_t> on_device;
  for (size_t i = 0; i < table.entries.size(); ++i) {
    if (RunsOn(table.kernels[table.entries[i].kernel], sm)) on_device.push_back(i);
  }
  if (on_device.empty()) {
    std::set<std::string> targets;
    for (const Kernel& kernel : table.kernels) targets.insert(kernel.target);
    std::string list;
    for (const std::string& target : targets) list += (list.empty() ? "" : ", ") + target;
    throw DispatchError("no kernel of this table runs on sm_" + std::to_string(sm) +
                        ": it holds kernels for " + list);
  }
  std::vector<size_t> matching;
  for (size_t i : on_device) {
    const Kernel& kernel = table.kernels[table.entries[i].kernel];
    if (kernel.D == shape.D && kernel.causal == (shape.causal ? 1 : 0) &&
        kernel.q_dtype == DTypeName(shape.q_dtype) &&
        kernel.kv_dtype == DTypeName(shape.kv_dtype)) {
      matching.push_back(i);
    }
  }
  if (matching.empty()) {
    std::vector<std::string> keys;
    for (size_t i : on_device) {
      const Kernel& kernel = table.kernels[table.entries[i].kernel];
      const std::string key =
          DescribeKey(kernel.D, kernel.causal != 0, kernel.q_dtype, kernel.kv_dtype);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
    std::string list;
    for (const std::string& key : keys) list += (list.empty() ? "" : "; ") + key;
    throw DispatchError("no tuned kernel for " + DescribeKey(shape) + " on sm_" +
                        std::to_string(sm) + ": the table has " + list +
                        ". Tune this case (evo tune) and export again");
  }
  std::vector<size_t> valid;
  std::string refusals;
  for (size_t i : matching) {
    const Entry& entry = table.entries[i];
    const std::string reason = Violation(table.kernels[entry.kernel], shape);
    if (reason.empty()) {
      valid.push_back(i);
    } else {
      refusals += (refusals.empty() ? "" : "; ") + std::string("the kernel tuned at ") +
                  DescribeShape(entry.shape) + " needs " + reason;
    }
  }
  const Env call = RuntimeOf(shape);
  if (valid.empty()) {
    throw DispatchError("no tuned kernel for " + DescribeKey(shape) + " on sm_" +
                        std::to_string(sm) + " is valid for " + DescribeShape(call) + ": " +
                        refusals);
  }
  Choice choice;
  bool found = false;
  for (size_t i : valid) {
    if (table.entries[i].shape == call) {
      choice.entry = i;
      choice.exact = true;
      found = true;
      break;
    }
  }
  if (!found) {
    int64_t best = -1;
    for (size_t i : valid) {
      const int64_t distance = Distance(call, table.entries[i].shape);
      if (best < 0 || distance < best) {
        best = distance;
        choice.entry = i;
      }
    }
  }
  const Entry& entry = table.entries[choice.entry];
  choice.description = entry.template_name + " tuned at " + DescribeShape(entry.shape) + " (run " +
                       std::to_string(entry.run) + ")" + (choice.exact ? "" : ", nearest");
  return choice;
}

// ---------------------------------------------------------------------------------------------
// A call's launches, evaluated.

int64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "i64") return 8;
  if (dtype == "fp8e4m3" || dtype == "fp8e5m2") return 1;
  throw std::runtime_error("evo_attention: unknown dtype " + dtype);
}

std::string List(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    text += (i > 0 ? "," : "") + std::to_string(values[i]);
  }
  return text + "]";
}

struct PlannedArg {
  const Param* param = nullptr;
  int64_t value = 0;           // scalars
  std::vector<int64_t> shape;  // tensors
  std::vector<int64_t> box;    // tensor maps
};

struct PlannedScratch {
  const Scratch* spec = nullptr;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

struct PlannedStep {
  std::string memset;  // or a launch:
  const Launch* launch = nullptr;
  int64_t grid[3] = {1, 1, 1};
  std::vector<PlannedArg> args;
};

struct Plan {
  std::vector<PlannedScratch> scratch;
  std::vector<PlannedStep> steps;
};

std::vector<int64_t> EvaluateAll(const std::vector<Expr>& exprs, const Env& env) {
  std::vector<int64_t> values;
  for (const Expr& expr : exprs) values.push_back(expr.Evaluate(env));
  return values;
}

Plan PlanCall(const Kernel& kernel, const Shape& shape, int num_sms,
              const std::map<std::string, int>& ctas_per_sm) {
  const Env env = Bindings(kernel, shape);
  // Scratch may be sized by the device, as a persistent grid is (a row per CTA).
  Env scratch_env = env;
  scratch_env["NUM_SMS"] = num_sms;
  Plan plan;
  for (const Scratch& spec : kernel.scratch) {
    PlannedScratch planned{&spec, EvaluateAll(spec.shape, scratch_env), DtypeBytes(spec.dtype)};
    for (int64_t extent : planned.shape) planned.bytes *= extent;
    plan.scratch.push_back(std::move(planned));
  }
  for (const std::string& step : kernel.call) {
    PlannedStep planned;
    if (step.rfind("memset ", 0) == 0) {
      planned.memset = step.substr(7);
      plan.steps.push_back(std::move(planned));
      continue;
    }
    const std::string entry = step.substr(7);
    const Launch* launch = nullptr;
    for (const Launch& candidate : kernel.launches) {
      if (candidate.entry == entry) launch = &candidate;
    }
    if (launch == nullptr) throw std::runtime_error("evo_attention: the table lacks " + entry);
    if (!launch->when.empty() && launch->when[0].Evaluate(env) == 0) continue;
    planned.launch = launch;
    Env grid_env = env;
    grid_env["NUM_SMS"] = num_sms;
    grid_env["CTAS_PER_SM"] = ctas_per_sm.at(entry);
    const std::vector<int64_t> grid = EvaluateAll(launch->grid, grid_env);
    for (size_t i = 0; i < 3; ++i) {
      const int64_t extent = grid[i];
      const int64_t limit = i == 0 ? kInt32Max : 65535;
      if (extent < 1 || extent > limit) {
        throw DispatchError(entry + "'s grid[" + std::to_string(i) + "] is " +
                            std::to_string(extent) + " for " + DescribeShape(RuntimeOf(shape)) +
                            ", outside [1, " + std::to_string(limit) + "]");
      }
      if (extent % launch->cluster[i] != 0) {
        throw DispatchError(entry + "'s grid[" + std::to_string(i) + "] is " +
                            std::to_string(extent) + " for " + DescribeShape(RuntimeOf(shape)) +
                            ", not a multiple of its cluster's " +
                            std::to_string(launch->cluster[i]));
      }
      planned.grid[i] = extent;
    }
    for (const Param& param : launch->params) {
      PlannedArg arg;
      arg.param = &param;
      if (param.kind == "scalar") {
        arg.value = param.value[0].Evaluate(env);
        if (param.dtype == "i32" &&
            (arg.value < std::numeric_limits<int32_t>::min() || arg.value > kInt32Max)) {
          throw DispatchError(param.name + "=" + std::to_string(arg.value) +
                              " does not fit the i32 argument of " + entry);
        }
      } else if (param.kind == "tensor_map") {
        arg.box = EvaluateAll(param.box, env);
      } else {
        arg.shape = EvaluateAll(param.shape, param.kind == "scratch" ? scratch_env : env);
      }
      planned.args.push_back(std::move(arg));
    }
    plan.steps.push_back(std::move(planned));
  }
  return plan;
}

struct MapLayout {
  std::vector<uint64_t> dims;
  std::vector<uint64_t> strides;
  std::vector<uint32_t> box;
};

MapLayout EncodeLayout(const Param& map, const std::vector<int64_t>& box,
                       const std::vector<int64_t>& tensor_shape) {
  const int64_t element = DtypeBytes(map.dtype);
  MapLayout layout;
  const std::string what = "tensor map " + map.name;
  int64_t stride = element;
  for (size_t i = 0; i < tensor_shape.size(); ++i) {
    const int64_t extent = tensor_shape[tensor_shape.size() - 1 - i];
    if (extent < 1 || extent > (int64_t{1} << 32)) {
      throw DispatchError(what + ": dimension " + std::to_string(i) + " is " +
                          std::to_string(extent) + ", outside [1, 2^32]");
    }
    if (i > 0) {
      if (stride % 16 != 0) {
        throw DispatchError(what + ": the stride of dimension " + std::to_string(i) + " is " +
                            std::to_string(stride) + " bytes, not a multiple of 16");
      }
      layout.strides.push_back(static_cast<uint64_t>(stride));
    }
    layout.dims.push_back(static_cast<uint64_t>(extent));
    stride *= extent;
  }
  if (box.size() != layout.dims.size()) {
    throw DispatchError(what + ": " + std::to_string(box.size()) +
                        " box extents for a tensor of rank " + std::to_string(layout.dims.size()));
  }
  for (size_t i = 0; i < box.size(); ++i) {
    if (box[i] < 1 || box[i] > 256) {
      throw DispatchError(what + ": box[" + std::to_string(i) + "] is " + std::to_string(box[i]) +
                          ", outside [1, 256]");
    }
    layout.box.push_back(static_cast<uint32_t>(box[i]));
  }
  const int64_t inner = box[0] * element;
  if (map.interleave == "none") {
    const int64_t span = map.swizzle == "32B"    ? 32
                         : map.swizzle == "64B"  ? 64
                         : map.swizzle == "128B" ? 128
                                                 : 0;
    if (inner % 16 != 0 || (span != 0 && inner > span)) {
      throw DispatchError(what + ": the box's inner extent is " + std::to_string(inner) +
                          " bytes, not a multiple of 16 within the " + map.swizzle +
                          " swizzle's span");
    }
  } else if (layout.dims.size() < 3) {
    throw DispatchError(what + ": an interleaved map needs at least three dimensions");
  }
  return layout;
}

std::vector<int64_t> Signed(const std::vector<uint64_t>& values) {
  return {values.begin(), values.end()};
}

// ---------------------------------------------------------------------------------------------
// The CUDA driver, loaded at run time.

struct Driver {
  decltype(&cuInit) Init = nullptr;
  decltype(&cuGetErrorName) GetErrorName = nullptr;
  decltype(&cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&cuCtxGetDevice) CtxGetDevice = nullptr;
  decltype(&cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&cuModuleUnload) ModuleUnload = nullptr;
  decltype(&cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&cuOccupancyMaxActiveBlocksPerMultiprocessor) Occupancy = nullptr;
  decltype(&cuTensorMapEncodeTiled) TensorMapEncodeTiled = nullptr;
  decltype(&cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&cuLaunchKernelEx) LaunchKernelEx = nullptr;  // clusters
  decltype(&cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&cuMemAllocAsync) MemAllocAsync = nullptr;
  decltype(&cuMemFreeAsync) MemFreeAsync = nullptr;

  void Check(CUresult result, const std::string& what) const {
    if (result == CUDA_SUCCESS) return;
    const char* name = nullptr;
    GetErrorName(result, &name);
    throw std::runtime_error("evo_attention: " + what +
                             " failed: " + (name != nullptr ? name : std::to_string(result)));
  }
};

template <typename Function>
void Resolve(void* library, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (function == nullptr) {
    throw std::runtime_error(std::string("evo_attention: the CUDA driver lacks ") + symbol +
                             "; it is older than these kernels need");
  }
}

const Driver& TheDriver() {
  static std::mutex mutex;
  static std::unique_ptr<Driver> driver;
  std::lock_guard lock(mutex);
  if (driver) return *driver;
  // Kept loaded for the life of the process, like the modules loaded through it.
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    throw std::runtime_error(std::string("evo_attention: the CUDA driver (libcuda.so.1) could "
                                         "not be loaded: ") +
                             (why != nullptr ? why : "unknown reason"));
  }
  auto loaded = std::make_unique<Driver>();
  Resolve(library, "cuInit", loaded->Init);
  Resolve(library, "cuGetErrorName", loaded->GetErrorName);
  Resolve(library, "cuCtxGetCurrent", loaded->CtxGetCurrent);
  Resolve(library, "cuCtxGetDevice", loaded->CtxGetDevice);
  Resolve(library, "cuDeviceGetAttribute", loaded->DeviceGetAttribute);
  Resolve(library, "cuModuleLoadData", loaded->ModuleLoadData);
  Resolve(library, "cuModuleUnload", loaded->ModuleUnload);
  Resolve(library, "cuModuleGetFunction", loaded->ModuleGetFunction);
  Resolve(library, "cuFuncSetAttribute", loaded->FuncSetAttribute);
  Resolve(library, "cuOccupancyMaxActiveBlocksPerMultiprocessor", loaded->Occupancy);
  Resolve(library, "cuTensorMapEncodeTiled", loaded->TensorMapEncodeTiled);
  Resolve(library, "cuLaunchKernel", loaded->LaunchKernel);
  Resolve(library, "cuLaunchKernelEx", loaded->LaunchKernelEx);
  Resolve(library, "cuMemsetD8Async", loaded->MemsetD8Async);
  Resolve(library, "cuMemAllocAsync", loaded->MemAllocAsync);
  Resolve(library, "cuMemFreeAsync", loaded->MemFreeAsync);
  loaded->Check(loaded->Init(0), "cuInit");
  driver = std::move(loaded);
  return *driver;
}

CUtensorMapDataType MapDtype(const std::string& dtype) {
  if (dtype == "f16") return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (dtype == "bf16") return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if (dtype == "f32") return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if (dtype == "fp8e4m3" || dtype == "fp8e5m2") return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  throw std::runtime_error("evo_attention: no tensor maps of " + dtype);
}

CUtensorMapSwizzle MapSwizzle(const std::string& swizzle) {
  if (swizzle == "32B") return CU_TENSOR_MAP_SWIZZLE_32B;
  if (swizzle == "64B") return CU_TENSOR_MAP_SWIZZLE_64B;
  if (swizzle == "128B") return CU_TENSOR_MAP_SWIZZLE_128B;
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

CUtensorMapInterleave MapInterleave(const std::string& interleave) {
  if (interleave == "16B") return CU_TENSOR_MAP_INTERLEAVE_16B;
  if (interleave == "32B") return CU_TENSOR_MAP_INTERLEAVE_32B;
  return CU_TENSOR_MAP_INTERLEAVE_NONE;
}

CUtensorMapL2promotion MapL2(const std::string& promotion) {
  if (promotion == "64B") return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
  if (promotion == "128B") return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  if (promotion == "256B") return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  return CU_TENSOR_MAP_L2_PROMOTION_NONE;
}

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

Choice Pick(const Shape& shape, int sm) { return PickFrom(TheTable(), shape, sm); }

DType OutputDType(const Shape& shape, int sm) {
  const Table& table = TheTable();
  const Kernel& kernel = table.kernels[table.entries[PickFrom(table, shape, sm).entry].kernel];
  if (kernel.out_dtype == "bf16") return DType::kBF16;
  if (kernel.out_dtype == "fp8e4m3") return DType::kE4M3;
  return DType::kF16;
}

std::vector<TunedEntry> Entries() {
  const Table& table = TheTable();
  std::vector<TunedEntry> entries;
  for (const Entry& entry : table.entries) {
    const Kernel& kernel = table.kernels[entry.kernel];
    TunedEntry tuned;
    tuned.shape.B = entry.shape.at("B");
    tuned.shape.H = entry.shape.at("H");
    tuned.shape.H_kv = entry.shape.at("H_kv");
    tuned.shape.S_q = entry.shape.at("S_q");
    tuned.shape.S_kv = entry.shape.at("S_kv");
    tuned.shape.D = kernel.D;
    tuned.shape.causal = kernel.causal != 0;
    const auto dtype = [](const std::string& name) {
      return name == "bf16" ? DType::kBF16 : name == "fp8e4m3" ? DType::kE4M3 : DType::kF16;
    };
    tuned.shape.q_dtype = dtype(kernel.q_dtype);
    tuned.shape.kv_dtype = dtype(kernel.kv_dtype);
    tuned.target = kernel.target;
    tuned.template_name = entry.template_name;
    tuned.score_us = entry.score_us;
    entries.push_back(tuned);
  }
  return entries;
}

std::string DescribeCall(const Shape& shape, int sm, int num_sms, int ctas_per_sm) {
  const Table& table = TheTable();
  std::string text;
  try {
    const Choice choice = PickFrom(table, shape, sm);
    const Entry& entry = table.entries[choice.entry];
    const Kernel& kernel = table.kernels[entry.kernel];
    std::map<std::string, int> occupancy;
    for (const Launch& launch : kernel.launches) occupancy[launch.entry] = ctas_per_sm;
    const Plan plan = PlanCall(kernel, shape, num_sms, occupancy);
    text += "entry " + std::to_string(choice.entry) + " exact " + (choice.exact ? "1" : "0") +
            " kernel " + std::to_string(entry.kernel) + " tuned " + DescribeShape(entry.shape) +
            "\n";
    for (const PlannedScratch& s : plan.scratch) {
      text += "scratch " + s.spec->name + " " + s.spec->dtype + " " + List(s.shape) + " bytes " +
              std::to_string(s.bytes) + " zero " + s.spec->zero + "\n";
    }
    for (const PlannedStep& step : plan.steps) {
      if (!step.memset.empty()) {
        text += "memset " + step.memset + "\n";
        continue;
      }
      const Launch& launch = *step.launch;
      text += "launch " + launch.entry + " grid " +
              List({step.grid[0], step.grid[1], step.grid[2]}) + " block " +
              List({launch.block[0], launch.block[1], launch.block[2]}) +
              (launch.clustered()
                   ? " cluster " + List({launch.cluster[0], launch.cluster[1], launch.cluster[2]})
                   : std::string()) +
              " smem " + std::to_string(launch.dynamic_smem) + "\n";
      std::map<std::string, const std::vector<int64_t>*> shapes;
      for (const PlannedArg& arg : step.args) {
        if (arg.param->kind != "scalar" && arg.param->kind != "tensor_map") {
          shapes[arg.param->name] = &arg.shape;
        }
      }
      for (const PlannedArg& arg : step.args) {
        const Param& param = *arg.param;
        if (param.kind == "scalar") {
          text +=
              "  scalar " + param.name + " " + param.dtype + " " + std::to_string(arg.value) + "\n";
        } else if (param.kind == "tensor_map") {
          const MapLayout layout = EncodeLayout(param, arg.box, *shapes.at(param.tensor));
          text += "  map " + param.name + " " + param.tensor + " dims " +
                  List(Signed(layout.dims)) + " strides " + List(Signed(layout.strides)) + " box " +
                  List(arg.box) + " swizzle " + param.swizzle + "\n";
        } else {
          // What a launch binds the tensor to: a scratch buffer by name, otherwise the
          // caller's tensor by role.
          const std::string& bound = param.kind == "scratch" ? param.name : param.role;
          text += "  tensor " + param.name + " " + param.kind + " " + param.dtype + " " +
                  List(arg.shape) + " bound " + bound + "\n";
        }
      }
    }
  } catch (const std::invalid_argument& error) {  // DispatchError, ExpressionError
    return std::string("error: ") + error.what() + "\n";
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// The launcher.

// What a call of one shape launches, worked out once: the rule's choice, the plan and every
// tensor map's layout. Only the pointers differ between calls of a shape.
struct PlannedCall {
  Choice choice;
  size_t kernel_index = 0;
  Plan plan;
  std::vector<std::vector<MapLayout>> layouts;  // [step][arg], tensor maps only
  size_t scratch_bytes = 0;
};

using ShapeKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, int>;

struct Attention::Impl {
  const Driver* driver = nullptr;
  CUcontext context = nullptr;
  int sm = 0;
  int num_sms = 0;
  std::map<size_t, CUmodule> modules;
  std::map<std::pair<size_t, std::string>, CUfunction> functions;
  std::map<size_t, std::map<std::string, int>> ctas_per_sm;
  // The rule and the plan cost tens of microseconds of CPU: a model calls a few shapes over and
  // over, so each shape's is kept (a bounded number; Run may be called from several threads).
  std::mutex mutex;
  std::map<ShapeKey, std::shared_ptr<const PlannedCall>> calls;

  std::shared_ptr<const PlannedCall> Planned(const Shape& shape);
};

std::shared_ptr<const PlannedCall> Attention::Impl::Planned(const Shape& shape) {
  const ShapeKey key{shape.B,
                     shape.H,
                     KvHeads(shape),
                     shape.S_q,
                     shape.S_kv,
                     shape.D,
                     shape.causal,
                     static_cast<int>(shape.q_dtype),
                     static_cast<int>(shape.kv_dtype)};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = calls.find(key);
    if (found != calls.end()) return found->second;
  }
  const Table& table = TheTable();
  auto call = std::make_shared<PlannedCall>();
  call->choice = PickFrom(table, shape, sm);
  call->kernel_index = table.entries[call->choice.entry].kernel;
  call->plan = PlanCall(table.kernels[call->kernel_index], shape, num_sms,
                        ctas_per_sm.at(call->kernel_index));
  for (const PlannedScratch& s : call->plan.scratch) {
    call->scratch_bytes += Aligned(static_cast<size_t>(s.bytes));
  }
  for (const PlannedStep& step : call->plan.steps) {
    std::map<std::string, const std::vector<int64_t>*> shapes;
    for (const PlannedArg& arg : step.args) {
      if (arg.param->kind != "scalar" && arg.param->kind != "tensor_map") {
        shapes[arg.param->name] = &arg.shape;
      }
    }
    std::vector<MapLayout> layouts(step.args.size());
    for (size_t i = 0; i < step.args.size(); ++i) {
      const PlannedArg& arg = step.args[i];
      if (arg.param->kind == "tensor_map") {
        layouts[i] = EncodeLayout(*arg.param, arg.box, *shapes.at(arg.param->tensor));
      }
    }
    call->layouts.push_back(std::move(layouts));
  }
  const std::lock_guard<std::mutex> lock(mutex);
  if (calls.size() >= 1024) calls.clear();
  calls.emplace(key, call);
  return call;
}

Attention::Attention() : impl_(std::make_unique<Impl>()) {
  const Table& table = TheTable();
  const Driver& driver = TheDriver();
  impl_->driver = &driver;
  driver.Check(driver.CtxGetCurrent(&impl_->context), "cuCtxGetCurrent");
  if (impl_->context == nullptr) {
    throw std::runtime_error("evo_attention: no CUDA context is current on this thread");
  }
  CUdevice device = 0;
  driver.Check(driver.CtxGetDevice(&device), "cuCtxGetDevice");
  int major = 0;
  int minor = 0;
  driver.Check(
      driver.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
      "cuDeviceGetAttribute");
  driver.Check(
      driver.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
      "cuDeviceGetAttribute");
  driver.Check(
      driver.DeviceGetAttribute(&impl_->num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
      "cuDeviceGetAttribute");
  impl_->sm = major * 10 + minor;
  try {
    for (size_t index = 0; index < table.kernels.size(); ++index) {
      const Kernel& kernel = table.kernels[index];
      if (!RunsOn(kernel, impl_->sm)) continue;
      const data::Cubin* cubin = nullptr;
      for (size_t i = 0; i < data::kCubinCount; ++i) {
        if (kernel.cubin == data::kCubins[i].path) cubin = &data::kCubins[i];
      }
      if (cubin == nullptr) throw std::runtime_error("evo_attention: no cubin " + kernel.cubin);
      CUmodule module = nullptr;
      driver.Check(driver.ModuleLoadData(&module, cubin->bytes),
                   "cuModuleLoadData of " + kernel.cubin);
      impl_->modules[index] = module;
      for (const Launch& launch : kernel.launches) {
        CUfunction function = nullptr;
        driver.Check(driver.ModuleGetFunction(&function, module, launch.entry.c_str()),
                     "cuModuleGetFunction of " + launch.entry);
        if (launch.needs_opt_in) {
          driver.Check(
              driver.FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(launch.dynamic_smem)),
              "cuFuncSetAttribute of " + launch.entry);
        }
        int ctas = 0;
        driver.Check(
            driver.Occupancy(&ctas, function,
                             static_cast<int>(launch.block[0] * launch.block[1] * launch.block[2]),
                             static_cast<size_t>(launch.dynamic_smem)),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor of " + launch.entry);
        if (ctas < 1) {
          throw std::runtime_error("evo_attention: " + launch.entry +
                                   " does not fit on an SM of this GPU");
        }
        impl_->functions[{index, launch.entry}] = function;
        impl_->ctas_per_sm[index][launch.entry] = ctas;
      }
    }
  } catch (...) {
    for (const auto& [index, module] : impl_->modules) driver.ModuleUnload(module);
    throw;
  }
}

Attention::~Attention() {
  if (!impl_) return;
  // Errors are ignored: a destructor must not throw, and the context may be going away.
  for (const auto& [index, module] : impl_->modules) impl_->driver->ModuleUnload(module);
}

int Attention::sm() const { return impl_->sm; }

size_t Attention::WorkspaceBytes(const Shape& shape) const {
  return impl_->Planned(shape)->scratch_bytes;
}

Choice Attention::Run(const Shape& shape, const Tensors& tensors, CUstream stream,
                      CUdeviceptr workspace, size_t workspace_bytes) {
  const Table& table = TheTable();
  const Driver& driver = *impl_->driver;
  CUcontext current = nullptr;
  driver.Check(driver.CtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != impl_->context) {
    throw std::runtime_error(
        "evo_attention: the current CUDA context is not the one the "
        "kernels were loaded into");
  }
  const std::shared_ptr<const PlannedCall> call = impl_->Planned(shape);
  const Choice& choice = call->choice;
  const size_t kernel_index = call->kernel_index;
  const Kernel& kernel = table.kernels[kernel_index];
  const Plan& plan = call->plan;

  std::map<std::string, CUdeviceptr> pointers = {{"q", tensors.q},
                                                 {"k", tensors.k},
                                                 {"v", tensors.v},
                                                 {"out", tensors.out},
                                                 {"q_scale", tensors.q_scale},
                                                 {"k_scale", tensors.k_scale},
                                                 {"v_scale", tensors.v_scale}};
  for (const char* role : {"q", "k", "v", "out"}) {
    if (pointers.at(role) == 0) throw DispatchError(std::string(role) + " is null");
  }
  for (const std::string& role : kernel.scales) {
    if (pointers.at(role) == 0) {
      throw DispatchError("the kernel for " + DescribeKey(shape) + " takes " + role + ": pass it");
    }
  }
  for (const auto& [role, pointer] : pointers) {
    if (pointer % 16 != 0) {
      throw DispatchError(role + " is not 16-byte aligned");
    }
  }

  const size_t needed = call->scratch_bytes;
  CUdeviceptr base = workspace;
  const bool allocate = needed > 0 && workspace == 0;
  if (needed > 0 && !allocate && workspace_bytes < needed) {
    throw DispatchError("the workspace holds " + std::to_string(workspace_bytes) +
                        " bytes; this call needs " + std::to_string(needed));
  }
  if (allocate) driver.Check(driver.MemAllocAsync(&base, needed, stream), "cuMemAllocAsync");
  std::map<std::string, CUdeviceptr> scratch;
  size_t offset = 0;
  for (const PlannedScratch& s : plan.scratch) {
    scratch[s.spec->name] = base + offset;
    // Scratch zeroed "once" is zeroed by every call here: the workspace may be the caller's,
    // shared with other calls, so it cannot be known to have stayed zero.
    if (s.spec->zero != "never") {
      driver.Check(driver.MemsetD8Async(base + offset, 0, static_cast<size_t>(s.bytes), stream),
                   "cuMemsetD8Async");
    }
    offset += Aligned(static_cast<size_t>(s.bytes));
  }
  try {
    for (size_t step_index = 0; step_index < plan.steps.size(); ++step_index) {
      const PlannedStep& step = plan.steps[step_index];
      if (!step.memset.empty()) continue;  // each_call scratch was zeroed above
      const Launch& launch = *step.launch;
      std::map<std::string, CUdeviceptr> named;
      for (const PlannedArg& arg : step.args) {
        const Param& param = *arg.param;
        if (param.kind == "scalar" || param.kind == "tensor_map") continue;
        named[param.name] =
            param.kind == "scratch" ? scratch.at(param.name) : pointers.at(param.role);
      }
      // Argument storage: scalars as 8-byte slots, tensor maps as 64-byte aligned blocks.
      std::vector<uint64_t> words(step.args.size());
      std::vector<CUtensorMap> maps(step.args.size());
      std::vector<void*> params(step.args.size());
      for (size_t i = 0; i < step.args.size(); ++i) {
        const PlannedArg& arg = step.args[i];
        const Param& param = *arg.param;
        if (param.kind == "scalar") {
          if (param.dtype == "i32") {
            const int32_t value = static_cast<int32_t>(arg.value);
            std::memcpy(&words[i], &value, sizeof(value));
          } else if (param.dtype == "i64") {
            std::memcpy(&words[i], &arg.value, sizeof(arg.value));
          } else {
            throw std::runtime_error("evo_attention: scalar " + param.name + " of dtype " +
                                     param.dtype);
          }
          params[i] = &words[i];
        } else if (param.kind == "tensor_map") {
          const MapLayout& layout = call->layouts[step_index][i];
          const std::vector<cuuint32_t> element_strides(layout.dims.size(), 1);
          driver.Check(
              driver.TensorMapEncodeTiled(
                  &maps[i], MapDtype(param.dtype), static_cast<cuuint32_t>(layout.dims.size()),
                  reinterpret_cast<void*>(named.at(param.tensor)), layout.dims.data(),
                  layout.strides.data(), layout.box.data(), element_strides.data(),
                  MapInterleave(param.interleave), MapSwizzle(param.swizzle),
                  MapL2(param.l2_promotion),
                  param.fill == "nan" ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                      : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              "cuTensorMapEncodeTiled of " + param.name);
          params[i] = &maps[i];
        } else {
          words[i] = named.at(param.name);
          params[i] = &words[i];
        }
      }
      CUfunction function = impl_->functions.at({kernel_index, launch.entry});
      if (launch.clustered()) {
        CUlaunchAttribute cluster{};
        cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        cluster.value.clusterDim.x = static_cast<unsigned>(launch.cluster[0]);
        cluster.value.clusterDim.y = static_cast<unsigned>(launch.cluster[1]);
        cluster.value.clusterDim.z = static_cast<unsigned>(launch.cluster[2]);
        CUlaunchConfig config{};
        config.gridDimX = static_cast<unsigned>(step.grid[0]);
        config.gridDimY = static_cast<unsigned>(step.grid[1]);
        config.gridDimZ = static_cast<unsigned>(step.grid[2]);
        config.blockDimX = static_cast<unsigned>(launch.block[0]);
        config.blockDimY = static_cast<unsigned>(launch.block[1]);
        config.blockDimZ = static_cast<unsigned>(launch.block[2]);
        config.sharedMemBytes = static_cast<unsigned>(launch.dynamic_smem);
        config.hStream = stream;
        config.attrs = &cluster;
        config.numAttrs = 1;
        driver.Check(driver.LaunchKernelEx(&config, function, params.data(), nullptr),
                     "cuLaunchKernelEx of " + launch.entry);
        continue;
      }
      driver.Check(
          driver.LaunchKernel(
              function, static_cast<unsigned>(step.grid[0]), static_cast<unsigned>(step.grid[1]),
              static_cast<unsigned>(step.grid[2]), static_cast<unsigned>(launch.block[0]),
              static_cast<unsigned>(launch.block[1]), static_cast<unsigned>(launch.block[2]),
              static_cast<unsigned>(launch.dynamic_smem), stream, params.data(), nullptr),
          "cuLaunchKernel of " + launch.entry);
    }
  } catch (...) {
    if (allocate) driver.MemFreeAsync(base, stream);
    throw;
  }
  if (allocate) driver.Check(driver.MemFreeAsync(base, stream), "cuMemFreeAsync");
  return choice;
}

}  // namespace evo_attention

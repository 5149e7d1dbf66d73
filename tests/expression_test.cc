#include "kernel_templates/expression.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/error.h"

namespace evo {
namespace {

int64_t Eval(std::string_view text, const Bindings& bindings = {}) {
  return Expression::Parse(text).Evaluate(bindings);
}

TEST_CASE("Expression follows C precedence and associativity", "[expression]") {
  CHECK(Eval("42") == 42);
  CHECK(Eval("2+3*4") == 14);
  CHECK(Eval("(2+3)*4") == 20);
  CHECK(Eval("10-4-3") == 3);
  CHECK(Eval("100/10/5") == 2);
  CHECK(Eval("100%7%4") == 2);
  CHECK(Eval("-2*3") == -6);
  CHECK(Eval("2*-3") == -6);
  CHECK(Eval("--3") == 3);
  CHECK(Eval("-(2+3)") == -5);
  CHECK(Eval("!0") == 1);
  CHECK(Eval("!5") == 0);
  CHECK(Eval("!!7") == 1);
  CHECK(Eval("!0+1") == 2);
  CHECK(Eval("1 ? 2 : 0 ? 3 : 4") == 2);
  CHECK(Eval("0 ? 2 : 0 ? 3 : 4") == 4);
  CHECK(Eval("0 ? 2 : 1 ? 3 : 4") == 3);
  CHECK(Eval("1 ? 0 ? 5 : 6 : 7") == 6);
  CHECK(Eval("0 || 1 ? 5 : 6") == 5);
  CHECK(Eval("1 || 0 && 0") == 1);
  CHECK(Eval("1 + 2 < 4 == 1") == 1);
  CHECK(Eval("1 < 2 == 2 < 1") == 0);
  CHECK(Eval("2 + 3 == 5 && 4 * 2 != 7") == 1);
  // Division and modulo truncate toward zero, as in C.
  CHECK(Eval("-7/2") == -3);
  CHECK(Eval("-7%3") == -1);
  CHECK(Eval("7%-3") == 1);
}

TEST_CASE("Expression allows whitespace between any tokens", "[expression]") {
  CHECK(Eval(" \t2 +\n3\r\n* ( 1 ) ") == 5);
  CHECK(Eval("min ( 4 , 2 )") == 2);
  CHECK(Eval("1<=2") == 1);
}

TEST_CASE("Expression comparisons yield 0 or 1", "[expression]") {
  CHECK(Eval("3 < 4") == 1);
  CHECK(Eval("4 < 4") == 0);
  CHECK(Eval("4 <= 4") == 1);
  CHECK(Eval("5 <= 4") == 0);
  CHECK(Eval("5 > 4") == 1);
  CHECK(Eval("4 > 4") == 0);
  CHECK(Eval("4 >= 4") == 1);
  CHECK(Eval("3 >= 4") == 0);
  CHECK(Eval("4 == 4") == 1);
  CHECK(Eval("4 == 5") == 0);
  CHECK(Eval("4 != 5") == 1);
  CHECK(Eval("4 != 4") == 0);
  CHECK(Eval("-1 < 0") == 1);
  CHECK(Eval("7 && 9") == 1);
  CHECK(Eval("0 || -3") == 1);
}

TEST_CASE("Expression evaluates names from bindings", "[expression]") {
  const Bindings knobs = {{"BLOCK_M", 128},  {"NUM_WARPS", 4}, {"BLOCK_N", 64},
                          {"HEAD_DIM", 128}, {"STAGES", 2},    {"MAX_SMEM", 232448}};
  CHECK(Eval("BLOCK_M % (16 * NUM_WARPS) == 0", knobs) == 1);
  CHECK(Eval("BLOCK_M % (48 * NUM_WARPS) == 0", knobs) == 0);
  // (128*128 + 2*2*64*128) * 2 = 98304.
  CHECK(Eval("(BLOCK_M*HEAD_DIM + STAGES*2*BLOCK_N*HEAD_DIM)*2", knobs) == 98304);
  CHECK(Eval("(BLOCK_M*HEAD_DIM + STAGES*2*BLOCK_N*HEAD_DIM)*2 <= MAX_SMEM", knobs) == 1);

  const std::string grid =
      "PERSISTENT ? min(B*H*ceil_div(S_q, BLOCK_M), NUM_SMS*CTAS_PER_SM) : ceil_div(S_q, BLOCK_M)";
  Bindings sizes = {{"PERSISTENT", 1}, {"B", 2},         {"H", 16},         {"S_q", 1000},
                    {"BLOCK_M", 128},  {"NUM_SMS", 132}, {"CTAS_PER_SM", 1}};
  CHECK(Eval(grid, sizes) == 132);  // min(2*16*8, 132)
  sizes["PERSISTENT"] = 0;
  CHECK(Eval(grid, sizes) == 8);
}

TEST_CASE("Expression short-circuits && || and ?:", "[expression]") {
  const Bindings zero = {{"X", 0}, {"Y", 10}};
  const Bindings two = {{"X", 2}, {"Y", 10}};
  CHECK(Eval("X == 0 || Y / X > 2", zero) == 1);
  CHECK(Eval("X == 0 || Y / X > 2", two) == 1);
  CHECK(Eval("X != 0 && Y / X > 2", zero) == 0);
  CHECK(Eval("X != 0 && Y % X == 0", two) == 1);
  CHECK(Eval("X == 0 ? -1 : Y / X", zero) == -1);
  CHECK(Eval("X != 0 ? Y / X : -1", zero) == -1);
  CHECK(Eval("X == 0 ? -1 : Y / X", two) == 5);
  // Unbound names in the skipped branch are not looked up either.
  CHECK(Eval("1 || MISSING", {}) == 1);
  CHECK(Eval("0 && MISSING", {}) == 0);
  CHECK(Eval("1 ? 3 : MISSING", {}) == 3);
  // Without the guard the division is evaluated and fails.
  CHECK_THROWS_AS(Eval("Y / X > 2", zero), Error);
}

TEST_CASE("Expression functions", "[expression]") {
  CHECK(Eval("min(3, 1)") == 1);
  CHECK(Eval("min(3, 1, 2)") == 1);
  CHECK(Eval("min(-5, 7, 0, 2)") == -5);
  CHECK(Eval("max(3, 1)") == 3);
  CHECK(Eval("max(3, 1, 9, 2)") == 9);
  CHECK(Eval("max(-5, -7)") == -5);
  CHECK(Eval("ceil_div(7, 2)") == 4);
  CHECK(Eval("ceil_div(8, 2)") == 4);
  CHECK(Eval("ceil_div(1, 128)") == 1);
  CHECK(Eval("ceil_div(0, 5)") == 0);
  CHECK(Eval("ceil_div(-7, 2)") == -3);
  CHECK(Eval("ceil_div(9223372036854775807, 2)") == 4611686018427387904);
  CHECK(Eval("is_pow2(1)") == 1);
  CHECK(Eval("is_pow2(2)") == 1);
  CHECK(Eval("is_pow2(64)") == 1);
  CHECK(Eval("is_pow2(4611686018427387904)") == 1);
  CHECK(Eval("is_pow2(0)") == 0);
  CHECK(Eval("is_pow2(6)") == 0);
  CHECK(Eval("is_pow2(-8)") == 0);
  CHECK(Eval("log2(1)") == 0);
  CHECK(Eval("log2(2)") == 1);
  CHECK(Eval("log2(3)") == 1);
  CHECK(Eval("log2(1023)") == 9);
  CHECK(Eval("log2(1024)") == 10);
  CHECK(Eval("log2(9223372036854775807)") == 62);
  CHECK(Eval("max(min(4, 8), ceil_div(log2(256), 3)) * is_pow2(16)") == 4);
}

TEST_CASE("Expression handles the int64 range", "[expression]") {
  CHECK(Eval("9223372036854775807") == std::numeric_limits<int64_t>::max());
  CHECK(Eval("-9223372036854775807 - 1") == std::numeric_limits<int64_t>::min());
  CHECK(Eval("(-9223372036854775807 - 1) % -1") == 0);
}

TEST_CASE("Expression evaluation errors name the problem", "[expression]") {
  const Bindings bindings = {{"X", 0}, {"BIG", 4611686018427387904}};
  REQUIRE_THROWS_WITH(Eval("BLOCK_K * 2", bindings), "unknown name 'BLOCK_K' in 'BLOCK_K * 2'");
  REQUIRE_THROWS_WITH(Eval("10 / X", bindings), Catch::Contains("division by zero"));
  REQUIRE_THROWS_WITH(Eval("10 % X", bindings), Catch::Contains("modulo by zero"));
  REQUIRE_THROWS_WITH(Eval("ceil_div(10, X)", bindings), Catch::Contains("ceil_div"));
  REQUIRE_THROWS_WITH(Eval("ceil_div(10, -2)", bindings), Catch::Contains("positive"));
  REQUIRE_THROWS_WITH(Eval("log2(X)", bindings), Catch::Contains("log2"));
  REQUIRE_THROWS_WITH(Eval("BIG * 2", bindings), Catch::Contains("overflow"));
  REQUIRE_THROWS_WITH(Eval("BIG + BIG", bindings), Catch::Contains("overflow"));
  REQUIRE_THROWS_WITH(Eval("-BIG - BIG - 1", bindings), Catch::Contains("overflow"));
  REQUIRE_THROWS_WITH(Eval("-(-9223372036854775807 - 1)"), Catch::Contains("overflow"));
  REQUIRE_THROWS_WITH(Eval("(-9223372036854775807 - 1) / -1"), Catch::Contains("overflow"));
  REQUIRE_THROWS_WITH(Eval("BIG * 2", bindings), Catch::Contains("in 'BIG * 2'"));
}

TEST_CASE("Expression parse errors name the problem and the column", "[expression]") {
  REQUIRE_THROWS_AS(Expression::Parse("(1 + 2"), Error);
  REQUIRE_THROWS_WITH(Expression::Parse("(1 + 2"),
                      "expression '(1 + 2': expected ')' but found end of input at column 7");
  REQUIRE_THROWS_WITH(Expression::Parse("1 + 2)"),
                      Catch::Contains("unmatched ')'") && Catch::Contains("column 6"));
  REQUIRE_THROWS_WITH(Expression::Parse("min(1, 2"), Catch::Contains("expected ',' or ')'"));
  REQUIRE_THROWS_WITH(Expression::Parse("1 2"),
                      Catch::Contains("unexpected '2'") && Catch::Contains("column 3"));
  REQUIRE_THROWS_WITH(Expression::Parse("A B"), Catch::Contains("unexpected 'B'"));
  REQUIRE_THROWS_WITH(Expression::Parse("foo(1)"), Catch::Contains("unknown function 'foo'"));
  REQUIRE_THROWS_WITH(Expression::Parse("ceil_div(1)"),
                      Catch::Contains("ceil_div takes 2 arguments, got 1"));
  REQUIRE_THROWS_WITH(Expression::Parse("ceil_div(1, 2, 3)"),
                      Catch::Contains("ceil_div takes 2 arguments, got 3"));
  REQUIRE_THROWS_WITH(Expression::Parse("min(1)"),
                      Catch::Contains("min takes at least 2 arguments, got 1"));
  REQUIRE_THROWS_WITH(Expression::Parse("max()"),
                      Catch::Contains("max takes at least 2 arguments, got 0"));
  REQUIRE_THROWS_WITH(Expression::Parse("log2(1, 2)"),
                      Catch::Contains("log2 takes 1 argument, got 2"));
  REQUIRE_THROWS_WITH(Expression::Parse(""), "expression '': empty expression at column 1");
  REQUIRE_THROWS_WITH(Expression::Parse("   "), Catch::Contains("empty expression"));
  REQUIRE_THROWS_WITH(Expression::Parse("1 +"), Catch::Contains("found end of input"));
  REQUIRE_THROWS_WITH(Expression::Parse("1 ? 2"), Catch::Contains("expected ':'"));
  REQUIRE_THROWS_WITH(Expression::Parse("()"), Catch::Contains("found ')'"));
  REQUIRE_THROWS_WITH(Expression::Parse("1 + @"),
                      Catch::Contains("unexpected character '@'") && Catch::Contains("column 5"));
  REQUIRE_THROWS_WITH(Expression::Parse("A = 1"), Catch::Contains("use '=='"));
  REQUIRE_THROWS_WITH(Expression::Parse("A & B"), Catch::Contains("use '&&'"));
  REQUIRE_THROWS_WITH(Expression::Parse("A | B"), Catch::Contains("use '||'"));
  REQUIRE_THROWS_WITH(Expression::Parse("12abc"), Catch::Contains("malformed number '12abc'"));
  REQUIRE_THROWS_WITH(Expression::Parse("9223372036854775808"), Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(Expression::Parse(std::string(10000, '(') + "1" + std::string(10000, ')')),
                      Catch::Contains("nested too deeply"));
  REQUIRE_THROWS_WITH(Expression::Parse(std::string(10000, '-') + "1"),
                      Catch::Contains("nested too deeply"));
}

TEST_CASE("Expression deep but reasonable nesting parses", "[expression]") {
  CHECK(Eval(std::string(100, '(') + "7" + std::string(100, ')')) == 7);
  std::string sum = "0";
  for (int i = 0; i < 500; ++i) sum += " + 1";
  CHECK(Eval(sum) == 500);
}

TEST_CASE("Expression Identifiers lists referenced names but not functions", "[expression]") {
  const Expression grid = Expression::Parse(
      "PERSISTENT ? min(B*H*ceil_div(S_q, BLOCK_M), NUM_SMS*CTAS_PER_SM) : ceil_div(S_q, BLOCK_M)");
  CHECK(grid.Identifiers() ==
        std::set<std::string>{"B", "BLOCK_M", "CTAS_PER_SM", "H", "NUM_SMS", "PERSISTENT", "S_q"});
  CHECK(Expression::Parse("1 + 2 * log2(8)").Identifiers().empty());
  // Names in branches that evaluation would skip still count: a loader must see them all.
  CHECK(Expression::Parse("0 && _x1").Identifiers() == std::set<std::string>{"_x1"});
}

TEST_CASE("Expression keeps its text and can be copied", "[expression]") {
  const Expression original = Expression::Parse(" A + 1 ");
  CHECK(original.text() == " A + 1 ");
  Expression copy = original;
  CHECK(copy.text() == original.text());
  CHECK(copy.Evaluate({{"A", 41}}) == 42);
  copy = Expression::Parse("A * 2");
  CHECK(copy.Evaluate({{"A", 41}}) == 82);
  CHECK(original.Evaluate({{"A", 1}}) == 2);
}

TEST_CASE("A default-constructed Expression is the constant 0", "[expression]") {
  const Expression zero;
  CHECK(zero.text() == "0");
  CHECK(zero.Evaluate({}) == 0);
  CHECK(zero.Identifiers().empty());
}

TEST_CASE("Expression Fold keeps only what still needs a value", "[expression]") {
  const Expression grid = Expression::Parse(
      "PERSISTENT ? min(B * H * ceil_div(S_q, BLOCK_M), NUM_SMS * CTAS_PER_SM) : "
      "ceil_div(S_q, BLOCK_M)");
  Bindings known = {{"PERSISTENT", 1}, {"B", 2}, {"H", 8}, {"S_q", 512}, {"BLOCK_M", 64}};
  CHECK(grid.Fold(known) == "min(128, (NUM_SMS * CTAS_PER_SM))");
  known["PERSISTENT"] = 0;
  CHECK(grid.Fold(known) == "8");
  CHECK(Expression::Parse("X ? 1 : -Y").Fold({}) == "(X ? 1 : -(Y))");
  CHECK(Expression::Parse("!(A + 1 < 3)").Fold({{"B", 1}}) == "!(((A + 1) < 3))");
  // A folded text parses back to an expression of the same value.
  const Bindings device = {{"NUM_SMS", 132}, {"CTAS_PER_SM", 2}};
  known["PERSISTENT"] = 1;
  Bindings all = known;
  all.insert(device.begin(), device.end());
  CHECK(Expression::Parse(grid.Fold(known)).Evaluate(device) == grid.Evaluate(all));
}

TEST_CASE("Expression AsUpperBound splits one ordering comparison into the bounded and the bound",
          "[expression]") {
  const Bindings bindings{{"X", 4}, {"Y", 8}, {"D", 64}};
  for (const char* text : {"X * Y <= 64", "X * Y < 64", "64 >= X * Y", "64 > X * Y"}) {
    INFO(text);
    const std::optional<Expression::UpperBound> bound = Expression::Parse(text).AsUpperBound();
    REQUIRE(bound);
    CHECK(bound->value.Evaluate(bindings) == 32);
    CHECK(bound->limit.Evaluate(bindings) == 64);
    CHECK(bound->value.Identifiers() == std::set<std::string>{"X", "Y"});
  }
  // Precedence and parentheses survive the split; constant parts fold.
  const auto bound = Expression::Parse("(X / 2) * (D + Y) / 2 <= min(D, 3 * 64)").AsUpperBound();
  REQUIRE(bound);
  CHECK(bound->value.Evaluate(bindings) == 72);
  CHECK(bound->limit.Evaluate(bindings) == 64);
  // Not budgets: equalities, logic, conditionals, arithmetic, a negated comparison.
  for (const char* text : {"X % Y == 0", "X != 3", "X == 0 || X * Y <= 64", "X <= 64 && Y <= 8",
                           "X ? Y <= 4 : 1", "X * Y", "!(X <= 3)", "X"}) {
    INFO(text);
    CHECK_FALSE(Expression::Parse(text).AsUpperBound());
  }
}

}  // namespace
}  // namespace evo

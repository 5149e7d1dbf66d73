#include "common/half.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace evo {
namespace {

TEST_CASE("fp16 conversion matches IEEE binary16", "[half]") {
  CHECK(FloatToHalf(0.0f) == 0x0000);
  CHECK(FloatToHalf(-0.0f) == 0x8000);
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(-2.0f) == 0xc000);
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(65520.0f) == 0x7c00);  // halfway to the next binade rounds to infinity
  CHECK(FloatToHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((FloatToHalf(std::nanf("")) & 0x7fff) > 0x7c00);
  CHECK(FloatToHalf(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
  CHECK(FloatToHalf(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  // Ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);

  // Every finite half survives the round trip through float.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    if ((half & 0x7c00) == 0x7c00) continue;
    REQUIRE(FloatToHalf(HalfToFloat(half)) == half);
  }
  CHECK(HalfToFloat(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(HalfToFloat(0x7e00)));
  CHECK(HalfToFloat(0x3555) == Approx(0.333251953125f));
}

}  // namespace
}  // namespace evo

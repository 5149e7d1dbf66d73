#include "evaluator/fp8_e4m3.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

namespace evo {
namespace {

bool IsNan(uint8_t code) { return (code & 0x7f) == 0x7f; }

TEST_CASE("e4m3: known codes decode to their values", "[fp8]") {
  CHECK(E4M3ToFloat(0x00) == 0.0f);
  CHECK(std::signbit(E4M3ToFloat(0x80)));
  CHECK(E4M3ToFloat(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(E4M3ToFloat(0x07) == 7 * std::ldexp(1.0f, -9));
  CHECK(E4M3ToFloat(0x08) == std::ldexp(1.0f, -6));  // smallest normal
  CHECK(E4M3ToFloat(0x38) == 1.0f);
  CHECK(E4M3ToFloat(0x3c) == 1.5f);
  CHECK(E4M3ToFloat(0x7e) == 448.0f);
  CHECK(E4M3ToFloat(0xfe) == -448.0f);
  CHECK(std::isnan(E4M3ToFloat(0x7f)));
  CHECK(std::isnan(E4M3ToFloat(0xff)));
}

TEST_CASE("e4m3: every finite code round-trips and the codes are ordered", "[fp8]") {
  float previous = -1.0f;
  for (int code = 0; code < 256; ++code) {
    const auto v = static_cast<uint8_t>(code);
    if (IsNan(v)) continue;
    INFO("code " << code);
    CHECK(FloatToE4M3(E4M3ToFloat(v)) == v);
    if (code < 0x7f) {
      CHECK(E4M3ToFloat(v) > previous);
      previous = E4M3ToFloat(v);
    }
  }
}

TEST_CASE("e4m3: rounding is to nearest, ties to the even code", "[fp8]") {
  for (int code = 0; code < 0x7e; ++code) {
    const auto low = static_cast<uint8_t>(code);
    const auto high = static_cast<uint8_t>(code + 1);
    const float a = E4M3ToFloat(low);
    const float b = E4M3ToFloat(high);
    const float middle = (a + b) / 2;  // exact in float
    INFO("between codes " << code << " and " << code + 1);
    CHECK(FloatToE4M3(middle) == ((low & 1) == 0 ? low : high));
    CHECK(FloatToE4M3(std::nextafter(middle, 0.0f)) == low);
    CHECK(FloatToE4M3(std::nextafter(middle, 1000.0f)) == high);
    CHECK(FloatToE4M3(-std::nextafter(middle, 1000.0f)) == (high | 0x80));
  }
}

TEST_CASE("e4m3: past 448 saturates, NaN stays NaN", "[fp8]") {
  CHECK(FloatToE4M3(448.0f) == 0x7e);
  CHECK(FloatToE4M3(464.0f) == 0x7e);
  CHECK(FloatToE4M3(1e30f) == 0x7e);
  CHECK(FloatToE4M3(std::numeric_limits<float>::infinity()) == 0x7e);
  CHECK(FloatToE4M3(-std::numeric_limits<float>::infinity()) == 0xfe);
  CHECK(IsNan(FloatToE4M3(std::numeric_limits<float>::quiet_NaN())));
  CHECK(FloatToE4M3(std::ldexp(1.0f, -11)) == 0x00);  // under half the smallest subnormal
  CHECK(FloatToE4M3(-0.0f) == 0x80);
}

TEST_CASE("e4m3: the device source is the same code", "[fp8]") {
  const std::string& source = E4M3DeviceSource();
  CHECK(source.find("__device__ __forceinline__ unsigned char evo_f32_to_e4m3(float x)") !=
        std::string::npos);
  CHECK(source.find("__device__ __forceinline__ float evo_e4m3_to_f32(unsigned char v)") !=
        std::string::npos);
}

}  // namespace
}  // namespace evo

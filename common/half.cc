#include "common/half.h"

#include <bit>
#include <cmath>

namespace evo {

uint16_t FloatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 0x38800000u) {
    // Subnormal or zero in half: scale so the value's half-ulp units land in the integer part.
    const float scaled = std::bit_cast<float>(magnitude) * 16777216.0f;  // 2^24
    const auto units = static_cast<uint32_t>(std::nearbyint(scaled));    // ties to even
    return static_cast<uint16_t>(sign | units);
  }
  // Normal: rebias the exponent, then round the 13 dropped mantissa bits to nearest even.
  uint32_t rebased = magnitude - ((127u - 15u) << 23);
  const uint32_t dropped = rebased & 0x1fffu;
  rebased >>= 13;
  if (dropped > 0x1000u || (dropped == 0x1000u && (rebased & 1u))) ++rebased;
  return static_cast<uint16_t>(sign | rebased);
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) / 16777216.0f;  // mantissa * 2^-24
    return sign ? -value : value;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace evo

#pragma once

#include <cstdint>
#include <string>

// FP8 E4M3 as in the OCP 8-bit floating point spec (and CUDA's __nv_fp8_e4m3): sign, 4 exponent
// bits with bias 7, 3 mantissa bits, no infinities, S.1111.111 is NaN, 448 the largest finite.
//
// The conversions are written once, in this macro, and instantiated twice: for the host (tests
// and tools) and, stringized, for the gate kernels that fill fp8 inputs and for templates'
// reference kernels. The host tests therefore check exactly the code the GPU runs. Only
// functions that NVRTC and <cmath> both provide are used.
#define EVO_FP8_E4M3_FUNCTIONS(QUALIFIERS)                                                   \
  /* Round to nearest even; magnitudes past 448 saturate to 448 (satfinite). */              \
  QUALIFIERS unsigned char evo_f32_to_e4m3(float x) {                                        \
    const unsigned char sign = copysignf(1.0f, x) < 0.0f ? 0x80 : 0x00;                      \
    const float a = fabsf(x);                                                                \
    if (!(a == a)) return static_cast<unsigned char>(sign | 0x7f);                           \
    if (a >= 448.0f) return static_cast<unsigned char>(sign | 0x7e);                         \
    /* Below the smallest normal, 2^-6, the quantum is 2^-9; 8 quanta encode 2^-6 itself. */ \
    if (a < 0.015625f)                                                                       \
      return static_cast<unsigned char>(sign | static_cast<int>(rintf(a * 512.0f)));         \
    int e = 0;                                                                               \
    (void)frexpf(a, &e);                                                                     \
    int exponent = e - 1;                                                                    \
    int mantissa = static_cast<int>(rintf(ldexpf(a, 3 - exponent)));                         \
    if (mantissa == 16) {                                                                    \
      mantissa = 8;                                                                          \
      ++exponent;                                                                            \
    }                                                                                        \
    return static_cast<unsigned char>(sign | ((exponent + 7) << 3) | (mantissa - 8));        \
  }                                                                                          \
  QUALIFIERS float evo_e4m3_to_f32(unsigned char v) {                                        \
    const int exponent = (v >> 3) & 15;                                                      \
    const int mantissa = v & 7;                                                              \
    float a = exponent == 0 ? static_cast<float>(mantissa) * (1.0f / 512.0f)                 \
                            : ldexpf(static_cast<float>(8 + mantissa), exponent - 10);       \
    if (exponent == 15 && mantissa == 7) a = nanf("");                                       \
    return (v & 0x80) != 0 ? -a : a;                                                         \
  }

namespace evo {

uint8_t FloatToE4M3(float value);
float E4M3ToFloat(uint8_t value);

// The same conversions as CUDA source (__device__ __forceinline__), for NVRTC.
const std::string& E4M3DeviceSource();

}  // namespace evo

// The 16-bit floating-point types of the tensor cores as tags a kernel is templated on: fp16 and
// bf16 share the storage (16 bits) and differ in how fp32 values are rounded into them.
#pragma once

#include "evo/core.cuh"

namespace evo {

struct Fp16 {
  // Two fp32 values rounded to one packed pair, lo in the lower half.
  static __device__ __forceinline__ unsigned pack2(float lo, float hi) {
    return pack_half2(lo, hi);
  }
};

struct Bf16 {
  static __device__ __forceinline__ unsigned pack2(float lo, float hi) {
    unsigned r;
    // As for f16x2: the first source operand lands in the upper half.
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};

}  // namespace evo

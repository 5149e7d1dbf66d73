// FP8 on sm_89 and newer: conversions to fp16 (exact: every e4m3 or e5m2 value is an fp16
// value) and the e4m3 warp-level MMA.
#pragma once

namespace evo {

// Two e4m3 bytes (the first in the low byte) to an fp16 pair (the first in the low half).
__device__ __forceinline__ unsigned e4m3x2_to_half2(unsigned short pair) {
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"(pair));
  return r;
}

// The same for e5m2.
__device__ __forceinline__ unsigned e5m2x2_to_half2(unsigned short pair) {
  unsigned r;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(r) : "h"(pair));
  return r;
}

// d += a * b with a 16x32 (row), b 32x8 (col) of e4m3, d 16x8 fp32: the same d fragment layout
// as mma_16816; a register of a or b holds 4 consecutive k of one row (a) or column (b).
__device__ __forceinline__ void mma_16832_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                               unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace evo

// Hopper's warpgroup MMA (wgmma, sm_90a): the async-proxy fence, the wgmma group operations,
// shared-memory matrix descriptors for the 128-byte swizzle, and m64nNk16 MMAs of fp16 or bf16
// operands (evo::Fp16, evo::Bf16) with fp32 accumulators, for every N from 64 to 256 in steps of
// 16. The descriptor fields and operand layouts were measured on an H100 (scripts/probes).
#pragma once

#include "evo/half_types.cuh"

namespace evo {

// Orders this thread's shared-memory writes (cp.async included) before later reads by the
// async proxy, which is how wgmma reads its operands.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most Pending of this warpgroup's committed wgmma groups are still running.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ void wgmma_wait_all() { wgmma_wait<0>(); }

// Pins registers that an asynchronous wgmma reads or writes at this point of the program: the
// compiler may not move their other uses across it. Placed after a wait (the results are read
// only from here on) and before an issue (values written before it are the ones the MMA sees).
template <int N>
__device__ __forceinline__ void wgmma_fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void wgmma_fence_registers(unsigned (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(r[i][k])::"memory");
  }
}

// A shared-memory matrix descriptor for the 128-byte swizzle: start address, leading byte
// offset (between 64-column blocks along M/N of a transposed operand; unused for K-major),
// stride byte offset 1024 (between groups of 8 rows of 128 bytes).
__device__ __forceinline__ unsigned long long smem_desc_sw128(unsigned addr,
                                                              unsigned leading_bytes) {
  return static_cast<unsigned long long>((addr & 0x3FFFFu) >> 4) |
         (static_cast<unsigned long long>((leading_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<unsigned long long>(1024 >> 4) << 32) | (1ull << 62);
}

// The operands of an m64nNk16 wgmma's N / 2 fp32 accumulators per thread, in chunks of 8: the
// asm text "%0, ..., %7" of chunk c (EVO_WGMMA_Rc), the first c chunks as one list
// (EVO_WGMMA_Lc), and their constraints, d[0 .. 8c) (EVO_WGMMA_Dc, from EVO_WGMMA_ACC8).
#define EVO_WGMMA_OP(i) "%" #i
#define EVO_WGMMA_ACC8(i)                                                                     \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define EVO_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define EVO_WGMMA_R1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define EVO_WGMMA_R2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define EVO_WGMMA_R3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define EVO_WGMMA_R4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define EVO_WGMMA_R5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define EVO_WGMMA_R6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define EVO_WGMMA_R7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define EVO_WGMMA_R8 "%64, %65, %66, %67, %68, %69, %70, %71"
#define EVO_WGMMA_R9 "%72, %73, %74, %75, %76, %77, %78, %79"
#define EVO_WGMMA_R10 "%80, %81, %82, %83, %84, %85, %86, %87"
#define EVO_WGMMA_R11 "%88, %89, %90, %91, %92, %93, %94, %95"
#define EVO_WGMMA_R12 "%96, %97, %98, %99, %100, %101, %102, %103"
#define EVO_WGMMA_R13 "%104, %105, %106, %107, %108, %109, %110, %111"
#define EVO_WGMMA_R14 "%112, %113, %114, %115, %116, %117, %118, %119"
#define EVO_WGMMA_R15 "%120, %121, %122, %123, %124, %125, %126, %127"
#define EVO_WGMMA_L1 EVO_WGMMA_R0
#define EVO_WGMMA_D1 EVO_WGMMA_ACC8(0)
#define EVO_WGMMA_L2 EVO_WGMMA_L1 ", " EVO_WGMMA_R1
#define EVO_WGMMA_D2 EVO_WGMMA_D1, EVO_WGMMA_ACC8(8)
#define EVO_WGMMA_L3 EVO_WGMMA_L2 ", " EVO_WGMMA_R2
#define EVO_WGMMA_D3 EVO_WGMMA_D2, EVO_WGMMA_ACC8(16)
#define EVO_WGMMA_L4 EVO_WGMMA_L3 ", " EVO_WGMMA_R3
#define EVO_WGMMA_D4 EVO_WGMMA_D3, EVO_WGMMA_ACC8(24)
#define EVO_WGMMA_L5 EVO_WGMMA_L4 ", " EVO_WGMMA_R4
#define EVO_WGMMA_D5 EVO_WGMMA_D4, EVO_WGMMA_ACC8(32)
#define EVO_WGMMA_L6 EVO_WGMMA_L5 ", " EVO_WGMMA_R5
#define EVO_WGMMA_D6 EVO_WGMMA_D5, EVO_WGMMA_ACC8(40)
#define EVO_WGMMA_L7 EVO_WGMMA_L6 ", " EVO_WGMMA_R6
#define EVO_WGMMA_D7 EVO_WGMMA_D6, EVO_WGMMA_ACC8(48)
#define EVO_WGMMA_L8 EVO_WGMMA_L7 ", " EVO_WGMMA_R7
#define EVO_WGMMA_D8 EVO_WGMMA_D7, EVO_WGMMA_ACC8(56)
#define EVO_WGMMA_L9 EVO_WGMMA_L8 ", " EVO_WGMMA_R8
#define EVO_WGMMA_D9 EVO_WGMMA_D8, EVO_WGMMA_ACC8(64)
#define EVO_WGMMA_L10 EVO_WGMMA_L9 ", " EVO_WGMMA_R9
#define EVO_WGMMA_D10 EVO_WGMMA_D9, EVO_WGMMA_ACC8(72)
#define EVO_WGMMA_L11 EVO_WGMMA_L10 ", " EVO_WGMMA_R10
#define EVO_WGMMA_D11 EVO_WGMMA_D10, EVO_WGMMA_ACC8(80)
#define EVO_WGMMA_L12 EVO_WGMMA_L11 ", " EVO_WGMMA_R11
#define EVO_WGMMA_D12 EVO_WGMMA_D11, EVO_WGMMA_ACC8(88)
#define EVO_WGMMA_L13 EVO_WGMMA_L12 ", " EVO_WGMMA_R12
#define EVO_WGMMA_D13 EVO_WGMMA_D12, EVO_WGMMA_ACC8(96)
#define EVO_WGMMA_L14 EVO_WGMMA_L13 ", " EVO_WGMMA_R13
#define EVO_WGMMA_D14 EVO_WGMMA_D13, EVO_WGMMA_ACC8(104)
#define EVO_WGMMA_L15 EVO_WGMMA_L14 ", " EVO_WGMMA_R14
#define EVO_WGMMA_D15 EVO_WGMMA_D14, EVO_WGMMA_ACC8(112)
#define EVO_WGMMA_L16 EVO_WGMMA_L15 ", " EVO_WGMMA_R15
#define EVO_WGMMA_D16 EVO_WGMMA_D15, EVO_WGMMA_ACC8(120)

template <int N, class Elem = Fp16>
struct Wgmma;

// Wgmma<N, Elem>, whose accumulator takes CHUNKS = N / 16 chunks; I0 .. I5 are the operand
// numbers after the accumulators (N / 2 + 0 .. 5).
//   ss: d (+)= A * B^T with A and B K-major in shared memory (descriptors); d is overwritten
//       when accumulate is 0.
//   rs: d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
//       MN-major in shared memory, read transposed.
#define EVO_WGMMA_DEFINE(N, ELEM, TYPE, CHUNKS, I0, I1, I2, I3, I4, I5)                         \
  template <>                                                                                   \
  struct Wgmma<N, ELEM> {                                                                       \
    static __device__ __forceinline__ void ss(float (&d)[N / 2], unsigned long long a,          \
                                              unsigned long long b, int accumulate) {           \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " EVO_WGMMA_OP(I2) ", 0;\n"              \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {"     \
                   EVO_WGMMA_L##CHUNKS "}, " EVO_WGMMA_OP(I0) ", " EVO_WGMMA_OP(I1)          \
                   ", p, 1, 1, 0, 0;\n}\n"                                                    \
                   : EVO_WGMMA_D##CHUNKS                                                     \
                   : "l"(a), "l"(b), "r"(accumulate)); \
    }                                                                                           \
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const unsigned (&a)[4],        \
                                              unsigned long long b) {                           \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " EVO_WGMMA_OP(I5) ", 0;\n"              \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {"     \
                   EVO_WGMMA_L##CHUNKS "}, {" EVO_WGMMA_OP(I0) ", " EVO_WGMMA_OP(I1) ", "   \
                   EVO_WGMMA_OP(I2) ", " EVO_WGMMA_OP(I3) "}, " EVO_WGMMA_OP(I4)             \
                   ", p, 1, 1, 1;\n}\n"                                                       \
                   : EVO_WGMMA_D##CHUNKS                                                     \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)); \
    }                                                                                           \
  };

EVO_WGMMA_DEFINE(64, Fp16, "f16", 4, 32, 33, 34, 35, 36, 37)
EVO_WGMMA_DEFINE(64, Bf16, "bf16", 4, 32, 33, 34, 35, 36, 37)
EVO_WGMMA_DEFINE(80, Fp16, "f16", 5, 40, 41, 42, 43, 44, 45)
EVO_WGMMA_DEFINE(80, Bf16, "bf16", 5, 40, 41, 42, 43, 44, 45)
EVO_WGMMA_DEFINE(96, Fp16, "f16", 6, 48, 49, 50, 51, 52, 53)
EVO_WGMMA_DEFINE(96, Bf16, "bf16", 6, 48, 49, 50, 51, 52, 53)
EVO_WGMMA_DEFINE(112, Fp16, "f16", 7, 56, 57, 58, 59, 60, 61)
EVO_WGMMA_DEFINE(112, Bf16, "bf16", 7, 56, 57, 58, 59, 60, 61)
EVO_WGMMA_DEFINE(128, Fp16, "f16", 8, 64, 65, 66, 67, 68, 69)
EVO_WGMMA_DEFINE(128, Bf16, "bf16", 8, 64, 65, 66, 67, 68, 69)
EVO_WGMMA_DEFINE(144, Fp16, "f16", 9, 72, 73, 74, 75, 76, 77)
EVO_WGMMA_DEFINE(144, Bf16, "bf16", 9, 72, 73, 74, 75, 76, 77)
EVO_WGMMA_DEFINE(160, Fp16, "f16", 10, 80, 81, 82, 83, 84, 85)
EVO_WGMMA_DEFINE(160, Bf16, "bf16", 10, 80, 81, 82, 83, 84, 85)
EVO_WGMMA_DEFINE(176, Fp16, "f16", 11, 88, 89, 90, 91, 92, 93)
EVO_WGMMA_DEFINE(176, Bf16, "bf16", 11, 88, 89, 90, 91, 92, 93)
EVO_WGMMA_DEFINE(192, Fp16, "f16", 12, 96, 97, 98, 99, 100, 101)
EVO_WGMMA_DEFINE(192, Bf16, "bf16", 12, 96, 97, 98, 99, 100, 101)
EVO_WGMMA_DEFINE(208, Fp16, "f16", 13, 104, 105, 106, 107, 108, 109)
EVO_WGMMA_DEFINE(208, Bf16, "bf16", 13, 104, 105, 106, 107, 108, 109)
EVO_WGMMA_DEFINE(224, Fp16, "f16", 14, 112, 113, 114, 115, 116, 117)
EVO_WGMMA_DEFINE(224, Bf16, "bf16", 14, 112, 113, 114, 115, 116, 117)
EVO_WGMMA_DEFINE(240, Fp16, "f16", 15, 120, 121, 122, 123, 124, 125)
EVO_WGMMA_DEFINE(240, Bf16, "bf16", 15, 120, 121, 122, 123, 124, 125)
EVO_WGMMA_DEFINE(256, Fp16, "f16", 16, 128, 129, 130, 131, 132, 133)
EVO_WGMMA_DEFINE(256, Bf16, "bf16", 16, 128, 129, 130, 131, 132, 133)

#undef EVO_WGMMA_DEFINE
#undef EVO_WGMMA_OP
#undef EVO_WGMMA_ACC8
#undef EVO_WGMMA_R0
#undef EVO_WGMMA_R1
#undef EVO_WGMMA_R2
#undef EVO_WGMMA_R3
#undef EVO_WGMMA_R4
#undef EVO_WGMMA_R5
#undef EVO_WGMMA_R6
#undef EVO_WGMMA_R7
#undef EVO_WGMMA_R8
#undef EVO_WGMMA_R9
#undef EVO_WGMMA_R10
#undef EVO_WGMMA_R11
#undef EVO_WGMMA_R12
#undef EVO_WGMMA_R13
#undef EVO_WGMMA_R14
#undef EVO_WGMMA_R15
#undef EVO_WGMMA_L1
#undef EVO_WGMMA_D1
#undef EVO_WGMMA_L2
#undef EVO_WGMMA_D2
#undef EVO_WGMMA_L3
#undef EVO_WGMMA_D3
#undef EVO_WGMMA_L4
#undef EVO_WGMMA_D4
#undef EVO_WGMMA_L5
#undef EVO_WGMMA_D5
#undef EVO_WGMMA_L6
#undef EVO_WGMMA_D6
#undef EVO_WGMMA_L7
#undef EVO_WGMMA_D7
#undef EVO_WGMMA_L8
#undef EVO_WGMMA_ACC8
#undef EVO_WGMMA_L9
#undef EVO_WGMMA_D9
#undef EVO_WGMMA_L10
#undef EVO_WGMMA_D10
#undef EVO_WGMMA_L11
#undef EVO_WGMMA_D11
#undef EVO_WGMMA_L12
#undef EVO_WGMMA_D12
#undef EVO_WGMMA_L13
#undef EVO_WGMMA_D13
#undef EVO_WGMMA_L14
#undef EVO_WGMMA_D14
#undef EVO_WGMMA_L15
#undef EVO_WGMMA_D15
#undef EVO_WGMMA_L16
#undef EVO_WGMMA_D16

}  // namespace evo

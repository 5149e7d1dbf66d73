// evo's device library: the small pieces every kernel uses. Templates include these headers by
// name ("evo/core.cuh"); evo hands them to NVRTC and counts them in each template's version.
// NVRTC-clean: fp16 lives in unsigned short and every conversion is inline PTX.
#pragma once

// A template's check of its on/off knobs: fails to compile unless each of them is 0 or 1.
#define EVO_ASSERT_FLAGS(...) \
  static_assert(evo::all_flags(__VA_ARGS__), "each of " #__VA_ARGS__ " must be 0 or 1")

namespace evo {

template <class... Flags>
__host__ __device__ constexpr bool all_flags(Flags... flags) {
  return ((flags == 0 || flags == 1) && ...);
}

__host__ __device__ constexpr double const_sqrt(double x) {
  double r = x;
  for (int i = 0; i < 64; ++i) r = 0.5 * (r + x / r);
  return r;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// Volatile, so nothing derived from the thread index is hoisted out of a persistent tile loop:
// kept live across tiles, those addresses cost up to ~70 registers (spills at D = 128). Not
// __noinline__ instead, because ptxas -v would then report the spills under a second function.
__device__ __forceinline__ int thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The first source operand of cvt.f16x2 lands in the upper half, so hi goes first.
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float half_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ void st_shared_b32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void st_shared_v4(unsigned addr, const unsigned (&v)[4]) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

__device__ __forceinline__ unsigned ld_shared_b32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

__device__ __forceinline__ void ld_shared_v4(unsigned (&v)[4], unsigned addr) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void st_global_b32(void* p, unsigned v) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_global_v4(void* p, const unsigned (&v)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

// st_global_v4 for four floats (kept in float registers: through st_global_v4 ptxas needed
// one more register in sdpa_hopper's stream-K epilogue and spilled).
__device__ __forceinline__ void st_global_v4_f32(float* p, float a, float b, float c, float d) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

// Loads through L2 only (ld.global.cg): partials written by other SMs during this very kernel
// are never read from a stale L1 line. Volatile, with a memory clobber, so that they stay after
// the barrier that publishes them.
__device__ __forceinline__ float ld_global_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];\n" : "=f"(v) : "l"(p) : "memory");
  return v;
}

template <int N>
__device__ __forceinline__ void ld_global_cg_vec(float (&v)[N], const float* p) {
  static_assert(N % 2 == 0, "pairs of floats, 8-byte aligned");
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(v[i]), "=f"(v[i + 1]), "=f"(v[i + 2]), "=f"(v[i + 3])
                   : "l"(p + i)
                   : "memory");
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];\n"
                   : "=f"(v[i]), "=f"(v[i + 1])
                   : "l"(p + i)
                   : "memory");
    }
  }
}

}  // namespace evo

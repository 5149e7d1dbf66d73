// Hopper's warpgroup MMA (wgmma, sm_90a): the async-proxy fence, the wgmma group operations,
// shared-memory matrix descriptors for the 128-byte swizzle, and m64nNk16 fp16 MMAs with fp32
// accumulators for N = 64, 128 and 256. The descriptor fields and operand layouts were measured
// on an H100 (scripts/probes).
#pragma once

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
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
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

// The accumulator operands of an m64nNk16 wgmma: N / 2 fp32 registers per thread, d[0..N/2).
#define EVO_WGMMA_D8(i)                                                                       \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define EVO_WGMMA_D32 EVO_WGMMA_D8(0), EVO_WGMMA_D8(8), EVO_WGMMA_D8(16), EVO_WGMMA_D8(24)
#define EVO_WGMMA_D64 \
  EVO_WGMMA_D32, EVO_WGMMA_D8(32), EVO_WGMMA_D8(40), EVO_WGMMA_D8(48), EVO_WGMMA_D8(56)
#define EVO_WGMMA_D128                                                                   \
  EVO_WGMMA_D64, EVO_WGMMA_D8(64), EVO_WGMMA_D8(72), EVO_WGMMA_D8(80), EVO_WGMMA_D8(88), \
      EVO_WGMMA_D8(96), EVO_WGMMA_D8(104), EVO_WGMMA_D8(112), EVO_WGMMA_D8(120)

// "{%0, ..., %31}": the 32 accumulator registers of an m64n64k16 wgmma.
#define EVO_WGMMA_REGS32                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "          \
  "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, " \
  "%28, %29, %30, %31}"

// "{%0, ..., %63}": the 64 accumulator registers of an m64n128k16 wgmma.
#define EVO_WGMMA_REGS64                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "          \
  "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, " \
  "%28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, " \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63}"

// "{%0, ..., %127}": the 128 accumulator registers of an m64n256k16 wgmma.
#define EVO_WGMMA_REGS128                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "                        \
  "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, "               \
  "%28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "               \
  "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "               \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, "               \
  "%70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "               \
  "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "               \
  "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "   \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
  "%126, %127}"

template <int Width>
struct Wgmma;

template <>
struct Wgmma<64> {
  // d (+)= A * B^T with A and B K-major in shared memory (descriptors); d is overwritten when
  // accumulate is 0.
  static __device__ __forceinline__ void ss(float (&d)[32], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " EVO_WGMMA_REGS32
        ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : EVO_WGMMA_D32
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
  // MN-major in shared memory, read transposed.
  static __device__ __forceinline__ void rs(float (&d)[32], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " EVO_WGMMA_REGS32
        ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : EVO_WGMMA_D32
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<128> {
  // d (+)= A * B^T with A and B K-major in shared memory (descriptors); d is overwritten when
  // accumulate is 0.
  static __device__ __forceinline__ void ss(float (&d)[64], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " EVO_WGMMA_REGS64
        ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : EVO_WGMMA_D64
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
  // MN-major in shared memory, read transposed.
  static __device__ __forceinline__ void rs(float (&d)[64], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " EVO_WGMMA_REGS64
        ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : EVO_WGMMA_D64
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<256> {
  // d (+)= A * B^T with A and B K-major in shared memory (descriptors); d is overwritten when
  // accumulate is 0.
  static __device__ __forceinline__ void ss(float (&d)[128], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " EVO_WGMMA_REGS128
        ", %128, %129, p, 1, 1, 0, 0;\n}\n"
        : EVO_WGMMA_D128
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
  // MN-major in shared memory, read transposed.
  static __device__ __forceinline__ void rs(float (&d)[128], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " EVO_WGMMA_REGS128
        ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
        : EVO_WGMMA_D128
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

#undef EVO_WGMMA_D8
#undef EVO_WGMMA_D32
#undef EVO_WGMMA_D64
#undef EVO_WGMMA_D128
#undef EVO_WGMMA_REGS32
#undef EVO_WGMMA_REGS64
#undef EVO_WGMMA_REGS128

}  // namespace evo

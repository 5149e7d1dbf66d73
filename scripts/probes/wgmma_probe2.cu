// Probe 2: operands spanning two 128B-swizzle atoms.
// Test 3: D[64][64] = A[64][128] * B[64][128]^T, K-major, K split into two 64-wide atoms.
// Test 4: D[64][128] = A[64][64] * V[64][128], A from registers, V MN-major split into two
//         64-wide n-atoms 8 KiB apart (LBO = 8192), m64n128k16 transposed B.
#include <cstdint>
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ unsigned sw128(int r, int c) {
  return r * 128 + ((((c >> 3) ^ (r & 7))) << 4) + (c & 7) * 2;
}
__device__ __forceinline__ uint64_t desc(unsigned addr, unsigned lbo, unsigned sbo) {
  uint64_t d = 0;
  d |= (uint64_t)((addr & 0x3FFFF) >> 4);
  d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
  d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
  d |= (uint64_t)1 << 62;
  return d;
}
#define R8(b) "%" #b "0, %" #b "1, %" #b "2, %" #b "3, %" #b "4, %" #b "5, %" #b "6, %" #b "7"
#define D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define O8(d, b) "+f"(d[b + 0]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), "+f"(d[b + 6]), "+f"(d[b + 7])
#define DOUT32(d) O8(d, 0), O8(d, 8), O8(d, 16), O8(d, 24)
#define DOUT64(d) DOUT32(d), O8(d, 32), O8(d, 40), O8(d, 48), O8(d, 56)

__device__ __forceinline__ void wgmma_ss64(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " D32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : DOUT32(d) : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_rs128_tb(float (&d)[64], const unsigned (&a)[4], uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " D64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : DOUT64(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

template <int N>
__device__ void store_d(float* out, const float (&d)[N / 2]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  for (int i = 0; i < N / 2; ++i) {
    const int row = 16 * warp + g + 8 * ((i >> 1) & 1);
    const int col = 8 * (i >> 2) + 2 * t + (i & 1);
    out[row * N + col] = d[i];
  }
}

extern "C" __global__ void __launch_bounds__(128) probe2(const unsigned short* A, const unsigned short* B,
                                                        const unsigned short* V, float* D3, float* D4) {
  __shared__ __align__(1024) unsigned char sA[2 * 64 * 128];
  __shared__ __align__(1024) unsigned char sB[2 * 64 * 128];
  __shared__ __align__(1024) unsigned char sV[2 * 64 * 128];
  for (int i = threadIdx.x; i < 64 * 128; i += 128) {
    const int r = i / 128, c = i % 128;
    const unsigned off = (c / 64) * 8192 + sw128(r, c % 64);
    *reinterpret_cast<unsigned short*>(sA + off) = A[i];
    *reinterpret_cast<unsigned short*>(sB + off) = B[i];
    *reinterpret_cast<unsigned short*>(sV + off) = V[i];  // V [64 k][128 n]: same mapping
  }
  proxy_fence();
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  wg_fence();
  for (int ks = 0; ks < 8; ++ks) {
    const unsigned off = (ks / 4) * 8192 + (ks % 4) * 32;
    wgmma_ss64(d, desc(smem_u32(sA) + off, 16, 1024), desc(smem_u32(sB) + off, 16, 1024), ks > 0);
  }
  wg_commit();
  wg_wait0();
  store_d<64>(D3, d);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  float e[64];
  for (int i = 0; i < 64; ++i) e[i] = 0.f;
  unsigned a[4][4];
  for (int ks = 0; ks < 4; ++ks) {  // A's first 64 columns as the [64][64] left operand
    const int r0 = 16 * warp + g, c0 = 16 * ks + 2 * t;
    auto pair = [&](int r, int c) { return (unsigned)A[r * 128 + c] | ((unsigned)A[r * 128 + c + 1] << 16); };
    a[ks][0] = pair(r0, c0);
    a[ks][1] = pair(r0 + 8, c0);
    a[ks][2] = pair(r0, c0 + 8);
    a[ks][3] = pair(r0 + 8, c0 + 8);
  }
  wg_fence();
  for (int ks = 0; ks < 4; ++ks) {
    wgmma_rs128_tb(e, a[ks], desc(smem_u32(sV) + 2048 * ks, 8192, 1024), ks > 0);
  }
  wg_commit();
  wg_wait0();
  store_d<128>(D4, e);
}

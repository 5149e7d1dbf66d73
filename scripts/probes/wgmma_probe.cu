// Probe: wgmma m64n64k16 f16 -> f32 with 128B-swizzled shared-memory operands.
// Test 1: D = A * B^T, A [64][64] and B [64][64] both K-major (row = m or n, 64 k contiguous).
// Test 2: D = A * V, A from registers, V [64 k][64 n] MN-major (n contiguous) -> transposed B.
#include <cstdint>

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// byte offset of element (r, c) in a [rows][64] fp16 tile, 128-byte rows, 128B swizzle
__device__ __forceinline__ unsigned sw128(int r, int c) {
  return r * 128 + ((((c >> 3) ^ (r & 7))) << 4) + (c & 7) * 2;
}
__device__ __forceinline__ uint64_t desc(unsigned addr, unsigned lbo, unsigned sbo) {
  uint64_t d = 0;
  d |= (uint64_t)((addr & 0x3FFFF) >> 4);
  d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
  d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
  d |= (uint64_t)1 << 62;  // 128B swizzle
  return d;
}

#define D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define DOUT(d) "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

__device__ __forceinline__ void wgmma_ss(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " D32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
               : DOUT(d) : "l"(da), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wgmma_rs_tb(float (&d)[32], const unsigned (&a)[4], uint64_t db, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " D32 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : DOUT(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ void store_d(float* out, const float (&d)[32]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 32; ++i) {
    const int row = 16 * warp + g + 8 * ((i >> 1) & 1);
    const int col = 8 * (i >> 2) + 2 * t + (i & 1);
    out[row * 64 + col] = d[i];
  }
}

extern "C" __global__ void __launch_bounds__(128) probe(const unsigned short* A, const unsigned short* B,
                                                       const unsigned short* V, float* D1, float* D2,
                                                       int lbo_v) {
  __shared__ __align__(1024) unsigned char sA[64 * 128];
  __shared__ __align__(1024) unsigned char sB[64 * 128];
  __shared__ __align__(1024) unsigned char sV[64 * 128];
  for (int i = threadIdx.x; i < 64 * 64; i += 128) {
    const int r = i / 64, c = i % 64;
    *reinterpret_cast<unsigned short*>(sA + sw128(r, c)) = A[i];
    *reinterpret_cast<unsigned short*>(sB + sw128(r, c)) = B[i];
    *reinterpret_cast<unsigned short*>(sV + sw128(r, c)) = V[i];
  }
  proxy_fence();
  __syncthreads();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  wg_fence();
  for (int ks = 0; ks < 4; ++ks) {
    wgmma_ss(d, desc(smem_u32(sA) + 32 * ks, 16, 1024), desc(smem_u32(sB) + 32 * ks, 16, 1024), ks > 0);
  }
  wg_commit();
  wg_wait0();
  store_d(D1, d);

  // Test 2: A fragments from global in the m16n8k16 A layout per warp.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  float e[32];
  for (int i = 0; i < 32; ++i) e[i] = 0.f;
  unsigned a[4][4];
  for (int ks = 0; ks < 4; ++ks) {
    const int r0 = 16 * warp + g, c0 = 16 * ks + 2 * t;
    auto pair = [&](int r, int c) {
      return (unsigned)A[r * 64 + c] | ((unsigned)A[r * 64 + c + 1] << 16);
    };
    a[ks][0] = pair(r0, c0);
    a[ks][1] = pair(r0 + 8, c0);
    a[ks][2] = pair(r0, c0 + 8);
    a[ks][3] = pair(r0 + 8, c0 + 8);
  }
  wg_fence();
  for (int ks = 0; ks < 4; ++ks) {
    wgmma_rs_tb(e, a[ks], desc(smem_u32(sV) + 2048 * ks, lbo_v, 1024), ks > 0);
  }
  wg_commit();
  wg_wait0();
  store_d(D2, e);
}

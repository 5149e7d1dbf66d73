// Flash-attention forward on Hopper's warpgroup MMA (wgmma, sm_90a): O = softmax(Q K^T / sqrt(D)) V
// for fp16 Q, K, V, O in [B, H, S, D] with fp32 accumulation.
//
// A CTA has NUM_WG warpgroups of 4 warps; each owns 64 query rows (BLOCK_M = 64 * NUM_WG).
// Q, K and V tiles sit in shared memory in the 128-byte swizzled layout wgmma reads through
// matrix descriptors: a [rows][D] tile is stored as D / 64 column blocks of [rows][64], each row
// 128 bytes with its 16-byte chunk c at ((c ^ (row & 7)) << 4). S = Q K^T takes Q and K from
// shared memory (both K-major); O += P V takes P from registers (the accumulator of S repacked
// to fp16, the m16n8k16 A fragment of each warp) and V from shared memory read transposed
// (MN-major). No ldmatrix: the tensor cores read the operands themselves. K and V travel
// through a cp.async pipeline STAGES deep; the online softmax is sdpa_fp16's. The layouts and
// descriptor fields were established on an H100 by scripts/probes.
//
// Knobs (NUM_WG, BLOCK_N, STAGES, FAST_EXP) and problem defines (HEAD_DIM, IS_CAUSAL) are
// prepended by evo. NVRTC-clean: no #include. Needs sm_90a.

#if !defined(NUM_WG) || !defined(BLOCK_N) || !defined(STAGES) || !defined(FAST_EXP)
#error "sdpa_fp16_wgmma.cu needs NUM_WG, BLOCK_N, STAGES and FAST_EXP defined"
#endif
#if !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "sdpa_fp16_wgmma.cu needs HEAD_DIM and IS_CAUSAL defined"
#endif
static_assert(NUM_WG >= 1 && NUM_WG <= 2, "NUM_WG must be 1 or 2");
static_assert(BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N must be 64 or 128");
static_assert(STAGES >= 1 && STAGES <= 4, "STAGES must be in [1, 4]");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256,
              "HEAD_DIM must be 64, 128 or 256");
static_assert(FAST_EXP == 0 || FAST_EXP == 1, "FAST_EXP must be 0 or 1");
static_assert(IS_CAUSAL == 0 || IS_CAUSAL == 1, "IS_CAUSAL must be 0 or 1");
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != 900 || !defined(__CUDA_ARCH_FEAT_SM90_ALL))
#error "sdpa_fp16_wgmma needs sm_90a (wgmma)"
#endif

namespace sdpa_wg {

// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WG * 128,
  kBlockM = NUM_WG * 64,
  kNFrags = BLOCK_N / 8,         // n8 column groups of S per thread row pair
  kChunksPerRow = HEAD_DIM / 8,  // 16-byte chunks of a row
  kQTileBytes = kBlockM * HEAD_DIM * 2,
  kKVTileBytes = BLOCK_N * HEAD_DIM * 2,
};

__host__ __device__ constexpr double const_sqrt(double x) {
  double r = x;
  for (int i = 0; i < 64; ++i) r = 0.5 * (r + x / r);
  return r;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// ---- PTX wrappers ----

__device__ __forceinline__ int thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// src_bytes = 0 zero-fills the 16 destination bytes without reading src.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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

// The first source operand of cvt.f16x2 lands in the upper half, so hi goes first.
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void st_global_b32(void* p, unsigned v) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// A shared-memory matrix descriptor for the 128-byte swizzle: start address, leading byte
// offset (between 64-column blocks along M/N of a transposed operand; unused for K-major),
// stride byte offset 1024 (between groups of 8 rows of 128 bytes).
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned leading_bytes) {
  return static_cast<unsigned long long>((addr & 0x3FFFFu) >> 4) |
         (static_cast<unsigned long long>((leading_bytes & 0x3FFFFu) >> 4) << 16) |
         (static_cast<unsigned long long>(1024 >> 4) << 32) | (1ull << 62);
}

template <int N>
struct Wgmma;

template <>
struct Wgmma<64> {
  // d (+)= A * B^T with A and B K-major in shared memory (descriptors).
  static __device__ __forceinline__ void ss(float (&d)[32], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
  // MN-major in shared memory, read transposed.
  static __device__ __forceinline__ void rs(float (&d)[32], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<128> {
  // d (+)= A * B^T with A and B K-major in shared memory (descriptors).
  static __device__ __forceinline__ void ss(float (&d)[64], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
        "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
        "%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
  // MN-major in shared memory, read transposed.
  static __device__ __forceinline__ void rs(float (&d)[64], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
        "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
        "%63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct Wgmma<256> {
  // d (+)= A * B^T with A and B K-major in shared memory (descriptors).
  static __device__ __forceinline__ void ss(float (&d)[128], unsigned long long a,
                                            unsigned long long b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
        "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
        "%63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "
        "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, "
        "%99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, "
        "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(a), "l"(b), "r"(accumulate));
  }
  // d += A * B with A in registers (the m16n8k16 A fragment of each warp's 16 rows) and B
  // MN-major in shared memory, read transposed.
  static __device__ __forceinline__ void rs(float (&d)[128], const unsigned (&a)[4],
                                            unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
        "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
        "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
        "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
        "%63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "
        "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, "
        "%99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, "
        "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
          "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
          "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
          "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
          "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
          "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
          "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
          "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
          "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
          "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
          "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

// ---- end of PTX wrappers ----

// Byte offset of 16-byte chunk c of row r in a [ROWS][HEAD_DIM] fp16 tile stored as 128-byte
// swizzled column blocks of 64 columns.
template <int ROWS>
__device__ __forceinline__ unsigned tile_offset(int r, int c) {
  return static_cast<unsigned>((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] fp16 matrix into a tile; rows past
// num_rows are zero-filled from a clamped (valid) address.
template <int ROWS>
__device__ __forceinline__ void load_tile_async(unsigned smem_tile,
                                                const unsigned short* __restrict__ src, int row0,
                                                int num_rows, int tid) {
  constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
    const int idx = i * kThreads + tid;
    if (kChunks % kThreads == 0 || idx < kChunks) {
      const int r = idx / kChunksPerRow;
      const int c = idx % kChunksPerRow;
      const int row = row0 + r;
      const bool valid = row < num_rows;
      const unsigned short* p = src + static_cast<long long>(valid ? row : 0) * HEAD_DIM + c * 8;
      cp_async_16(smem_tile + tile_offset<ROWS>(r, c), p, valid ? 16 : 0);
    }
  }
}

__device__ __forceinline__ int kv_tile_count(int m_tile, int S_q, int S_kv) {
  const int m_start = m_tile * kBlockM;
  // Causal (top-left): the last valid row of the m-tile sees keys [0, last_row].
  const int kv_end = IS_CAUSAL ? imin(S_kv, imin(m_start + kBlockM, S_q)) : S_kv;
  return (kv_end + BLOCK_N - 1) / BLOCK_N;
}

__device__ __forceinline__ void attention_tile(const unsigned short* __restrict__ Q,
                                               const unsigned short* __restrict__ K,
                                               const unsigned short* __restrict__ V,
                                               unsigned short* __restrict__ O, int bh, int m_tile,
                                               int S_q, int S_kv, unsigned smem_base) {
#if FAST_EXP
  const float scale_log2 = static_cast<float>(1.4426950408889634 / const_sqrt(HEAD_DIM));
#else
  const float scale = static_cast<float>(1.0 / const_sqrt(HEAD_DIM));
#endif
  const int tid = thread_index();
  const int warpgroup = tid / 128;
  const int warp = (tid / 32) % 4;  // within the warpgroup
  const int lane = tid % 32;
  const int group = lane >> 2;  // fragment row within an 8-row half
  const int quad = lane & 3;    // fragment column pair

  const unsigned short* q_head = Q + static_cast<long long>(bh) * S_q * HEAD_DIM;
  const unsigned short* k_head = K + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned short* v_head = V + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  unsigned short* o_head = O + static_cast<long long>(bh) * S_q * HEAD_DIM;

  const unsigned q_smem = smem_base;
  const unsigned k_smem = q_smem + kQTileBytes;  // STAGES K tiles, then STAGES V tiles
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;

  const int m_start = m_tile * kBlockM;
  const int wg_row0 = warpgroup * 64;  // within the m-tile
  const int wg_last_row = m_start + wg_row0 + 63;
  const int thread_row = m_start + wg_row0 + warp * 16 + group;  // and thread_row + 8
  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);

  float acc[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.f;
  float row_max[2] = {neg_inf(), neg_inf()};
  float row_sum[2] = {0.f, 0.f};

  // Q rides in the first commit group; with STAGES >= 2, groups are committed even when empty so
  // that wait_group STAGES-2 always means "tile j has landed".
  load_tile_async<kBlockM>(q_smem, q_head, m_start, S_q, tid);
  if constexpr (STAGES == 1) cp_async_commit();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_kv_tiles) {
      load_tile_async<BLOCK_N>(k_smem + s * kKVTileBytes, k_head, s * BLOCK_N, S_kv, tid);
      load_tile_async<BLOCK_N>(v_smem + s * kKVTileBytes, v_head, s * BLOCK_N, S_kv, tid);
    }
    cp_async_commit();
  }

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j % STAGES;
    if constexpr (STAGES == 1) {
      // The one K/V buffer is overwritten here: every warp must have finished tile j-1's wgmmas
      // first (a warpgroup can run a whole tile ahead of another otherwise).
      if (j > 0) __syncthreads();
      load_tile_async<BLOCK_N>(k_smem, k_head, j * BLOCK_N, S_kv, tid);
      load_tile_async<BLOCK_N>(v_smem, v_head, j * BLOCK_N, S_kv, tid);
      cp_async_commit();
      cp_async_wait<0>();
    } else {
      cp_async_wait<STAGES - 2>();
    }
    fence_proxy_async();
    // Tile j is visible to the tensor cores of every warpgroup, and every warpgroup has
    // finished (wgmma.wait_group 0) reading stage (j-1) % STAGES, which the prefetch overwrites.
    __syncthreads();
    if constexpr (STAGES > 1) {
      const int jn = j + STAGES - 1;
      if (jn < num_kv_tiles) {
        const int write_stage = jn % STAGES;
        load_tile_async<BLOCK_N>(k_smem + write_stage * kKVTileBytes, k_head, jn * BLOCK_N, S_kv,
                                 tid);
        load_tile_async<BLOCK_N>(v_smem + write_stage * kKVTileBytes, v_head, jn * BLOCK_N, S_kv,
                                 tid);
      }
      cp_async_commit();
    }

    const int n_start = j * BLOCK_N;
    // Warpgroup-uniform (wgmma needs all four warps): under causal masking a warpgroup whose
    // rows all precede this tile has nothing to add.
    if (IS_CAUSAL && n_start > wg_last_row) continue;
    const unsigned k_tile = k_smem + stage * kKVTileBytes;
    const unsigned v_tile = v_smem + stage * kKVTileBytes;

    // S = Q K^T for this warpgroup's 64 rows: k16 steps walk 32 bytes inside a 64-column block.
    float s[BLOCK_N / 2];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < HEAD_DIM / 16; ++ks) {
      const unsigned q_addr = q_smem + (ks / 4) * kBlockM * 128 + wg_row0 * 128 + (ks % 4) * 32;
      const unsigned k_addr = k_tile + (ks / 4) * BLOCK_N * 128 + (ks % 4) * 32;
      Wgmma<BLOCK_N>::ss(s, smem_desc(q_addr, 16), smem_desc(k_addr, 16), ks > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait_all();

    // Register i of S holds row thread_row + 8 * ((i >> 1) & 1), column
    // n_start + 8 * (i >> 2) + 2 * quad + (i & 1): the m16n8 fragments of each warp along N.
    if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start + wg_row0)) {
      const int cols_left = S_kv - n_start - quad * 2;
      const int diagonal = thread_row - n_start - quad * 2;
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i) {
        const int col_offset = 8 * (i >> 2) + (i & 1);
        const int row_offset = ((i >> 1) & 1) << 3;
        if (col_offset >= cols_left || (IS_CAUSAL && col_offset - row_offset > diagonal)) {
          s[i] = neg_inf();
        }
      }
    }

    // Online softmax over each thread's two rows; the four lanes of a quad share a row, so row
    // statistics are reduced over lanes xor 1 and xor 2, within a lane as pairwise trees.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tree[kNFrags];
#pragma unroll
      for (int nf = 0; nf < kNFrags; ++nf) {
        tree[nf] = fmaxf(s[4 * nf + 2 * h], s[4 * nf + 2 * h + 1]);
      }
#pragma unroll
      for (int stride = 1; stride < kNFrags; stride *= 2) {
#pragma unroll
        for (int nf = 0; nf + stride < kNFrags; nf += 2 * stride) {
          tree[nf] = fmaxf(tree[nf], tree[nf + stride]);
        }
      }
      float mx = fmaxf(row_max[h], tree[0]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // A row with every score so far masked keeps max = -inf; using 0 as the reference avoids
      // (-inf) - (-inf) = NaN and still maps masked scores to exp(-inf) = 0.
      const float m_ref = mx == neg_inf() ? 0.f : mx;
#if FAST_EXP
      const float neg_m_scaled = -m_ref * scale_log2;
      alpha[h] = exp2_approx(fmaf(row_max[h], scale_log2, neg_m_scaled));
#else
      alpha[h] = expf((row_max[h] - m_ref) * scale);
#endif
      row_max[h] = mx;
#pragma unroll
      for (int nf = 0; nf < kNFrags; ++nf) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
#if FAST_EXP
          s[4 * nf + e] = exp2_approx(fmaf(s[4 * nf + e], scale_log2, neg_m_scaled));
#else
          s[4 * nf + e] = expf((s[4 * nf + e] - m_ref) * scale);
#endif
        }
        tree[nf] = s[4 * nf + 2 * h] + s[4 * nf + 2 * h + 1];
      }
#pragma unroll
      for (int stride = 1; stride < kNFrags; stride *= 2) {
#pragma unroll
        for (int nf = 0; nf + stride < kNFrags; nf += 2 * stride) tree[nf] += tree[nf + stride];
      }
      row_sum[h] = row_sum[h] * alpha[h] + tree[0];
    }
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] *= alpha[(i >> 1) & 1];

    // O += P V. The S registers of column groups 2kk and 2kk+1 are exactly the A fragment of
    // k16 step kk; V is read transposed, its 64-column blocks BLOCK_N * 128 bytes apart.
    unsigned p[BLOCK_N / 16][4];
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
      p[kk][0] = pack_half2(s[8 * kk + 0], s[8 * kk + 1]);
      p[kk][1] = pack_half2(s[8 * kk + 2], s[8 * kk + 3]);
      p[kk][2] = pack_half2(s[8 * kk + 4], s[8 * kk + 5]);
      p[kk][3] = pack_half2(s[8 * kk + 6], s[8 * kk + 7]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
      Wgmma<HEAD_DIM>::rs(acc, p[kk], smem_desc(v_tile + kk * 16 * 128, BLOCK_N * 128));
    }
    wgmma_commit();
    wgmma_wait_all();
  }

  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  cp_async_wait<0>();

  // Epilogue: normalize and store each thread's fp16 pairs.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = row_sum[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = thread_row + 8 * h;
    if (row < S_q) {
#pragma unroll
      for (int df = 0; df < HEAD_DIM / 8; ++df) {
        const unsigned v = pack_half2(acc[4 * df + 2 * h] * inv, acc[4 * df + 2 * h + 1] * inv);
        st_global_b32(o_head + static_cast<long long>(row) * HEAD_DIM + 8 * df + 2 * quad, v);
      }
    }
  }
}

}  // namespace sdpa_wg

extern "C" __global__ void __launch_bounds__(NUM_WG * 128, 1)
    sdpa_fp16_wgmma_fwd(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
                        const unsigned short* __restrict__ V, unsigned short* __restrict__ O, int B,
                        int H, int S_q, int S_kv) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned smem_base = sdpa_wg::smem_u32(smem);
  const int num_m_tiles = (S_q + sdpa_wg::kBlockM - 1) / sdpa_wg::kBlockM;
  // Under causal masking, launch the heavy (late) m-tiles first.
  const int m_tile =
      IS_CAUSAL ? num_m_tiles - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  if (m_tile < 0 || m_tile >= num_m_tiles) return;
  sdpa_wg::attention_tile(Q, K, V, O, blockIdx.z * H + blockIdx.y, m_tile, S_q, S_kv, smem_base);
}

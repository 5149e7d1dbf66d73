// Flash-attention forward with FP8 E4M3 keys and values: O = softmax(Q K^T / sqrt(D)) V where
// K = K8 * K_scale[b, h] and V = V8 * V_scale[b, h]. O is fp16 in [B, H, S_q, D]; K8 and V8 are
// e4m3 bytes in [B, H, S_kv, D]; the scales are fp32 per (batch, head). Q is fp16, or with the
// problem's Q_FP8 e4m3 bytes Q8 with Q = Q8 * Q_scale[b, h].
//
// K8 and V8 travel through a cp.async pipeline STAGES deep as bytes (half the traffic of fp16);
// each landed stage is dequantized on the way into the tensor cores: cvt.rn.f16x2.e4m3x2 (exact:
// every e4m3 value is an fp16 value) into swizzled fp16 tiles read by ldmatrix and
// mma.sync m16n8k16. The scales never touch the elements: Q_scale and K_scale are folded into
// the softmax scale and V_scale into the final normalization. An e4m3 Q is dequantized once per
// tile, or, with QK_FP8_MMA, Q K^T takes the e4m3 bytes of Q and K as they are into
// mma.sync m16n8k32 e4m3: no K dequantization and half the MMA instructions. That MMA is native
// on sm_89; on sm_90 ptxas expands it into conversions and fp16 MMAs (Hopper's fp8 tensor-core
// path is wgmma), so there the knob trades shared-memory traffic for register conversions.
// Needs sm_89 (the e4m3 conversion and MMA).
//
// Knobs (BLOCK_M, BLOCK_N, NUM_WARPS, STAGES, FAST_EXP, PERSISTENT, QK_FP8_MMA) and problem
// defines (HEAD_DIM, IS_CAUSAL, Q_FP8) are prepended by evo. NVRTC-clean: no #include.

#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES)
#error "sdpa_fp8.cu needs BLOCK_M, BLOCK_N, NUM_WARPS and STAGES defined"
#endif
#if !defined(FAST_EXP) || !defined(PERSISTENT) || !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "sdpa_fp8.cu needs FAST_EXP, PERSISTENT, HEAD_DIM and IS_CAUSAL defined"
#endif
#if !defined(Q_FP8) || !defined(QK_FP8_MMA)
#error "sdpa_fp8.cu needs Q_FP8 and QK_FP8_MMA defined"
#endif

static_assert(NUM_WARPS >= 1 && NUM_WARPS <= 32, "NUM_WARPS must be in [1, 32]");
static_assert(BLOCK_M > 0 && BLOCK_M % (16 * NUM_WARPS) == 0,
              "BLOCK_M / NUM_WARPS (query rows per warp) must be a positive multiple of 16");
static_assert(BLOCK_N > 0 && BLOCK_N % 16 == 0, "BLOCK_N must be a positive multiple of 16");
static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in [1, 8]");
static_assert(HEAD_DIM > 0 && HEAD_DIM % 64 == 0 && HEAD_DIM <= 256,
              "HEAD_DIM must be 64, 128, 192 or 256");
static_assert(FAST_EXP == 0 || FAST_EXP == 1, "FAST_EXP must be 0 or 1");
static_assert(PERSISTENT == 0 || PERSISTENT == 1, "PERSISTENT must be 0 or 1");
static_assert(Q_FP8 == 0 || Q_FP8 == 1, "Q_FP8 must be 0 or 1");
static_assert(QK_FP8_MMA == 0 || QK_FP8_MMA == 1, "QK_FP8_MMA must be 0 or 1");
static_assert(Q_FP8 || !QK_FP8_MMA, "QK_FP8_MMA needs Q stored as e4m3 (Q_FP8)");
static_assert(IS_CAUSAL == 0 || IS_CAUSAL == 1, "IS_CAUSAL must be 0 or 1");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "sdpa_fp8 needs sm_89 or newer (cvt.rn.f16x2.e4m3x2, mma.sync e4m3)"
#endif

namespace sdpa8 {

#if Q_FP8
typedef unsigned char QElement;  // e4m3 bytes
#else
typedef unsigned short QElement;  // fp16 bits
#endif

// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WARPS * 32,
  kWarpRows = BLOCK_M / NUM_WARPS,
  kMFrags = kWarpRows / 16,              // m16 tiles per warp
  kNFrags = BLOCK_N / 8,                 // n8 tiles of S per KV tile
  kDFrags = HEAD_DIM / 8,                // n8 tiles of O
  kChunksPerRow = HEAD_DIM / 8,          // 16-byte chunks per fp16 smem row
  kFp8ChunksPerRow = HEAD_DIM / 16,      // 16-byte chunks per e4m3 row
  kQTileBytes = BLOCK_M * HEAD_DIM * 2,  // fp16 Q; the staging area of the O tile
  kQ8TileBytes = Q_FP8 ? BLOCK_M * HEAD_DIM : 0,
  kHalfTileBytes = BLOCK_N * HEAD_DIM * 2,  // one dequantized K or V tile
  kFp8TileBytes = BLOCK_N * HEAD_DIM,       // one e4m3 K or V tile of a stage
};

__host__ __device__ constexpr double const_sqrt(double x) {
  double r = x;
  for (int i = 0; i < 64; ++i) r = 0.5 * (r + x / r);
  return r;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// ---- PTX wrappers (all memory traffic and conversions of the kernel go through these) ----

// Volatile, so nothing derived from the thread index is hoisted out of the persistent tile loop:
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

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a * b with a 16x16 (row), b 16x8 (col), d 16x8 fp32.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
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

__device__ __forceinline__ void st_shared_b32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void ld_shared_v4(unsigned (&v)[4], unsigned addr) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void st_global_v4(void* p, const unsigned (&v)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

// Two e4m3 bytes (the first in the low byte) to an fp16 pair (the first in the low half).
__device__ __forceinline__ unsigned e4m3x2_to_half2(unsigned short pair) {
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(r) : "h"(pair));
  return r;
}

__device__ __forceinline__ void st_shared_v4(unsigned addr, const unsigned (&v)[4]) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

// ---- end of PTX wrappers ----

// Byte offset of 16-byte chunk c of row r in a [rows][HEAD_DIM] fp16 tile. XOR-ing the chunk with
// (r & 7) puts the 8 rows read by one ldmatrix 8x8 matrix on 8 distinct bank groups.
__device__ __forceinline__ unsigned swizzle(int r, int c) {
  return static_cast<unsigned>((r * HEAD_DIM + ((c ^ (r & 7)) << 3)) * 2);
}

// Byte offset of 16-byte chunk c of row r in a [rows][HEAD_DIM] e4m3 tile. The chunk is XOR-ed
// so that the 8 rows one ldmatrix 8x8 matrix reads (QK_FP8_MMA) land on 8 distinct bank groups:
// at D = 64 two rows share a 128-byte line, so the row pair index does the XOR-ing.
__device__ __forceinline__ unsigned swizzle8(int r, int c) {
  const int x = HEAD_DIM == 64 ? (r >> 1) & 3 : r & 7;
  return static_cast<unsigned>(r * HEAD_DIM + ((c ^ x) << 4));
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] fp16 matrix into a swizzled tile;
// rows past num_rows are zero-filled from a clamped (valid) address.
template <int ROWS>
__device__ __forceinline__ void load_half_tile_async(unsigned smem_tile,
                                                     const unsigned short* __restrict__ src,
                                                     int row0, int num_rows, int tid) {
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
      cp_async_16(smem_tile + swizzle(r, c), p, valid ? 16 : 0);
    }
  }
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] e4m3 matrix into a swizzled tile;
// rows past num_rows become zeros (e4m3 0x00).
template <int ROWS>
__device__ __forceinline__ void load_fp8_tile_async(unsigned smem_tile,
                                                    const unsigned char* __restrict__ src, int row0,
                                                    int num_rows, int tid) {
  constexpr int kChunks = ROWS * kFp8ChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
    const int idx = i * kThreads + tid;
    if (kChunks % kThreads == 0 || idx < kChunks) {
      const int r = idx / kFp8ChunksPerRow;
      const int c = idx % kFp8ChunksPerRow;
      const int row = row0 + r;
      const bool valid = row < num_rows;
      const unsigned char* p = src + static_cast<long long>(valid ? row : 0) * HEAD_DIM + c * 16;
      cp_async_16(smem_tile + swizzle8(r, c), p, valid ? 16 : 0);
    }
  }
}

// Dequantizes an e4m3 tile of ROWS rows into a swizzled fp16 tile: each 16-byte chunk of bytes
// becomes two 16-byte chunks of halves.
template <int ROWS>
__device__ __forceinline__ void dequantize_tile(unsigned fp8_tile, unsigned half_tile, int tid) {
  constexpr int kChunks = ROWS * kFp8ChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
    const int idx = i * kThreads + tid;
    if (kChunks % kThreads == 0 || idx < kChunks) {
      const int r = idx / kFp8ChunksPerRow;
      const int c = idx % kFp8ChunksPerRow;
      unsigned bytes[4];
      ld_shared_v4(bytes, fp8_tile + swizzle8(r, c));
      unsigned lo[4];
      unsigned hi[4];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        lo[2 * w] = e4m3x2_to_half2(static_cast<unsigned short>(bytes[w] & 0xffffu));
        lo[2 * w + 1] = e4m3x2_to_half2(static_cast<unsigned short>(bytes[w] >> 16));
        hi[2 * w] = e4m3x2_to_half2(static_cast<unsigned short>(bytes[w + 2] & 0xffffu));
        hi[2 * w + 1] = e4m3x2_to_half2(static_cast<unsigned short>(bytes[w + 2] >> 16));
      }
      st_shared_v4(half_tile + swizzle(r, 2 * c), lo);
      st_shared_v4(half_tile + swizzle(r, 2 * c + 1), hi);
    }
  }
}

__device__ __forceinline__ int kv_tile_count(int m_tile, int S_q, int S_kv) {
  const int m_start = m_tile * BLOCK_M;
  // Causal (top-left): the last valid row of the m-tile sees keys [0, last_row].
  const int kv_end = IS_CAUSAL ? imin(S_kv, imin(m_start + BLOCK_M, S_q)) : S_kv;
  return (kv_end + BLOCK_N - 1) / BLOCK_N;
}

// One (batch * head, m-tile) work item: BLOCK_M query rows against all visible keys.
__device__ __forceinline__ void attention_tile(
    const QElement* __restrict__ Q, const float* __restrict__ Q_scale,
    const unsigned char* __restrict__ K8, const unsigned char* __restrict__ V8,
    const float* __restrict__ K_scale, const float* __restrict__ V_scale,
    unsigned short* __restrict__ O, int bh, int m_tile, int S_q, int S_kv, unsigned smem_base) {
  // Scores as computed are (Q8 K8^T) or (Q K8^T); the factors of Q and K join the softmax scale.
  const float k_scale = Q_FP8 ? Q_scale[bh] * K_scale[bh] : K_scale[bh];
  const float v_scale = V_scale[bh];
#if FAST_EXP
  // exp(x k_scale / sqrt(D)) = exp2(x * log2(e) * k_scale / sqrt(D)).
  const float scale_log2 = static_cast<float>(1.4426950408889634 / const_sqrt(HEAD_DIM)) * k_scale;
#else
  const float scale = static_cast<float>(1.0 / const_sqrt(HEAD_DIM)) * k_scale;
#endif
  const int tid = thread_index();
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group = lane >> 2;  // mma fragment row within an 8-row half
  const int quad = lane & 3;    // mma fragment column pair

  const QElement* q_head = Q + static_cast<long long>(bh) * S_q * HEAD_DIM;
  const unsigned char* k_head = K8 + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned char* v_head = V8 + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  unsigned short* o_head = O + static_cast<long long>(bh) * S_q * HEAD_DIM;

  const unsigned q_smem = smem_base;
  const unsigned q8_smem = q_smem + kQTileBytes;   // Q_FP8: Q as it is stored
  const unsigned k_tile = q8_smem + kQ8TileBytes;  // dequantized, read by ldmatrix
  const unsigned v_tile = k_tile + (QK_FP8_MMA ? 0 : kHalfTileBytes);
  const unsigned k8_smem = v_tile + kHalfTileBytes;  // STAGES e4m3 K tiles, then STAGES V tiles
  const unsigned v8_smem = k8_smem + STAGES * kFp8TileBytes;

  const int m_start = m_tile * BLOCK_M;
  const int warp_row0 = warp * kWarpRows;  // within the m-tile
  const int warp_last_row = m_start + warp_row0 + kWarpRows - 1;
  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);

  const int qa_row = lane & 15;
  const int qa_chunk = lane >> 4;
  const int kb_row = (lane & 7) + ((lane >> 4) << 3);
  const int kb_chunk = (lane >> 3) & 1;
  const int vb_row = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int vb_chunk = lane >> 4;

  float acc[kMFrags][kDFrags][4];
  float row_max[kMFrags][2];
  float row_sum[kMFrags][2];
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
    for (int df = 0; df < kDFrags; ++df) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mf][df][e] = 0.f;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[mf][h] = neg_inf();
      row_sum[mf][h] = 0.f;
    }
  }

  // Q rides in the first commit group, or in a group of its own when it is dequantized before the
  // loop; with STAGES >= 2, groups are committed even when empty so that wait_group STAGES-2
  // always means "tile j has landed".
  constexpr bool kDequantizeQ = Q_FP8 && !QK_FP8_MMA;
#if Q_FP8
  load_fp8_tile_async<BLOCK_M>(q8_smem, q_head, m_start, S_q, tid);
#else
  load_half_tile_async<BLOCK_M>(q_smem, q_head, m_start, S_q, tid);
#endif
  if constexpr (STAGES == 1 || kDequantizeQ) cp_async_commit();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_kv_tiles) {
      load_fp8_tile_async<BLOCK_N>(k8_smem + s * kFp8TileBytes, k_head, s * BLOCK_N, S_kv, tid);
      load_fp8_tile_async<BLOCK_N>(v8_smem + s * kFp8TileBytes, v_head, s * BLOCK_N, S_kv, tid);
    }
    cp_async_commit();
  }
  if constexpr (kDequantizeQ) {
    cp_async_wait<STAGES - 1>();  // Q's group; the K/V prefetches stay in flight
    __syncthreads();
    dequantize_tile<BLOCK_M>(q8_smem, q_smem, tid);  // published by the loop's first barrier
  }

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j % STAGES;
    if constexpr (STAGES == 1) {
      load_fp8_tile_async<BLOCK_N>(k8_smem, k_head, j * BLOCK_N, S_kv, tid);
      load_fp8_tile_async<BLOCK_N>(v8_smem, v_head, j * BLOCK_N, S_kv, tid);
      cp_async_commit();
      cp_async_wait<0>();
    } else {
      cp_async_wait<STAGES - 2>();
    }
    // Tile j has landed for every thread, and every warp is done with the fp16 tiles of tile
    // j-1 (which the dequantization below overwrites) and with stage (j-1) % STAGES, dequantized
    // last iteration (which the prefetch below overwrites).
    __syncthreads();
    if constexpr (STAGES > 1) {
      const int jn = j + STAGES - 1;
      if (jn < num_kv_tiles) {
        const int write_stage = jn % STAGES;
        load_fp8_tile_async<BLOCK_N>(k8_smem + write_stage * kFp8TileBytes, k_head, jn * BLOCK_N,
                                     S_kv, tid);
        load_fp8_tile_async<BLOCK_N>(v8_smem + write_stage * kFp8TileBytes, v_head, jn * BLOCK_N,
                                     S_kv, tid);
      }
      cp_async_commit();
    }
    if constexpr (!QK_FP8_MMA) {
      dequantize_tile<BLOCK_N>(k8_smem + stage * kFp8TileBytes, k_tile, tid);
    }
    dequantize_tile<BLOCK_N>(v8_smem + stage * kFp8TileBytes, v_tile, tid);
    __syncthreads();

    const int n_start = j * BLOCK_N;
    // Warp-uniform: under causal masking a warp whose rows all precede this tile adds nothing.
    if (!IS_CAUSAL || n_start <= warp_last_row) {
      // S = Q K^T for this warp's rows.
      float s[kMFrags][kNFrags][4];
#pragma unroll
      for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
        for (int nf = 0; nf < kNFrags; ++nf) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mf][nf][e] = 0.f;
        }
      }
#if QK_FP8_MMA
      // The ldmatrix fragments of 8x16-byte matrices are exactly the e4m3 A and B fragments of
      // m16n8k32 (4 consecutive k per register), with the lane addressing of the fp16 path.
      const unsigned k8_stage = k8_smem + stage * kFp8TileBytes;
#pragma unroll
      for (int kd = 0; kd < HEAD_DIM / 32; ++kd) {
        unsigned qa[kMFrags][4];
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
          ldmatrix_x4(qa[mf], q8_smem + swizzle8(warp_row0 + mf * 16 + qa_row, kd * 2 + qa_chunk));
        }
#pragma unroll
        for (int np = 0; np < BLOCK_N / 16; ++np) {
          unsigned kb[4];
          ldmatrix_x4(kb, k8_stage + swizzle8(np * 16 + kb_row, kd * 2 + kb_chunk));
#pragma unroll
          for (int mf = 0; mf < kMFrags; ++mf) {
            mma_16832_e4m3(s[mf][2 * np], qa[mf], kb[0], kb[1]);
            mma_16832_e4m3(s[mf][2 * np + 1], qa[mf], kb[2], kb[3]);
          }
        }
      }
#else
#pragma unroll
      for (int kd = 0; kd < HEAD_DIM / 16; ++kd) {
        unsigned qa[kMFrags][4];
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
          ldmatrix_x4(qa[mf], q_smem + swizzle(warp_row0 + mf * 16 + qa_row, kd * 2 + qa_chunk));
        }
#pragma unroll
        for (int np = 0; np < BLOCK_N / 16; ++np) {
          unsigned kb[4];
          ldmatrix_x4(kb, k_tile + swizzle(np * 16 + kb_row, kd * 2 + kb_chunk));
#pragma unroll
          for (int mf = 0; mf < kMFrags; ++mf) {
            mma_16816(s[mf][2 * np], qa[mf], kb[0], kb[1]);
            mma_16816(s[mf][2 * np + 1], qa[mf], kb[2], kb[3]);
          }
        }
      }
#endif

      // Only tiles that reach past S_kv or cross the diagonal need the element mask.
      if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start)) {
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
          for (int nf = 0; nf < kNFrags; ++nf) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int row = m_start + warp_row0 + mf * 16 + group + ((e >> 1) << 3);
              const int col = n_start + nf * 8 + quad * 2 + (e & 1);
              if (col >= S_kv || (IS_CAUSAL && col > row)) s[mf][nf][e] = neg_inf();
            }
          }
        }
      }

      // Online softmax. Element e of a fragment belongs to row half h = e / 2; the four lanes of
      // a quad share a row, so row statistics are reduced over lanes xor 1 and xor 2.
#pragma unroll
      for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // Pairwise trees, not a running max or sum: a serial chain of 2 * kNFrags dependent
          // FMNMX / FADD stalls the warp on each result (as measured on sdpa_fp16).
          float tree[kNFrags];
#pragma unroll
          for (int nf = 0; nf < kNFrags; ++nf) {
            tree[nf] = fmaxf(s[mf][nf][2 * h], s[mf][nf][2 * h + 1]);
          }
#pragma unroll
          for (int stride = 1; stride < kNFrags; stride *= 2) {
#pragma unroll
            for (int nf = 0; nf + stride < kNFrags; nf += 2 * stride) {
              tree[nf] = fmaxf(tree[nf], tree[nf + stride]);
            }
          }
          float mx = fmaxf(row_max[mf][h], tree[0]);
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // A row with every score so far masked keeps max = -inf; using 0 as the reference
          // avoids (-inf) - (-inf) = NaN and still maps masked scores to exp(-inf) = 0.
          const float m_ref = mx == neg_inf() ? 0.f : mx;
#if FAST_EXP
          const float neg_m_scaled = -m_ref * scale_log2;
          const float alpha = exp2_approx(fmaf(row_max[mf][h], scale_log2, neg_m_scaled));
#else
          const float alpha = expf((row_max[mf][h] - m_ref) * scale);
#endif
          row_max[mf][h] = mx;
#pragma unroll
          for (int nf = 0; nf < kNFrags; ++nf) {
#pragma unroll
            for (int e = 2 * h; e < 2 * h + 2; ++e) {
#if FAST_EXP
              s[mf][nf][e] = exp2_approx(fmaf(s[mf][nf][e], scale_log2, neg_m_scaled));
#else
              s[mf][nf][e] = expf((s[mf][nf][e] - m_ref) * scale);
#endif
            }
            tree[nf] = s[mf][nf][2 * h] + s[mf][nf][2 * h + 1];
          }
#pragma unroll
          for (int stride = 1; stride < kNFrags; stride *= 2) {
#pragma unroll
            for (int nf = 0; nf + stride < kNFrags; nf += 2 * stride) {
              tree[nf] += tree[nf + stride];
            }
          }
          row_sum[mf][h] = row_sum[mf][h] * alpha + tree[0];
#pragma unroll
          for (int df = 0; df < kDFrags; ++df) {
            acc[mf][df][2 * h] *= alpha;
            acc[mf][df][2 * h + 1] *= alpha;
          }
        }
      }

      // O += P V. The accumulator fragments of n8 tiles 2kk and 2kk+1 are exactly the A fragment
      // (rows g / g+8, k pairs 2q and 2q+8) of k16 step kk, so P never leaves registers.
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
        unsigned pa[kMFrags][4];
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
          pa[mf][0] = pack_half2(s[mf][2 * kk][0], s[mf][2 * kk][1]);
          pa[mf][1] = pack_half2(s[mf][2 * kk][2], s[mf][2 * kk][3]);
          pa[mf][2] = pack_half2(s[mf][2 * kk + 1][0], s[mf][2 * kk + 1][1]);
          pa[mf][3] = pack_half2(s[mf][2 * kk + 1][2], s[mf][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < HEAD_DIM / 16; ++dp) {
          unsigned vb[4];
          ldmatrix_x4_trans(vb, v_tile + swizzle(kk * 16 + vb_row, dp * 2 + vb_chunk));
#pragma unroll
          for (int mf = 0; mf < kMFrags; ++mf) {
            mma_16816(acc[mf][2 * dp], pa[mf], vb[0], vb[1]);
            mma_16816(acc[mf][2 * dp + 1], pa[mf], vb[2], vb[3]);
          }
        }
      }
    }
  }

  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  cp_async_wait<0>();

  // Epilogue: normalize, stage this warp's rows in its own slice of the Q tile (read by no other
  // warp), then write whole 16-byte chunks to global memory.
  float inv_sum[kMFrags][2];
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mf][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv_sum[mf][h] = l > 0.f ? v_scale / l : 0.f;
    }
  }
  __syncwarp();
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp_row0 + mf * 16 + group + h * 8;
#pragma unroll
      for (int df = 0; df < kDFrags; ++df) {
        const unsigned v = pack_half2(acc[mf][df][2 * h] * inv_sum[mf][h],
                                      acc[mf][df][2 * h + 1] * inv_sum[mf][h]);
        st_shared_b32(q_smem + swizzle(r, df) + quad * 4, v);
      }
    }
  }
  __syncwarp();
  constexpr int kWarpChunks = kWarpRows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kWarpChunks / 32; ++i) {
    const int idx = i * 32 + lane;
    const int r = warp_row0 + idx / kChunksPerRow;
    const int c = idx % kChunksPerRow;
    const int row = m_start + r;
    if (row < S_q) {
      unsigned v[4];
      ld_shared_v4(v, q_smem + swizzle(r, c));
      st_global_v4(o_head + static_cast<long long>(row) * HEAD_DIM + c * 8, v);
    }
  }
}

}  // namespace sdpa8

// The signature follows the problem: an e4m3 Q comes with its per-head scale.
extern "C" __global__ void __launch_bounds__(NUM_WARPS * 32)
#if Q_FP8
    sdpa_fp8_fwd(const unsigned char* __restrict__ Q, const float* __restrict__ Q_scale,
#else
    sdpa_fp8_fwd(const unsigned short* __restrict__ Q,
#endif
                 const unsigned char* __restrict__ K8, const unsigned char* __restrict__ V8,
                 const float* __restrict__ K_scale, const float* __restrict__ V_scale,
                 unsigned short* __restrict__ O, int B, int H, int S_q, int S_kv) {
#if !Q_FP8
  const float* Q_scale = nullptr;  // read only when Q is e4m3
#endif
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned smem_base = sdpa8::smem_u32(smem);
  const int num_m_tiles = (S_q + BLOCK_M - 1) / BLOCK_M;
#if PERSISTENT
  const int num_bh = B * H;
  const int num_tiles = num_bh * num_m_tiles;
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    // Last m-tiles first (the most keys under causal masking), heads fastest.
    const int m_tile = num_m_tiles - 1 - tile / num_bh;
    sdpa8::attention_tile(Q, Q_scale, K8, V8, K_scale, V_scale, O, tile % num_bh, m_tile, S_q, S_kv,
                          smem_base);
    __syncthreads();  // the next tile's loads overwrite smem other warps may still read
  }
#else
  // Under causal masking, launch the heavy (late) m-tiles first.
  const int m_tile =
      IS_CAUSAL ? num_m_tiles - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  if (m_tile < 0 || m_tile >= num_m_tiles) return;
  sdpa8::attention_tile(Q, Q_scale, K8, V8, K_scale, V_scale, O, blockIdx.z * H + blockIdx.y,
                        m_tile, S_q, S_kv, smem_base);
#endif
}

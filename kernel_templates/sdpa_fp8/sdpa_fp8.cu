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
// defines (HEAD_DIM, IS_CAUSAL, Q_FP8) are prepended by evo. The PTX wrappers, the online
// softmax and the fp16 MMA loops come from evo's device library (include/evo), shared with
// sdpa_fp16; what is fp8's own (the e4m3 tiles, their dequantization, the e4m3 MMA) is here.

#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES) ||        \
    !defined(FAST_EXP) || !defined(PERSISTENT) || !defined(QK_FP8_MMA) || !defined(HEAD_DIM) || \
    !defined(IS_CAUSAL) || !defined(Q_FP8)
#error "sdpa_fp8.cu needs its knobs and problem defines, which evo prepends"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "sdpa_fp8 needs sm_89 or newer (cvt.rn.f16x2.e4m3x2, mma.sync e4m3)"
#endif

#include "evo/attention.cuh"
#include "evo/core.cuh"
#include "evo/cp_async.cuh"
#include "evo/fp8.cuh"
#include "evo/mma_sync.cuh"
#include "evo/mma_sync_attention.cuh"
#include "evo/online_softmax.cuh"

EVO_ASSERT_FLAGS(FAST_EXP, PERSISTENT, QK_FP8_MMA, Q_FP8, IS_CAUSAL);
static_assert(Q_FP8 || !QK_FP8_MMA, "QK_FP8_MMA needs Q stored as e4m3 (Q_FP8)");

namespace sdpa8 {

#if Q_FP8
typedef unsigned char QElement;  // e4m3 bytes
#else
typedef unsigned short QElement;  // fp16 bits
#endif

typedef evo::WarpTiling<BLOCK_M, BLOCK_N, NUM_WARPS, HEAD_DIM> Tiling;
// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WARPS * 32,
  kFp8ChunksPerRow = HEAD_DIM / 16,      // 16-byte chunks per e4m3 row
  kQTileBytes = BLOCK_M * HEAD_DIM * 2,  // fp16 Q; the staging area of the O tile
  kQ8TileBytes = Q_FP8 ? BLOCK_M * HEAD_DIM : 0,
  kHalfTileBytes = BLOCK_N * HEAD_DIM * 2,  // one dequantized K or V tile
  kFp8TileBytes = BLOCK_N * HEAD_DIM,       // one e4m3 K or V tile of a stage
};

__device__ __forceinline__ unsigned swizzle(int r, int c) { return evo::swizzle<HEAD_DIM>(r, c); }

// Byte offset of 16-byte chunk c of row r in a [rows][HEAD_DIM] e4m3 tile. The chunk is XOR-ed
// so that the 8 rows one ldmatrix 8x8 matrix reads (QK_FP8_MMA) land on 8 distinct bank groups:
// at D = 64 two rows share a 128-byte line, so the row pair index does the XOR-ing.
__device__ __forceinline__ unsigned swizzle8(int r, int c) {
  const int x = HEAD_DIM == 64 ? (r >> 1) & 3 : r & 7;
  return static_cast<unsigned>(r * HEAD_DIM + ((c ^ x) << 4));
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] fp16 matrix into a swizzled tile.
template <int ROWS>
__device__ __forceinline__ void load_half_tile_async(unsigned smem_tile,
                                                     const unsigned short* __restrict__ src,
                                                     int row0, int num_rows, int tid) {
  evo::load_rows_async<ROWS, HEAD_DIM, kThreads>(smem_tile, src, row0, num_rows, tid,
                                                 [](int r, int c) { return swizzle(r, c); });
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] e4m3 matrix into a swizzled tile.
template <int ROWS>
__device__ __forceinline__ void load_fp8_tile_async(unsigned smem_tile,
                                                    const unsigned char* __restrict__ src, int row0,
                                                    int num_rows, int tid) {
  evo::load_rows_async<ROWS, HEAD_DIM, kThreads>(smem_tile, src, row0, num_rows, tid,
                                                 [](int r, int c) { return swizzle8(r, c); });
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
      evo::ld_shared_v4(bytes, fp8_tile + swizzle8(r, c));
      unsigned lo[4];
      unsigned hi[4];
#pragma unroll
      for (int w = 0; w < 2; ++w) {
        lo[2 * w] = evo::e4m3x2_to_half2(static_cast<unsigned short>(bytes[w] & 0xffffu));
        lo[2 * w + 1] = evo::e4m3x2_to_half2(static_cast<unsigned short>(bytes[w] >> 16));
        hi[2 * w] = evo::e4m3x2_to_half2(static_cast<unsigned short>(bytes[w + 2] & 0xffffu));
        hi[2 * w + 1] = evo::e4m3x2_to_half2(static_cast<unsigned short>(bytes[w + 2] >> 16));
      }
      evo::st_shared_v4(half_tile + swizzle(r, 2 * c), lo);
      evo::st_shared_v4(half_tile + swizzle(r, 2 * c + 1), hi);
    }
  }
}

__device__ __forceinline__ int kv_tile_count(int m_tile, int S_q, int S_kv) {
  return evo::causal_kv_tiles<BLOCK_M, BLOCK_N, IS_CAUSAL>(m_tile, S_q, S_kv);
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
  const float softmax_scale = evo::softmax_scale<HEAD_DIM, FAST_EXP>() * k_scale;
  const int tid = evo::thread_index();
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
  const int warp_row0 = warp * Tiling::kWarpRows;  // within the m-tile
  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);

  const evo::AttentionLanes lanes = evo::attention_lanes(lane);

  float acc[Tiling::kMFrags][Tiling::kDFrags][4];
  float row_max[Tiling::kMFrags][2];
  float row_sum[Tiling::kMFrags][2];
  evo::start_rows(acc, row_max, row_sum);

  // Q rides in the first commit group, or in a group of its own when it is dequantized before the
  // loop.
  constexpr bool kDequantizeQ = Q_FP8 && !QK_FP8_MMA;
  const auto load_kv = [&](int tile, int buffer) {
    load_fp8_tile_async<BLOCK_N>(k8_smem + buffer * kFp8TileBytes, k_head, tile * BLOCK_N, S_kv,
                                 tid);
    load_fp8_tile_async<BLOCK_N>(v8_smem + buffer * kFp8TileBytes, v_head, tile * BLOCK_N, S_kv,
                                 tid);
  };
  evo::CpAsyncRing<STAGES>::prologue<kDequantizeQ>(
      num_kv_tiles,
      [&] {
#if Q_FP8
        load_fp8_tile_async<BLOCK_M>(q8_smem, q_head, m_start, S_q, tid);
#else
        load_half_tile_async<BLOCK_M>(q_smem, q_head, m_start, S_q, tid);
#endif
      },
      load_kv);
  if constexpr (kDequantizeQ) {
    evo::cp_async_wait<STAGES - 1>();  // Q's group; the K/V prefetches stay in flight
    __syncthreads();
    dequantize_tile<BLOCK_M>(q8_smem, q_smem, tid);  // published by the loop's first barrier
  }

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j % STAGES;
    evo::CpAsyncRing<STAGES>::wait(j, load_kv);
    // Tile j has landed for every thread, and every warp is done with the fp16 tiles of tile
    // j-1 (which the dequantization below overwrites) and with stage (j-1) % STAGES, dequantized
    // last iteration (which the prefetch below overwrites).
    __syncthreads();
    evo::CpAsyncRing<STAGES>::prefetch(j, num_kv_tiles, load_kv);
    if constexpr (!QK_FP8_MMA) {
      dequantize_tile<BLOCK_N>(k8_smem + stage * kFp8TileBytes, k_tile, tid);
    }
    dequantize_tile<BLOCK_N>(v8_smem + stage * kFp8TileBytes, v_tile, tid);
    __syncthreads();

    const int n_start = j * BLOCK_N;
    if (!IS_CAUSAL || Tiling::warp_sees(n_start, m_start + warp_row0)) {
      // S = Q K^T for this warp's rows.
      float s[Tiling::kMFrags][Tiling::kNFrags][4];
#if QK_FP8_MMA
      evo::zero_fragments(s);
      // The ldmatrix fragments of 8x16-byte matrices are exactly the e4m3 A and B fragments of
      // m16n8k32 (4 consecutive k per register), with the lane addressing of the fp16 path.
      const unsigned k8_stage = k8_smem + stage * kFp8TileBytes;
#pragma unroll
      for (int kd = 0; kd < HEAD_DIM / 32; ++kd) {
        unsigned q_frag[Tiling::kMFrags][4];
#pragma unroll
        for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
          evo::ldmatrix_x4(q_frag[mf], q8_smem + swizzle8(warp_row0 + mf * 16 + lanes.q.row,
                                                          kd * 2 + lanes.q.chunk));
        }
#pragma unroll
        for (int np = 0; np < BLOCK_N / 16; ++np) {
          unsigned k_frag[4];
          evo::ldmatrix_x4(k_frag,
                           k8_stage + swizzle8(np * 16 + lanes.k.row, kd * 2 + lanes.k.chunk));
#pragma unroll
          for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
            evo::mma_16832_e4m3(s[mf][2 * np], q_frag[mf], k_frag[0], k_frag[1]);
            evo::mma_16832_e4m3(s[mf][2 * np + 1], q_frag[mf], k_frag[2], k_frag[3]);
          }
        }
      }
#else
      evo::warp_scores<Tiling::kMFrags, BLOCK_N, HEAD_DIM>(
          s,
          [&](int mf, int kd) {
            return q_smem + swizzle(warp_row0 + mf * 16 + lanes.q.row, kd * 2 + lanes.q.chunk);
          },
          [&](int np, int kd) {
            return k_tile + swizzle(np * 16 + lanes.k.row, kd * 2 + lanes.k.chunk);
          });
#endif

      // Only tiles that reach past S_kv or cross the diagonal need the element mask.
      if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start)) {
        // A row and a column per element: with the two per-thread bounds of sdpa_fp16 instead,
        // ptxas spills small QK_FP8_MMA tiles (BLOCK_N = 32 with 64 or 128 threads).
#pragma unroll
        for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
          evo::mask_scores<Tiling::kNFrags>([&](int nf, int e) -> float& { return s[mf][nf][e]; },
                                            [&](int nf, int e) {
                                              const int row = m_start + warp_row0 + mf * 16 +
                                                              group + ((e >> 1) << 3);
                                              const int col = n_start + nf * 8 + quad * 2 + (e & 1);
                                              return col >= S_kv || (IS_CAUSAL && col > row);
                                            });
        }
      }

      // Online softmax, each thread's two rows of each m16 block in turn.
#pragma unroll
      for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float alpha = evo::online_softmax_row<Tiling::kNFrags, FAST_EXP>(
              [&](int nf, int i) -> float& { return s[mf][nf][2 * h + i]; }, row_max[mf][h],
              row_sum[mf][h], softmax_scale,
              [&](int nf, float p0, float p1) {
                s[mf][nf][2 * h] = p0;
                s[mf][nf][2 * h + 1] = p1;
              });
          evo::rescale_rows(acc[mf], h, alpha);
        }
      }

      unsigned p[Tiling::kMFrags][BLOCK_N / 16][4];
      evo::warp_accumulate_pv<Tiling::kMFrags, BLOCK_N, HEAD_DIM>(
          acc, p, [&](int kk) { evo::pack_probabilities(s, p, kk); },
          [&](int kk, int dp) {
            return v_tile + swizzle(kk * 16 + lanes.v.row, dp * 2 + lanes.v.chunk);
          });
    }
    if constexpr (QK_FP8_MMA) {
      // Q K^T read the e4m3 K of the stage itself, after the last barrier (the dequantizing
      // path reads fp16 copies made between the barriers). Without this, with one stage, a warp
      // that skips a tile under causal masking overwrote K while others still multiplied by it
      // (wrong results at 2,16,4096,128 causal); unmasked warps merely raced less visibly.
      evo::CpAsyncRing<STAGES>::release();
    }
  }

  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  evo::cp_async_wait<0>();

  // The warp's rows of the fp16 Q tile stage its output; V's scale joins the normalization.
  evo::warp_store_output<Tiling::kMFrags, HEAD_DIM>(acc, row_sum, v_scale, q_smem, o_head,
                                                    warp_row0, m_start, S_q, lane, group, quad);
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
  const unsigned smem_base = evo::smem_u32(smem);
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

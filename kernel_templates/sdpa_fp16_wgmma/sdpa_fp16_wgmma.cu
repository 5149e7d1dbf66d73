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
// through a cp.async pipeline STAGES deep; the online softmax is the device library's, shared
// with the mma.sync templates. The layouts and descriptor fields were established on an H100 by
// scripts/probes.
//
// Knobs (NUM_WG, BLOCK_N, STAGES, FAST_EXP) and problem defines (HEAD_DIM, IS_CAUSAL) are
// prepended by evo. Needs sm_90a.

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

#include "evo/attention.cuh"
#include "evo/core.cuh"
#include "evo/cp_async.cuh"
#include "evo/online_softmax.cuh"
#include "evo/wgmma.cuh"
#include "evo/wgmma_attention.cuh"

namespace sdpa_wg {

// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WG * 128,
  kBlockM = NUM_WG * 64,
  kQTileBytes = kBlockM * HEAD_DIM * 2,
  kKVTileBytes = BLOCK_N * HEAD_DIM * 2,
};

// Byte offset of 16-byte chunk c of row r in a [ROWS][HEAD_DIM] fp16 tile stored as 128-byte
// swizzled column blocks of 64 columns.
template <int ROWS>
__device__ __forceinline__ unsigned tile_offset(int r, int c) {
  return static_cast<unsigned>((c >> 3) * ROWS * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] fp16 matrix into a tile.
template <int ROWS>
__device__ __forceinline__ void load_tile_async(unsigned smem_tile,
                                                const unsigned short* __restrict__ src, int row0,
                                                int num_rows, int tid) {
  evo::load_rows_async<ROWS, HEAD_DIM, kThreads>(
      smem_tile, src, row0, num_rows, tid, [](int r, int c) { return tile_offset<ROWS>(r, c); });
}

__device__ __forceinline__ int kv_tile_count(int m_tile, int S_q, int S_kv) {
  return evo::causal_kv_tiles<kBlockM, BLOCK_N, IS_CAUSAL>(m_tile, S_q, S_kv);
}

__device__ __forceinline__ void attention_tile(const unsigned short* __restrict__ Q,
                                               const unsigned short* __restrict__ K,
                                               const unsigned short* __restrict__ V,
                                               unsigned short* __restrict__ O, int bh, int m_tile,
                                               int S_q, int S_kv, unsigned smem_base) {
  constexpr float kSoftmaxScale = evo::softmax_scale<HEAD_DIM, FAST_EXP>();
  const int tid = evo::thread_index();
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
  float row_max[2] = {evo::neg_inf(), evo::neg_inf()};
  float row_sum[2] = {0.f, 0.f};

  const auto load_kv = [&](int tile, int buffer) {
    load_tile_async<BLOCK_N>(k_smem + buffer * kKVTileBytes, k_head, tile * BLOCK_N, S_kv, tid);
    load_tile_async<BLOCK_N>(v_smem + buffer * kKVTileBytes, v_head, tile * BLOCK_N, S_kv, tid);
  };
  evo::CpAsyncRing<STAGES>::prologue(
      num_kv_tiles, [&] { load_tile_async<kBlockM>(q_smem, q_head, m_start, S_q, tid); }, load_kv);

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j % STAGES;
    // With one K/V buffer, tile j overwrites tile j-1: every warp must have finished tile j-1's
    // wgmmas first (a warpgroup can run a whole tile ahead of another otherwise).
    if (j > 0) evo::CpAsyncRing<STAGES>::release();
    evo::CpAsyncRing<STAGES>::wait(j, load_kv);
    evo::fence_proxy_async();
    // Tile j is visible to the tensor cores of every warpgroup, and every warpgroup has
    // finished (wgmma.wait_group 0) reading stage (j-1) % STAGES, which the prefetch overwrites.
    __syncthreads();
    evo::CpAsyncRing<STAGES>::prefetch(j, num_kv_tiles, load_kv);

    const int n_start = j * BLOCK_N;
    // Warpgroup-uniform (wgmma needs all four warps): under causal masking a warpgroup whose
    // rows all precede this tile has nothing to add.
    if (IS_CAUSAL && n_start > wg_last_row) continue;
    const unsigned k_tile = k_smem + stage * kKVTileBytes;
    const unsigned v_tile = v_smem + stage * kKVTileBytes;

    // S = Q K^T for this warpgroup's 64 rows.
    float s[BLOCK_N / 2];
    evo::wgmma_attention_scores<BLOCK_N, HEAD_DIM, kBlockM, evo::Fp16>(s, q_smem, wg_row0, k_tile);
    evo::wgmma_wait_all();

    // Masked where the tile passes S_kv or, causal, the warpgroup's first row; then the online
    // softmax over each thread's two rows.
    float alpha[2];
    if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start + wg_row0)) {
      evo::wgmma_attention_mask<BLOCK_N, IS_CAUSAL>(s, S_kv - n_start - quad * 2,
                                                    thread_row - n_start - quad * 2);
    }
    evo::wgmma_attention_softmax<BLOCK_N, FAST_EXP>(s, row_max, row_sum, kSoftmaxScale, alpha);
    evo::wgmma_attention_rescale<HEAD_DIM>(acc, alpha);

    // O += P V.
    unsigned p[BLOCK_N / 16][4];
    evo::wgmma_attention_pack<BLOCK_N, evo::Fp16>(s, p);
    evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, evo::Fp16>(acc, p, v_tile);
    evo::wgmma_wait_all();
  }

  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  evo::cp_async_wait<0>();

  // Epilogue: normalize and store each thread's fp16 pairs, each row's normalizer right before
  // its stores (2% faster at 2,8,2048,128 than both first).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float inv = evo::wgmma_attention_normalizer(row_sum[h]);
    const int row = thread_row + 8 * h;
    if (row < S_q)
      evo::wgmma_attention_store_row<evo::Fp16, HEAD_DIM>(o_head, acc, inv, h, row, quad);
  }
}

}  // namespace sdpa_wg

extern "C" __global__ void __launch_bounds__(NUM_WG * 128, 1)
    sdpa_fp16_wgmma_fwd(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
                        const unsigned short* __restrict__ V, unsigned short* __restrict__ O, int B,
                        int H, int S_q, int S_kv) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned smem_base = evo::smem_u32(smem);
  const int num_m_tiles = (S_q + sdpa_wg::kBlockM - 1) / sdpa_wg::kBlockM;
  // Under causal masking, launch the heavy (late) m-tiles first.
  const int m_tile =
      IS_CAUSAL ? num_m_tiles - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  if (m_tile < 0 || m_tile >= num_m_tiles) return;
  sdpa_wg::attention_tile(Q, K, V, O, blockIdx.z * H + blockIdx.y, m_tile, S_q, S_kv, smem_base);
}

// Flash-attention-2 style forward pass: O = softmax(Q K^T / sqrt(D)) V per (batch, head).
// fp16 Q, K, V, O in contiguous [B, H, S, D]; fp32 accumulation on tensor cores
// (mma.sync m16n8k16 fed by ldmatrix); online softmax with P kept in registers.
//
// WARP_SPECIALIZED adds one producer warp that issues every cp.async (Q and the K/V stages) and
// hands tiles over through mbarriers, so the NUM_WARPS consumer warps only compute and never
// meet at a CTA-wide barrier.
//
// Knobs (BLOCK_M, BLOCK_N, NUM_WARPS, STAGES, FAST_EXP, WARP_SPECIALIZED, PERSISTENT,
// LAZY_RESCALE) and problem defines (HEAD_DIM, IS_CAUSAL) are prepended by evo. The PTX
// wrappers, the online softmax and the warp's MMA loops come from evo's device library
// (include/evo), shared with sdpa_fp8.

#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES) || \
    !defined(FAST_EXP) || !defined(WARP_SPECIALIZED) || !defined(PERSISTENT) ||          \
    !defined(LAZY_RESCALE) || !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "sdpa_fp16.cu needs its knobs and problem defines, which evo prepends"
#endif

#include "evo/attention.cuh"
#include "evo/core.cuh"
#include "evo/cp_async.cuh"
#include "evo/mbarrier.cuh"
#include "evo/mma_sync_attention.cuh"
#include "evo/online_softmax.cuh"

EVO_ASSERT_FLAGS(FAST_EXP, WARP_SPECIALIZED, PERSISTENT, LAZY_RESCALE, IS_CAUSAL);
static_assert(WARP_SPECIALIZED == 0 || STAGES >= 2,
              "a producer warp needs at least two stages to load ahead of the consumers");

namespace sdpa {

typedef evo::WarpTiling<BLOCK_M, BLOCK_N, NUM_WARPS, HEAD_DIM> Tiling;
// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WARPS * 32,  // the computing (consumer) threads; the producer warp comes after
  kQTileBytes = BLOCK_M * HEAD_DIM * 2,
  kKVTileBytes = BLOCK_N * HEAD_DIM * 2,
};

__device__ __forceinline__ unsigned swizzle(int r, int c) { return evo::swizzle<HEAD_DIM>(r, c); }

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] matrix into a swizzled smem tile.
template <int ROWS, int LOADERS = kThreads>
__device__ __forceinline__ void load_tile_async(unsigned smem_tile,
                                                const unsigned short* __restrict__ src, int row0,
                                                int num_rows, int tid) {
  evo::load_rows_async<ROWS, HEAD_DIM, LOADERS>(smem_tile, src, row0, num_rows, tid,
                                                [](int r, int c) { return swizzle(r, c); });
}

__device__ __forceinline__ int kv_tile_count(int m_tile, int S_q, int S_kv) {
  return evo::causal_kv_tiles<BLOCK_M, BLOCK_N, IS_CAUSAL>(m_tile, S_q, S_kv);
}

// The warp-specialized hand-over: where its mbarriers are and how many work items and KV tiles
// this CTA has passed through (phases run on across the work items of a persistent CTA).
struct Handover {
  unsigned bars;  // q_full, q_empty, full[STAGES], empty[STAGES], 8 bytes each
  int item;
  int kv_base;
  __device__ unsigned q_full() const { return bars; }
  __device__ unsigned q_empty() const { return bars + 8; }
  __device__ unsigned full(int stage) const { return bars + 16 + 8 * stage; }
  __device__ unsigned empty(int stage) const { return bars + 16 + 8 * (STAGES + stage); }
};
enum : int { kHandoverBarriers = 2 + 2 * STAGES };

__device__ __forceinline__ void init_handover(unsigned bars) {
  evo::mbar_init(bars, 32);             // q_full: the producer's 32 lanes, through cp.async
  evo::mbar_init(bars + 8, NUM_WARPS);  // q_empty: one arrival per consumer warp
  for (int s = 0; s < STAGES; ++s) {
    evo::mbar_init(bars + 16 + 8 * s, 32);
    evo::mbar_init(bars + 16 + 8 * (STAGES + s), NUM_WARPS);
  }
}

// The producer warp's share of one work item: Q once the consumers are done with the previous
// item's Q tile (their output staging area), then every KV tile into the stage the consumers
// have released.
__device__ __forceinline__ void produce_tile(const unsigned short* __restrict__ Q,
                                             const unsigned short* __restrict__ K,
                                             const unsigned short* __restrict__ V, int bh,
                                             int m_tile, int S_q, int S_kv, unsigned smem_base,
                                             const Handover& handover, int lane) {
  const unsigned short* q_head = Q + static_cast<long long>(bh) * S_q * HEAD_DIM;
  const unsigned short* k_head = K + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned short* v_head = V + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned q_smem = smem_base;
  const unsigned k_smem = smem_base + kQTileBytes;
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;
  if (handover.item > 0) evo::mbar_wait(handover.q_empty(), (handover.item - 1) & 1);
  load_tile_async<BLOCK_M, 32>(q_smem, q_head, m_tile * BLOCK_M, S_q, lane);
  evo::cp_async_mbar_arrive(handover.q_full());
  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);
  for (int j = 0; j < num_kv_tiles; ++j) {
    const int use = handover.kv_base + j;
    const int stage = use % STAGES;
    if (use >= STAGES) evo::mbar_wait(handover.empty(stage), (use / STAGES - 1) & 1);
    load_tile_async<BLOCK_N, 32>(k_smem + stage * kKVTileBytes, k_head, j * BLOCK_N, S_kv, lane);
    load_tile_async<BLOCK_N, 32>(v_smem + stage * kKVTileBytes, v_head, j * BLOCK_N, S_kv, lane);
    evo::cp_async_mbar_arrive(handover.full(stage));
  }
}

// One (batch * head, m-tile) work item: BLOCK_M query rows against all visible keys.
__device__ __forceinline__ void attention_tile(const unsigned short* __restrict__ Q,
                                               const unsigned short* __restrict__ K,
                                               const unsigned short* __restrict__ V,
                                               unsigned short* __restrict__ O, int bh, int m_tile,
                                               int S_q, int S_kv, unsigned smem_base,
                                               const Handover& handover) {
  constexpr float kSoftmaxScale = evo::softmax_scale<HEAD_DIM, FAST_EXP>();
  const int tid = evo::thread_index();
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group = lane >> 2;  // mma fragment row within an 8-row half
  const int quad = lane & 3;    // mma fragment column pair

  const unsigned short* q_head = Q + static_cast<long long>(bh) * S_q * HEAD_DIM;
  const unsigned short* k_head = K + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned short* v_head = V + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  unsigned short* o_head = O + static_cast<long long>(bh) * S_q * HEAD_DIM;

  const unsigned q_smem = smem_base;
  const unsigned k_smem = smem_base + kQTileBytes;
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;

  const int m_start = m_tile * BLOCK_M;
  const int warp_row0 = warp * Tiling::kWarpRows;  // within the m-tile

  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);

  // ldmatrix addresses are one lane offset per operand pattern, XOR-ed with a constant per k16
  // step: rows 16-aligned keep (r & 7), so chunk 2k + b of row r sits at swizzle(r, b) ^ (k << 5).
  // Writing every step's address as swizzle(...) instead lets ptxas keep one register per
  // (pattern, step), which spills the D = 128 tiles.
  const evo::AttentionLanes lanes = evo::attention_lanes(lane);
  unsigned q_lane[Tiling::kMFrags];
#pragma unroll
  for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
    q_lane[mf] = swizzle(warp_row0 + mf * 16 + lanes.q.row, lanes.q.chunk);
  }
  const unsigned k_lane = swizzle(lanes.k.row, lanes.k.chunk);
  const unsigned v_lane = swizzle(lanes.v.row, lanes.v.chunk);

  float acc[Tiling::kMFrags][Tiling::kDFrags][4];
  float row_max[Tiling::kMFrags][2];
  float row_sum[Tiling::kMFrags]
               [2];  // per-thread partial over its columns; quad-reduced at the end
  evo::start_rows(acc, row_max, row_sum);

#if WARP_SPECIALIZED
  evo::mbar_wait(handover.q_full(), handover.item & 1);
#else
  const auto load_kv = [&](int tile, int buffer) {
    load_tile_async<BLOCK_N>(k_smem + buffer * kKVTileBytes, k_head, tile * BLOCK_N, S_kv, tid);
    load_tile_async<BLOCK_N>(v_smem + buffer * kKVTileBytes, v_head, tile * BLOCK_N, S_kv, tid);
  };
  evo::CpAsyncRing<STAGES>::prologue(
      num_kv_tiles, [&] { load_tile_async<BLOCK_M>(q_smem, q_head, m_start, S_q, tid); }, load_kv);
#endif

  int read_stage = 0;
  for (int j = 0; j < num_kv_tiles; ++j) {
#if WARP_SPECIALIZED
    read_stage = (handover.kv_base + j) % STAGES;
    evo::mbar_wait(handover.full(read_stage), ((handover.kv_base + j) / STAGES) & 1);
#else
    evo::CpAsyncRing<STAGES>::wait(j, load_kv);
    // Makes tile j visible to all warps and guarantees every warp is done with tile j-1, whose
    // stage the prefetch below overwrites.
    __syncthreads();
    evo::CpAsyncRing<STAGES>::prefetch(j, num_kv_tiles, load_kv, [&](int) {
      return read_stage == 0 ? STAGES - 1 : read_stage - 1;
    });
#endif

    const int n_start = j * BLOCK_N;
    if (!IS_CAUSAL || Tiling::warp_sees(n_start, m_start + warp_row0)) {
      const unsigned k_tile = k_smem + read_stage * kKVTileBytes;
      const unsigned v_tile = v_smem + read_stage * kKVTileBytes;

      float s[Tiling::kMFrags][Tiling::kNFrags][4];
      evo::warp_scores<Tiling::kMFrags, BLOCK_N, HEAD_DIM>(
          s, [&](int mf, int kd) { return q_smem + (q_lane[mf] ^ (kd << 5)); },
          [&](int np, int kd) { return k_tile + np * 16 * HEAD_DIM * 2 + (k_lane ^ (kd << 5)); });

      // Only tiles that reach past S_kv or cross the diagonal need the element mask.
      if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start)) {
        const int cols_left = S_kv - n_start - quad * 2;
        const int diagonal = m_start + warp_row0 + group - n_start - quad * 2;
#pragma unroll
        for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
          evo::mask_scores<Tiling::kNFrags>(
              [&](int nf, int e) -> float& { return s[mf][nf][e]; },
              evo::OutOfBoundsOrFuture<IS_CAUSAL>{cols_left, diagonal + mf * 16});
        }
      }

      // LAZY_RESCALE keeps every row's alpha until a warp vote after the softmax, and pays for
      // those registers by packing each pair of probabilities to fp16 as soon as it exists (the
      // fp32 scores die during the softmax: at D = 128, BLOCK_N = 64 with two m16 tiles per warp
      // this is the difference between spilling and not). Without it the scores are packed just
      // before P V, which leaves ptxas more freedom to schedule (faster on most D = 64 tiles).
      unsigned p_frag[Tiling::kMFrags][BLOCK_N / 16][4];
#if LAZY_RESCALE
      float alpha[Tiling::kMFrags][2];
      bool max_moved = false;
#endif
#pragma unroll
      for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#if LAZY_RESCALE
          const float previous_max = row_max[mf][h];
#endif
          const float row_alpha = evo::online_softmax_row<Tiling::kNFrags, FAST_EXP>(
              [&](int nf, int i) -> float& { return s[mf][nf][2 * h + i]; }, row_max[mf][h],
              row_sum[mf][h], kSoftmaxScale,
              [&](int nf, float p0, float p1) {
#if LAZY_RESCALE
                p_frag[mf][nf / 2][(nf & 1) * 2 + h] = evo::pack_half2(p0, p1);
#else
                s[mf][nf][2 * h] = p0;
                s[mf][nf][2 * h + 1] = p1;
#endif
              });
#if LAZY_RESCALE
          alpha[mf][h] = row_alpha;
          max_moved |= row_max[mf][h] != previous_max;
#else
          evo::rescale_rows(acc[mf], h, row_alpha);
#endif
        }
      }
#if LAZY_RESCALE
      // Once the row maxima settle (most KV tiles of a long sequence) every alpha is exactly 1:
      // the warp skips the rescale of its O accumulators, the same result without the multiplies.
      if (__any_sync(0xffffffffu, max_moved)) {
#pragma unroll
        for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
#pragma unroll
          for (int df = 0; df < Tiling::kDFrags; ++df) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mf][df][e] *= alpha[mf][e >> 1];
          }
        }
      }
#endif

      evo::warp_accumulate_pv<Tiling::kMFrags, BLOCK_N, HEAD_DIM>(
          acc, p_frag,
          [&](int kk) {
#if !LAZY_RESCALE
            evo::pack_probabilities(s, p_frag, kk);
#endif
          },
          [&](int kk, int dp) { return v_tile + kk * 16 * HEAD_DIM * 2 + (v_lane ^ (dp << 5)); });
    }

#if WARP_SPECIALIZED
    // Every warp waits for the stage before releasing it, skipped or not, so no warp can arrive
    // for the stage's next use while this one is still open.
    __syncwarp();
    if (lane == 0) evo::mbar_arrive(handover.empty(read_stage));
#else
    if constexpr (STAGES == 1) {
      __syncthreads();  // the next iteration's load overwrites the only stage
    }
    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
#endif
  }

#if !WARP_SPECIALIZED
  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  evo::cp_async_wait<0>();
#endif

  // The warp's rows of the Q tile stage its output.
  evo::warp_store_output<Tiling::kMFrags, HEAD_DIM>(acc, row_sum, 1.f, q_smem, o_head, warp_row0,
                                                    m_start, S_q, lane, group, quad);
#if WARP_SPECIALIZED
  __syncwarp();  // the warp's rows of the Q tile are free for the next item's Q
  if (lane == 0) evo::mbar_arrive(handover.q_empty());
#endif
}

}  // namespace sdpa

extern "C" __global__ void __launch_bounds__((NUM_WARPS + WARP_SPECIALIZED) * 32)
    sdpa_fp16_fwd(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
                  const unsigned short* __restrict__ V, unsigned short* __restrict__ O, int B,
                  int H, int S_q, int S_kv) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned smem_base = evo::smem_u32(smem);
  const int num_m_tiles = (S_q + BLOCK_M - 1) / BLOCK_M;
  sdpa::Handover handover{0, 0, 0};
#if WARP_SPECIALIZED
  __shared__ __align__(8) unsigned long long barriers[sdpa::kHandoverBarriers];
  handover.bars = evo::smem_u32(barriers);
  if (threadIdx.x == 0) sdpa::init_handover(handover.bars);
  __syncthreads();  // the only CTA-wide barrier: the roles never meet again
  const bool producer = threadIdx.x >= sdpa::kThreads;
#endif
#if PERSISTENT
  const int num_bh = B * H;
  const int num_tiles = num_bh * num_m_tiles;
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    // Last m-tiles first (the most keys under causal masking), heads fastest, so the expensive
    // work starts early and the tail is made of cheap tiles.
    const int m_tile = num_m_tiles - 1 - tile / num_bh;
    const int bh = tile % num_bh;
#if WARP_SPECIALIZED
    if (producer) {
      sdpa::produce_tile(Q, K, V, bh, m_tile, S_q, S_kv, smem_base, handover,
                         threadIdx.x - sdpa::kThreads);
    } else {
      sdpa::attention_tile(Q, K, V, O, bh, m_tile, S_q, S_kv, smem_base, handover);
    }
    handover.kv_base += sdpa::kv_tile_count(m_tile, S_q, S_kv);
    ++handover.item;
#else
    sdpa::attention_tile(Q, K, V, O, bh, m_tile, S_q, S_kv, smem_base, handover);
    __syncthreads();  // the next tile's loads overwrite smem other warps may still read
#endif
  }
#else
  // Under causal masking, launch the heavy (late) m-tiles first.
  const int m_tile =
      IS_CAUSAL ? num_m_tiles - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  if (m_tile < 0 || m_tile >= num_m_tiles) return;
  const int bh = blockIdx.z * H + blockIdx.y;
#if WARP_SPECIALIZED
  if (producer) {
    sdpa::produce_tile(Q, K, V, bh, m_tile, S_q, S_kv, smem_base, handover,
                       threadIdx.x - sdpa::kThreads);
    evo::cp_async_wait<0>();  // the producer leaves no copy in flight behind it
    return;
  }
#endif
  sdpa::attention_tile(Q, K, V, O, bh, m_tile, S_q, S_kv, smem_base, handover);
#endif
#if WARP_SPECIALIZED && PERSISTENT
  if (producer) evo::cp_async_wait<0>();
#endif
}

// Flash-attention-2 style forward pass: O = softmax(Q K^T / sqrt(D)) V per (batch, query head).
// fp16 Q, O in contiguous [B, H, S_q, D] and K, V in [B, H_kv, S_kv, D]; fp32 accumulation on
// tensor cores (mma.sync m16n8k16 fed by ldmatrix); online softmax with P kept in registers.
//
// Grouped-query attention: G = H / H_kv query heads share each KV head (query head h reads KV
// head h / G; H_kv = 1 is multi-query attention). With PACK_GQA a tile's rows are the (query
// position, head-in-group) pairs of the G heads of one KV head, packed row p = s * G + g, so that
// the KV head's K and V are read once for all G heads; Q and O rows are then gathered from and
// scattered to their heads, and under causal masking each row is masked by its own position
// p / G. Without it a tile holds BLOCK_M positions of one query head.
//
// Split-KV (flash-decoding, SPLITS > 1): the KV tiles of one query tile are spread evenly over
// SPLITS CTAs, each writing its rows' partial output and log-sum-exp (evo/split_kv.cuh) to the
// scratch O_partial / LSE_partial; sdpa_fp16_combine, a second kernel of this source, combines
// them into O, or with LAST_CTA_COMBINES the CTA that finishes a work item's last split does it
// (a self-resetting arrival counter per work item), saving the second launch. With SPLITS = 1
// the kernel writes O directly and touches no scratch.
//
// WARP_SPECIALIZED adds one producer warp that issues every cp.async (Q and the K/V stages) and
// hands tiles over through mbarriers, so the NUM_WARPS consumer warps only compute and never
// meet at a CTA-wide barrier (the split-KV combine meets on a named barrier of the consumers).
//
// Knobs (BLOCK_M, BLOCK_N, NUM_WARPS, STAGES, FAST_EXP, WARP_SPECIALIZED, PERSISTENT,
// LAZY_RESCALE, SPLITS, PACK_GQA, LAST_CTA_COMBINES) and problem defines (HEAD_DIM, IS_CAUSAL)
// are prepended by evo. The PTX wrappers, the online softmax, the warp's MMA loops and the
// split-KV combine come from evo's device library (include/evo), shared with sdpa_fp8.

#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES) || \
    !defined(FAST_EXP) || !defined(WARP_SPECIALIZED) || !defined(PERSISTENT) ||          \
    !defined(LAZY_RESCALE) || !defined(SPLITS) || !defined(PACK_GQA) ||                  \
    !defined(LAST_CTA_COMBINES) || !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "sdpa_fp16.cu needs its knobs and problem defines, which evo prepends"
#endif

#include "evo/attention.cuh"
#include "evo/core.cuh"
#include "evo/cp_async.cuh"
#include "evo/half_types.cuh"
#include "evo/mbarrier.cuh"
#include "evo/mma_sync_attention.cuh"
#include "evo/online_softmax.cuh"
#include "evo/split_kv.cuh"

EVO_ASSERT_FLAGS(FAST_EXP, WARP_SPECIALIZED, PERSISTENT, LAZY_RESCALE, PACK_GQA, LAST_CTA_COMBINES,
                 IS_CAUSAL);
static_assert(WARP_SPECIALIZED == 0 || STAGES >= 2,
              "a producer warp needs at least two stages to load ahead of the consumers");
static_assert(SPLITS >= 1 && SPLITS <= 32, "SPLITS must be in [1, 32] (one lane per split)");
static_assert(LAST_CTA_COMBINES == 0 || SPLITS > 1, "LAST_CTA_COMBINES needs SPLITS > 1");

namespace sdpa {

typedef evo::WarpTiling<BLOCK_M, BLOCK_N, NUM_WARPS, HEAD_DIM> Tiling;
// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WARPS * 32,  // the computing (consumer) threads; the producer warp comes after
  kQTileBytes = BLOCK_M * HEAD_DIM * 2,
  kKVTileBytes = BLOCK_N * HEAD_DIM * 2,
  kCombineBarrier = 1,  // the named barrier of the consumers' last-CTA protocol
  kCombineWarps = 4,    // sdpa_fp16_combine: one warp per output row
};

__device__ __forceinline__ unsigned swizzle(int r, int c) { return evo::swizzle<HEAD_DIM>(r, c); }

// The kernel's arguments, handed down whole.
struct Args {
  const unsigned short* __restrict__ Q;
  const unsigned short* __restrict__ K;
  const unsigned short* __restrict__ V;
  unsigned short* __restrict__ O;
  float* __restrict__ O_partial;    // [SPLITS][B][H][S_q][D] where SPLITS > 1
  float* __restrict__ LSE_partial;  // [SPLITS][B][H][S_q] where SPLITS > 1
  int* __restrict__ arrivals;       // [B][groups][m_tiles] where LAST_CTA_COMBINES
};

// The problem as the tile space sees it. A work item's rows are those of one (batch, group):
// query positions [0, S_q) of query head `group` (PACK_GQA 0), or packed rows [0, S_q * G) of
// the G query heads of KV head `group` (PACK_GQA 1).
struct Shape {
  int B, H, H_kv, S_q, S_kv;
  int G;        // query heads per KV head
  int groups;   // H, or H_kv when packed
  int rows;     // rows of a (batch, group): S_q, or S_q * G when packed
  int m_tiles;  // BLOCK_M row tiles of a (batch, group)
};

__device__ __forceinline__ Shape make_shape(int B, int H, int H_kv, int S_q, int S_kv) {
  Shape shape;
  shape.B = B;
  shape.H = H;
  shape.H_kv = H_kv;
  shape.S_q = S_q;
  shape.S_kv = S_kv;
  shape.G = H / H_kv;
  shape.groups = PACK_GQA ? H_kv : H;
  shape.rows = PACK_GQA ? S_q * shape.G : S_q;
  shape.m_tiles = (shape.rows + BLOCK_M - 1) / BLOCK_M;
  return shape;
}

// One CTA's share of the work: BLOCK_M rows of one (batch, group) against split `split` of the
// KV tiles they see.
struct Item {
  int batch;
  int group;
  int m_tile;
  int split;
};

// The row of [B * H * S_q] (the rows of Q and O, and of each split's partials) that row p of
// the item's (batch, group) is.
__device__ __forceinline__ long long row_index(const Shape& shape, const Item& item, int p) {
#if PACK_GQA
  // Packed row p: head-in-group p % G at query position p / G.
  const int head = item.group * shape.G + p % shape.G;
  return (static_cast<long long>(item.batch) * shape.H + head) * shape.S_q + p / shape.G;
#else
  return (static_cast<long long>(item.batch) * shape.H + item.group) * shape.S_q + p;
#endif
}

// The KV head the item's rows read: query head h reads KV head h / G.
__device__ __forceinline__ int kv_head(const Shape& shape, const Item& item) {
#if PACK_GQA
  return item.group;
#else
  return item.group / shape.G;
#endif
}

// The query position of the item's row p.
__device__ __forceinline__ int position(const Shape& shape, int p) {
  return PACK_GQA ? p / shape.G : p;
}

// KV tiles m-tile m_tile sees: all of them, or under causal masking those up to the latest
// position among its rows.
__device__ __forceinline__ int kv_tile_count(int m_tile, const Shape& shape) {
#if PACK_GQA
  const int last_row = evo::imin((m_tile + 1) * BLOCK_M, shape.rows) - 1;
  const int kv_end = IS_CAUSAL ? evo::imin(shape.S_kv, position(shape, last_row) + 1) : shape.S_kv;
  return (kv_end + BLOCK_N - 1) / BLOCK_N;
#else
  const int S_q = shape.S_q;
  const int S_kv = shape.S_kv;
  return evo::causal_kv_tiles<BLOCK_M, BLOCK_N, IS_CAUSAL>(m_tile, S_q, S_kv);
#endif
}

// The KV tiles [first, first + count) of the item's split.
__device__ __forceinline__ evo::SplitRange kv_range(const Shape& shape, const Item& item) {
  return evo::split_range(kv_tile_count(item.m_tile, shape), item.split, SPLITS);
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] matrix into a swizzled smem tile.
// Where each loader issues more than 8 copies (one or two warps loading a K/V tile, as decode
// tiles do), the generic loader's per-copy offsets are all hoisted out of the KV loop and spill
// (BLOCK_M = 16, NUM_WARPS = 1, BLOCK_N = 64, D = 128: 255 registers and 204 bytes of spills);
// the swizzle-aware loader keeps a handful of lane offsets instead.
template <int ROWS, int LOADERS = kThreads>
__device__ __forceinline__ void load_tile_async(unsigned smem_tile,
                                                const unsigned short* __restrict__ src, int row0,
                                                int num_rows, int tid) {
  if constexpr (ROWS * HEAD_DIM / 8 >= 8 * LOADERS) {
    evo::load_swizzled_rows_async<ROWS, HEAD_DIM, LOADERS>(smem_tile, src, row0, num_rows, tid);
  } else {
    evo::load_rows_async<ROWS, HEAD_DIM, LOADERS>(smem_tile, src, row0, num_rows, tid,
                                                  [](int r, int c) { return swizzle(r, c); });
  }
}

// The item's Q tile into q_smem: BLOCK_M consecutive rows of one head, or gathered packed rows.
template <int LOADERS>
__device__ __forceinline__ void load_q_async(const Args& args, const Shape& shape, const Item& item,
                                             unsigned q_smem, int tid) {
  const int m_start = item.m_tile * BLOCK_M;
#if PACK_GQA
  evo::load_rows_async_gather<BLOCK_M, HEAD_DIM, LOADERS>(
      q_smem,
      [&](int r) -> const unsigned short* {
        const int p = m_start + r;
        return p < shape.rows ? args.Q + row_index(shape, item, p) * HEAD_DIM : nullptr;
      },
      args.Q, tid, [](int r, int c) { return swizzle(r, c); });
#else
  load_tile_async<BLOCK_M, LOADERS>(q_smem, args.Q + row_index(shape, item, 0) * HEAD_DIM, m_start,
                                    shape.S_q, tid);
#endif
}

__device__ __forceinline__ const unsigned short* kv_head_rows(const unsigned short* kv,
                                                              const Shape& shape,
                                                              const Item& item) {
  return kv + (static_cast<long long>(item.batch) * shape.H_kv + kv_head(shape, item)) *
                  shape.S_kv * HEAD_DIM;
}

// The scores of one m16 block of packed rows under causal masking: columns at or past S_kv, and
// columns past each row's own query position, which no longer moves by one per row.
struct PackedCausalMask {
  int cols_left;    // S_kv - (the thread's first column)
  int diagonal[2];  // row half h: its row's position - (the thread's first column)
  __device__ __forceinline__ bool operator()(int nf, int e) const {
    const int col_offset = nf * 8 + (e & 1);
    return col_offset >= cols_left || col_offset > diagonal[e >> 1];
  }
};

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
// item's Q tile (their output staging area), then every KV tile of the item's split into the
// stage the consumers have released.
__device__ __forceinline__ void produce_tile(const Args& args, const Shape& shape, const Item& item,
                                             evo::SplitRange kv, unsigned smem_base,
                                             const Handover& handover, int lane) {
  const unsigned short* k_head = kv_head_rows(args.K, shape, item);
  const unsigned short* v_head = kv_head_rows(args.V, shape, item);
  const int S_kv = shape.S_kv;
  const unsigned q_smem = smem_base;
  const unsigned k_smem = smem_base + kQTileBytes;
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;
  if (handover.item > 0) evo::mbar_wait(handover.q_empty(), (handover.item - 1) & 1);
  load_q_async<32>(args, shape, item, q_smem, lane);
  evo::cp_async_mbar_arrive(handover.q_full());
  for (int j = 0; j < kv.count; ++j) {
    const int use = handover.kv_base + j;
    const int stage = use % STAGES;
    const int tile = kv.first + j;
    if (use >= STAGES) evo::mbar_wait(handover.empty(stage), (use / STAGES - 1) & 1);
    load_tile_async<BLOCK_N, 32>(k_smem + stage * kKVTileBytes, k_head, tile * BLOCK_N, S_kv, lane);
    load_tile_async<BLOCK_N, 32>(v_smem + stage * kKVTileBytes, v_head, tile * BLOCK_N, S_kv, lane);
    evo::cp_async_mbar_arrive(handover.full(stage));
  }
}

// The last CTA of a work item combines its rows from every split's partials, one warp per row.
__device__ __forceinline__ void combine_item(const Args& args, const Shape& shape, const Item& item,
                                             int warp, int lane) {
  const long long split_rows = static_cast<long long>(shape.B) * shape.H * shape.S_q;
  const int m_start = item.m_tile * BLOCK_M;
  for (int r = warp; r < BLOCK_M && m_start + r < shape.rows; r += NUM_WARPS) {
    const long long row = row_index(shape, item, m_start + r);
    evo::combine_row<HEAD_DIM, SPLITS, evo::kLastCtaCombineFloatsInFlight>(
        args.O_partial + row * HEAD_DIM, split_rows * HEAD_DIM, args.LSE_partial + row, split_rows,
        lane, evo::StoreRow16<evo::Fp16>{args.O + row * HEAD_DIM});
  }
}

// One work item: BLOCK_M rows against the visible keys of the item's split.
__device__ __forceinline__ void attention_tile(const Args& args, const Shape& shape,
                                               const Item& item, evo::SplitRange kv,
                                               unsigned smem_base, const Handover& handover) {
  constexpr float kSoftmaxScale = evo::softmax_scale<HEAD_DIM, FAST_EXP>();
  const int tid = evo::thread_index();
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group = lane >> 2;  // mma fragment row within an 8-row half
  const int quad = lane & 3;    // mma fragment column pair
  const int S_kv = shape.S_kv;

  const unsigned short* k_head = kv_head_rows(args.K, shape, item);
  const unsigned short* v_head = kv_head_rows(args.V, shape, item);

  const unsigned q_smem = smem_base;
  const unsigned k_smem = smem_base + kQTileBytes;
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;

  const int m_start = item.m_tile * BLOCK_M;  // the tile's first row (packed row when PACK_GQA)
  const int warp_row0 = warp * Tiling::kWarpRows;  // within the m-tile
  // Query positions that bound the causal skip and mask: the tile's first, the warp's last.
  const int tile_first_position = position(shape, m_start);
  const int warp_last_position = position(shape, m_start + warp_row0 + Tiling::kWarpRows - 1);

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
  const auto load_kv = [&](int j, int buffer) {
    const int n_row0 = (kv.first + j) * BLOCK_N;
    load_tile_async<BLOCK_N>(k_smem + buffer * kKVTileBytes, k_head, n_row0, S_kv, tid);
    load_tile_async<BLOCK_N>(v_smem + buffer * kKVTileBytes, v_head, n_row0, S_kv, tid);
  };
  evo::CpAsyncRing<STAGES>::prologue(
      kv.count, [&] { load_q_async<kThreads>(args, shape, item, q_smem, tid); }, load_kv);
#endif

  int read_stage = 0;
  for (int j = 0; j < kv.count; ++j) {
#if WARP_SPECIALIZED
    read_stage = (handover.kv_base + j) % STAGES;
    evo::mbar_wait(handover.full(read_stage), ((handover.kv_base + j) / STAGES) & 1);
#else
    evo::CpAsyncRing<STAGES>::wait(j, load_kv);
    // Makes tile j visible to all warps and guarantees every warp is done with tile j-1, whose
    // stage the prefetch below overwrites.
    __syncthreads();
    evo::CpAsyncRing<STAGES>::prefetch(
        j, kv.count, load_kv, [&](int) { return read_stage == 0 ? STAGES - 1 : read_stage - 1; });
#endif

    const int n_start = (kv.first + j) * BLOCK_N;
    if (!IS_CAUSAL || n_start <= warp_last_position) {
      const unsigned k_tile = k_smem + read_stage * kKVTileBytes;
      const unsigned v_tile = v_smem + read_stage * kKVTileBytes;

      float s[Tiling::kMFrags][Tiling::kNFrags][4];
      evo::warp_scores<Tiling::kMFrags, BLOCK_N, HEAD_DIM>(
          s, [&](int mf, int kd) { return q_smem + (q_lane[mf] ^ (kd << 5)); },
          [&](int np, int kd) { return k_tile + np * 16 * HEAD_DIM * 2 + (k_lane ^ (kd << 5)); });

      // Only tiles that reach past S_kv or cross the diagonal need the element mask.
      if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > tile_first_position)) {
        const int cols_left = S_kv - n_start - quad * 2;
#if PACK_GQA && IS_CAUSAL
#pragma unroll
        for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
          const int row = m_start + warp_row0 + mf * 16 + group;
          evo::mask_scores<Tiling::kNFrags>(
              [&](int nf, int e) -> float& { return s[mf][nf][e]; },
              PackedCausalMask{cols_left,
                               {position(shape, row) - n_start - quad * 2,
                                position(shape, row + 8) - n_start - quad * 2}});
        }
#else
        const int diagonal = m_start + warp_row0 + group - n_start - quad * 2;
#pragma unroll
        for (int mf = 0; mf < Tiling::kMFrags; ++mf) {
          evo::mask_scores<Tiling::kNFrags>(
              [&](int nf, int e) -> float& { return s[mf][nf][e]; },
              evo::OutOfBoundsOrFuture<IS_CAUSAL>{cols_left, diagonal + mf * 16});
        }
#endif
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
    evo::CpAsyncRing<STAGES>::release();  // the next iteration's load overwrites the only stage
    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
#endif
  }

#if !WARP_SPECIALIZED
  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  evo::cp_async_wait<0>();
#endif

#if SPLITS > 1
  // The split's partial output and log-sum-exp per row (a split without keys for a row leaves
  // zeros and -inf), straight from the accumulators; the combine reads them.
  const long long split_row0 = static_cast<long long>(item.split) * shape.B * shape.H * shape.S_q;
  evo::warp_store_partial<Tiling::kMFrags, HEAD_DIM>(
      acc, row_max, row_sum, warp_row0, group, quad,
      [&](int r) -> float* {
        const int p = m_start + r;
        return p < shape.rows ? args.O_partial + (split_row0 + row_index(shape, item, p)) * HEAD_DIM
                              : nullptr;
      },
      [&](int r, float m, float l) {
        args.LSE_partial[split_row0 + row_index(shape, item, m_start + r)] =
            evo::split_lse(m, l, evo::softmax_scale<HEAD_DIM, true>());
      });
#if LAST_CTA_COMBINES
  int* arrivals = args.arrivals +
                  (static_cast<long long>(item.batch) * shape.groups + item.group) * shape.m_tiles +
                  item.m_tile;
  if (evo::last_split_arrives<kThreads, SPLITS>(arrivals, tid, kCombineBarrier)) {
    combine_item(args, shape, item, warp, lane);
  }
#endif
#elif PACK_GQA
  // The warp's rows of the Q tile stage its output, scattered to the rows' heads.
  evo::warp_store_output_rows<Tiling::kMFrags, HEAD_DIM>(
      acc, row_sum, 1.f, q_smem, warp_row0, lane, group, quad, [&](int r) -> unsigned short* {
        const int p = m_start + r;
        return p < shape.rows ? args.O + row_index(shape, item, p) * HEAD_DIM : nullptr;
      });
#else
  // The warp's rows of the Q tile stage its output.
  unsigned short* o_head = args.O + row_index(shape, item, 0) * HEAD_DIM;
  const int S_q = shape.S_q;
  evo::warp_store_output<Tiling::kMFrags, HEAD_DIM>(acc, row_sum, 1.f, q_smem, o_head, warp_row0,
                                                    m_start, S_q, lane, group, quad);
#endif
#if WARP_SPECIALIZED
  __syncwarp();  // the warp's rows of the Q tile are free for the next item's Q
  if (lane == 0) evo::mbar_arrive(handover.q_empty());
#endif
}

}  // namespace sdpa

extern "C" __global__ void __launch_bounds__((NUM_WARPS + WARP_SPECIALIZED) * 32)
    sdpa_fp16_fwd(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
                  const unsigned short* __restrict__ V, unsigned short* __restrict__ O, int B,
                  int H, int H_kv, int S_q, int S_kv, float* __restrict__ O_partial,
                  float* __restrict__ LSE_partial, int* __restrict__ arrivals) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned smem_base = evo::smem_u32(smem);
  const sdpa::Args args{Q, K, V, O, O_partial, LSE_partial, arrivals};
  const sdpa::Shape shape = sdpa::make_shape(B, H, H_kv, S_q, S_kv);
  sdpa::Handover handover{0, 0, 0};
#if WARP_SPECIALIZED
  __shared__ __align__(8) unsigned long long barriers[sdpa::kHandoverBarriers];
  handover.bars = evo::smem_u32(barriers);
  if (threadIdx.x == 0) sdpa::init_handover(handover.bars);
  __syncthreads();  // the only CTA-wide barrier: the roles never meet again
  const bool producer = threadIdx.x >= sdpa::kThreads;
#endif
#if PERSISTENT
  const int items_per_m_tile = B * shape.groups * SPLITS;
  const int num_items = items_per_m_tile * shape.m_tiles;
  for (int index = blockIdx.x; index < num_items; index += gridDim.x) {
    // Last m-tiles first (the most keys under causal masking), then splits, groups and batches
    // fastest, so the expensive work starts early and the tail is made of cheap tiles.
    const int rest = index % items_per_m_tile;
    const int batch_group = rest / SPLITS;
    const sdpa::Item item{batch_group / shape.groups, batch_group % shape.groups,
                          shape.m_tiles - 1 - index / items_per_m_tile, rest % SPLITS};
    const evo::SplitRange kv = sdpa::kv_range(shape, item);
#if WARP_SPECIALIZED
    if (producer) {
      sdpa::produce_tile(args, shape, item, kv, smem_base, handover, threadIdx.x - sdpa::kThreads);
    } else {
      sdpa::attention_tile(args, shape, item, kv, smem_base, handover);
    }
    handover.kv_base += kv.count;
    ++handover.item;
#else
    sdpa::attention_tile(args, shape, item, kv, smem_base, handover);
    __syncthreads();  // the next tile's loads overwrite smem other warps may still read
#endif
  }
#else
  // x: m-tiles times splits (a tile's splits side by side), under causal masking the heavy
  // (late) m-tiles first; y: groups; z: batches.
  const int m_tile_index = static_cast<int>(blockIdx.x) / SPLITS;
  const int m_tile = IS_CAUSAL ? shape.m_tiles - 1 - m_tile_index : m_tile_index;
  if (m_tile < 0 || m_tile >= shape.m_tiles) return;
  const sdpa::Item item{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y), m_tile,
                        static_cast<int>(blockIdx.x) % SPLITS};
  const evo::SplitRange kv = sdpa::kv_range(shape, item);
#if WARP_SPECIALIZED
  if (producer) {
    sdpa::produce_tile(args, shape, item, kv, smem_base, handover, threadIdx.x - sdpa::kThreads);
    evo::cp_async_wait<0>();  // the producer leaves no copy in flight behind it
    return;
  }
#endif
  sdpa::attention_tile(args, shape, item, kv, smem_base, handover);
#endif
#if WARP_SPECIALIZED && PERSISTENT
  if (producer) evo::cp_async_wait<0>();
#endif
}

// Split-KV's second kernel (SPLITS > 1 without LAST_CTA_COMBINES): O from every split's partial
// output and log-sum-exp, one warp per row of [B * H * S_q].
extern "C" __global__ void __launch_bounds__(sdpa::kCombineWarps * 32)
    sdpa_fp16_combine(unsigned short* __restrict__ O, int B, int H, int S_q,
                      const float* __restrict__ O_partial, const float* __restrict__ LSE_partial) {
  const long long rows = static_cast<long long>(B) * H * S_q;
  const long long row = static_cast<long long>(blockIdx.x) * sdpa::kCombineWarps + threadIdx.x / 32;
  if (row >= rows) return;
  evo::combine_row<HEAD_DIM, SPLITS, evo::kCombineFloatsInFlight>(
      O_partial + row * HEAD_DIM, rows * HEAD_DIM, LSE_partial + row, rows, threadIdx.x % 32,
      evo::StoreRow16<evo::Fp16>{O + row * HEAD_DIM});
}

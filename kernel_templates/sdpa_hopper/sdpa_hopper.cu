// Flash-attention forward on Hopper (sm_90a): O = softmax(Q K^T / sqrt(D)) V for fp16 or bf16
// Q, K, V, O in [B, H, S, D] with fp32 accumulation, as a warp-specialized pipeline.
//
// Warpgroup 0 is the producer: one thread issues every copy, by the tensor memory accelerator
// (cp.async.bulk.tensor through the tensor maps Q_map, K_map, V_map), into 128-byte swizzled
// tiles: the Q tile of the CTA and a ring of STAGES K and V tiles. Each tile has a "full"
// mbarrier that completes when its bytes have landed (a transaction count) and an "empty" one
// that completes when every consumer warp has released it. Warpgroups 1..NUM_CONSUMERS are the
// consumers: 64 query rows each, S = Q K^T and O += P V on wgmma (P from registers), the online
// softmax of the device library, and nothing else. With NUM_CONSUMERS >= 2 the producer hands
// registers to the consumers (setmaxnreg: PRODUCER_REGS for the producer, the rest split among
// the consumers).
//
// Two overlaps are knobs. PINGPONG: the consumers take turns to issue their MMAs, ordered by a
// ring of named barriers, so one warpgroup's softmax runs under another's MMAs. INTRA_OVERLAP:
// inside a warpgroup, tile j's Q K^T and tile j-1's P V are issued together and the softmax of
// tile j runs while P V is still on the tensor cores. PERSISTENT: one CTA per SM walks the tiles
// (heaviest first when causal) and the producer loads the next tile's Q while the consumers finish
// the current one.
//
// Q, K and V reach the kernel as pointers too (the arguments the tensor maps describe), but are
// read through the maps only.
//
// TMA_STORE: each consumer warpgroup writes its normalized O rows to a swizzled shared tile, and
// one of its threads stores the tile by the tensor memory accelerator (O_map), which clips rows
// past S_q; the store runs while the warpgroup moves on to its next tile.
//
// Grouped-query attention: K and V have H_kv heads, and query head h reads KV head h / G (G = H /
// H_kv). PACK_GQA puts the G query heads of one KV head into one tile, so that its K and V are
// loaded once for all of them: the tile's rows are G blocks of BLOCK_M / G query positions, one
// block per head (the Q map's box spans G heads), and a tile covers BLOCK_M / G positions.
//
// Split-KV (SPLITS > 1, for decoding and other short-query work): the KV tiles of a query tile
// are spread evenly over SPLITS CTAs. Each writes its rows' output normalized by its own
// denominator, and their log-sum-exp, into the scratch O_partial and LSE_partial (the layout of
// evo/split_kv.cuh, rows in [B, H, S_q] order); then either the second kernel,
// sdpa_hopper_combine, combines them into O (one warp per row), or, LAST_CTA_COMBINES, the CTA
// whose split arrives last at the work item's counter in Arrivals (zeroed once, left zero)
// combines them itself, with no second launch.
//
// STREAM_K (with PERSISTENT): when the tiles are not a whole number of rounds of the grid, the
// last round's tiles have their KV tiles cut into one span per CTA (class Walk), so that all
// CTAs finish together instead of a few running one more tile each. A tile cut over several
// CTAs is merged by the last of them to arrive at its counter in Arrivals: the others leave
// their accumulators and row statistics in O_partial (evo/tile_partial.cuh), two states per CTA
// (its span's first and last piece), and the last merges them into its own and stores O.
//
// CAUSAL_PAIRS (PERSISTENT, causal): a CTA takes its tiles two at a time, a query tile from the
// end of a head and its mirror from the start, so that every pair reads about the same number of
// KV tiles and a static walk over pairs is balanced; the pairs go head by head, so the CTAs at
// work read the K and V of a few heads, which stay in L2. Without it the walk goes heaviest tiles
// first across every head: balanced too, but the first rounds read the K and V of all heads at
// once, and where those outgrow L2 they stream from DRAM again for each query tile.
//
// CLUSTER_M = 2 (non-causal, one split, no stream-K tail): two CTAs on neighbouring query tiles of
// one head form a thread-block cluster and share each K/V tile: each CTA's producer loads half of
// its rows, multicast into both CTAs' shared memory, so a K/V tile crosses from L2 once per
// cluster instead of once per CTA. A stage is refilled only when the consumers of both CTAs have
// released it (the empty mbarriers count both), and neither CTA exits before the other is done
// with its barriers. A head with an odd number of query tiles gets one more past its end, whose
// rows load as zeros and are not stored.
//
// KV_INTERLEAVE (for few, long tiles: decoding and chunked prefill with grouped heads): the
// consumer warpgroups share one tile of 64 query rows and take its KV tiles in turn (the CTA's
// k-th KV tile goes to consumer k % NUM_CONSUMERS), so that one tile streams its K and V through
// several MMA chains at once. Before the epilogue the other consumers leave their state in shared
// memory (evo/tile_partial.cuh) and consumer 0 merges it into its own and stores O.
//
// Knobs (NUM_CONSUMERS, BLOCK_N, STAGES, FAST_EXP, PINGPONG, INTRA_OVERLAP, RESCALE_UNDER_QK,
// PERSISTENT, TMA_STORE, PRODUCER_REGS, SPLITS, PACK_GQA, LAST_CTA_COMBINES, STREAM_K,
// KV_INTERLEAVE, SOFTMAX_WARP_SYNC, CAUSAL_PAIRS, CLUSTER_M, LAGGED_MAX) and problem defines
// (HEAD_DIM, IS_CAUSAL, IS_BF16) are prepended by evo.

#if !defined(NUM_CONSUMERS) || !defined(BLOCK_N) || !defined(STAGES) || !defined(FAST_EXP) ||      \
    !defined(PINGPONG) || !defined(INTRA_OVERLAP) || !defined(PERSISTENT) ||                       \
    !defined(TMA_STORE) || !defined(PRODUCER_REGS) || !defined(HEAD_DIM) || !defined(IS_CAUSAL) || \
    !defined(IS_BF16) || !defined(SPLITS) || !defined(PACK_GQA) || !defined(LAST_CTA_COMBINES) ||  \
    !defined(STREAM_K) || !defined(RESCALE_UNDER_QK) || !defined(KV_INTERLEAVE) ||                 \
    !defined(SOFTMAX_WARP_SYNC) || !defined(CAUSAL_PAIRS) || !defined(CLUSTER_M) ||                \
    !defined(LAGGED_MAX)
#error "sdpa_hopper.cu needs its knobs and problem defines, which evo prepends"
#endif
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ != 900 || !defined(__CUDA_ARCH_FEAT_SM90_ALL))
#error "sdpa_hopper needs sm_90a (wgmma, setmaxnreg)"
#endif

#include "evo/attention.cuh"
#include "evo/cluster.cuh"
#include "evo/core.cuh"
#include "evo/mbarrier.cuh"
#include "evo/online_softmax.cuh"
#include "evo/split_kv.cuh"
#include "evo/tile_partial.cuh"
#include "evo/tma.cuh"
#include "evo/warp_specialization.cuh"
#include "evo/wgmma.cuh"
#include "evo/wgmma_attention.cuh"

EVO_ASSERT_FLAGS(FAST_EXP, PINGPONG, INTRA_OVERLAP, PERSISTENT, TMA_STORE, IS_CAUSAL, IS_BF16,
                 PACK_GQA, LAST_CTA_COMBINES, STREAM_K, RESCALE_UNDER_QK, KV_INTERLEAVE,
                 SOFTMAX_WARP_SYNC, CAUSAL_PAIRS, LAGGED_MAX);
static_assert(RESCALE_UNDER_QK == 0 || INTRA_OVERLAP, "RESCALE_UNDER_QK needs INTRA_OVERLAP");
static_assert(SOFTMAX_WARP_SYNC == 0 || INTRA_OVERLAP, "SOFTMAX_WARP_SYNC needs INTRA_OVERLAP");
static_assert(LAGGED_MAX == 0 || (INTRA_OVERLAP && FAST_EXP),
              "LAGGED_MAX needs INTRA_OVERLAP and FAST_EXP");
static_assert(SPLITS >= 1 && SPLITS <= 32, "SPLITS must be in [1, 32]");
static_assert(LAST_CTA_COMBINES == 0 || SPLITS > 1, "LAST_CTA_COMBINES needs SPLITS > 1");
static_assert(STREAM_K == 0 || (PERSISTENT && SPLITS == 1),
              "STREAM_K needs PERSISTENT and SPLITS == 1");
static_assert(CAUSAL_PAIRS == 0 || (IS_CAUSAL && PERSISTENT && SPLITS == 1),
              "CAUSAL_PAIRS needs a causal task, PERSISTENT and SPLITS == 1");
static_assert(CLUSTER_M == 1 ||
                  (CLUSTER_M == 2 && !IS_CAUSAL && SPLITS == 1 && !STREAM_K && !KV_INTERLEAVE),
              "CLUSTER_M must be 1, or 2 for a non-causal task with SPLITS == 1 and neither "
              "STREAM_K nor KV_INTERLEAVE");
static_assert(NUM_CONSUMERS >= 1 && NUM_CONSUMERS <= 3, "NUM_CONSUMERS must be 1, 2 or 3");
static_assert(BLOCK_N % 16 == 0 && BLOCK_N >= 64 && BLOCK_N <= 256,
              "BLOCK_N must be a multiple of 16 in [64, 256]");
static_assert(STAGES >= 1, "STAGES must be at least 1");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256,
              "HEAD_DIM must be 64, 128 or 256");
static_assert(PINGPONG == 0 || NUM_CONSUMERS >= 2, "PINGPONG needs two consumer warpgroups");
// The turns, a stream-K tile's partial states and the last CTA's combine all count on every
// consumer finishing each tile; with KV_INTERLEAVE only consumer 0 does. Each stage serves one
// consumer (STAGES a multiple of NUM_CONSUMERS), so that no consumer waits on a stage's mbarrier
// phase that another consumer's use of the stage has not reached yet (the parity would alias).
static_assert(KV_INTERLEAVE == 0 || (NUM_CONSUMERS >= 2 && !PINGPONG && !STREAM_K &&
                                     !LAST_CTA_COMBINES && STAGES % NUM_CONSUMERS == 0),
              "KV_INTERLEAVE needs two or more consumers, no PINGPONG, STREAM_K or "
              "LAST_CTA_COMBINES, and STAGES a multiple of NUM_CONSUMERS");

// LAGGED_MAX: the largest sum of a thread's probabilities of a row in a tile that the lagged
// softmax takes as they are, and the largest that a warp's rescale takes (past it the tile's
// scores are computed again). The tests' copies set the bound 0, so that every tile after a
// piece's first takes the rescale, and both 0 for the scores again.
#define LAGGED_SUM_BOUND evo::kLaggedSumBound
#define LAGGED_RESCALE_LIMIT evo::kLaggedRescaleLimit

namespace hopper {

#if IS_BF16
typedef evo::Bf16 Elem;
#else
typedef evo::Fp16 Elem;
#endif

// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = (NUM_CONSUMERS + 1) * 128,
  kBlockM = KV_INTERLEAVE ? 64 : NUM_CONSUMERS * 64,
  kColumnBlocks = HEAD_DIM / 64,  // 64-column blocks of 128 bytes: one swizzle span each
  kQTileBytes = kBlockM * HEAD_DIM * 2,
  kKVTileBytes = BLOCK_N * HEAD_DIM * 2,
  kOTileBytes = TMA_STORE ? kBlockM * HEAD_DIM * 2 : 0,  // 64 rows per consumer, by column block
  // KV_INTERLEAVE: consumers 1.. leave their state here for consumer 0 (evo/tile_partial.cuh).
  kMergeRegionBytes = evo::TilePartial<HEAD_DIM / 2, 128>::kFloats * 4,
  kMergeBytes = KV_INTERLEAVE ? (NUM_CONSUMERS - 1) * kMergeRegionBytes : 0,
  // Registers per thread at launch (__launch_bounds__(kThreads, 1)), and after the hand-over.
  kLaunchRegs = 65536 / kThreads / 8 * 8,
  kConsumerRegsUnrounded = ((NUM_CONSUMERS + 1) * kLaunchRegs - PRODUCER_REGS) / NUM_CONSUMERS,
  kConsumerRegs = (kConsumerRegsUnrounded > 240 ? 240 : kConsumerRegsUnrounded) / 8 * 8,
  kConsumerWarps = NUM_CONSUMERS * 4,
  // Warps that release a K/V stage: every consumer's, or with KV_INTERLEAVE its one consumer's;
  // with CLUSTER_M, those of every CTA of the cluster (a refill lands in all of them).
  kStageReleasers = (KV_INTERLEAVE ? 4 : kConsumerWarps) * CLUSTER_M,
  kKVRowsPerCta = BLOCK_N / CLUSTER_M,  // rows of a K/V tile each CTA of a cluster loads
  kTurnThreads = 256,  // a consumer warpgroup waiting for its turn, the previous one signalling
  // Named barriers: 0 is __syncthreads, 1..NUM_CONSUMERS the turns, then one per consumer
  // warpgroup for its epilogue, then one for all consumers at a split's arrival (or, with
  // KV_INTERLEAVE, at the merge of their states).
  kEpilogueBarrier = 1 + NUM_CONSUMERS,
  kArrivalBarrier = 1 + 2 * NUM_CONSUMERS,
  kConsumerThreads = NUM_CONSUMERS * 128,
  // STREAM_K: one CTA's partial state of a tail tile (two per CTA in O_partial).
  kTilePartialFloats = evo::TilePartial<HEAD_DIM / 2, NUM_CONSUMERS * 128>::kFloats,
};

// Where the rows of a tile are: its query positions and heads. Without PACK_GQA a tile is
// kBlockM positions of one query head; with it, G blocks of kBlockM / G positions, block g of
// query head kv_head * G + g. The query heads' KV head is head / G either way.
struct Rows {
  int group;      // G = H / H_kv
  int positions;  // query positions per tile
  __device__ __forceinline__ Rows(int H, int H_kv)
      : group(H / H_kv), positions(PACK_GQA ? kBlockM / (H / H_kv) : kBlockM) {}
  // Row r of tile m_tile of head slot `slot` (a query head, or with PACK_GQA a KV head).
  __device__ __forceinline__ int position(int m_tile, int r) const {
    return PACK_GQA ? m_tile * positions + r % positions : m_tile * kBlockM + r;
  }
  __device__ __forceinline__ int head(int slot, int r) const {
    return PACK_GQA ? slot * group + r / positions : slot;
  }
  __device__ __forceinline__ int kv_head(int slot) const { return PACK_GQA ? slot : slot / group; }
};

// The parts of the arguments the split-KV epilogue needs.
struct Partials {
  float* o;       // [SPLITS][B * H * S_q][HEAD_DIM]
  float* lse;     // [SPLITS][B * H * S_q], log2 units
  int* arrivals;  // a counter per work item (LAST_CTA_COMBINES)
};

// The shared memory of a CTA: the tiles from the (1024-byte aligned) base, then the mbarriers.
struct Layout {
  unsigned base;
  __device__ __forceinline__ unsigned q() const { return base; }
  __device__ __forceinline__ unsigned k(int stage) const {
    return base + kQTileBytes + stage * kKVTileBytes;
  }
  __device__ __forceinline__ unsigned v(int stage) const {
    return base + kQTileBytes + (STAGES + stage) * kKVTileBytes;
  }
  // Consumer c's O tile: its 64-column blocks 64 * 128 bytes apart.
  __device__ __forceinline__ unsigned o(int consumer) const {
    return base + kQTileBytes + 2 * STAGES * kKVTileBytes + consumer * 64 * HEAD_DIM * 2;
  }
  // KV_INTERLEAVE: consumer c's (1..NUM_CONSUMERS-1) state for consumer 0 to merge.
  __device__ __forceinline__ unsigned merge(int consumer) const {
    return base + kQTileBytes + 2 * STAGES * kKVTileBytes + kOTileBytes +
           (consumer - 1) * kMergeRegionBytes;
  }
  // q_full, q_empty, k_full[STAGES], k_empty[STAGES], v_full[STAGES], v_empty[STAGES].
  __device__ __forceinline__ unsigned bar(int i) const {
    return base + kQTileBytes + 2 * STAGES * kKVTileBytes + kOTileBytes + kMergeBytes + 8 * i;
  }
  __device__ __forceinline__ unsigned q_full() const { return bar(0); }
  __device__ __forceinline__ unsigned q_empty() const { return bar(1); }
  __device__ __forceinline__ unsigned k_full(int s) const { return bar(2 + s); }
  __device__ __forceinline__ unsigned k_empty(int s) const { return bar(2 + STAGES + s); }
  __device__ __forceinline__ unsigned v_full(int s) const { return bar(2 + 2 * STAGES + s); }
  __device__ __forceinline__ unsigned v_empty(int s) const { return bar(2 + 3 * STAGES + s); }
  // STREAM_K: the producer's two piece descriptors (by round parity) and its walk's state.
  __device__ __forceinline__ unsigned piece(int round) const {
    return bar(2 + 4 * STAGES) + 32 * (round & 1);
  }
  __device__ __forceinline__ unsigned walk_state() const { return bar(2 + 4 * STAGES) + 64; }
};

// The tiles of the task: (query tile, split) pairs of one (batch, head slot). Causal tiles go
// heaviest (latest rows) first when PERSISTENT, so that the last round is made of light tiles;
// with CAUSAL_PAIRS, head by head, each head's tiles alternating from its two ends. The splits of
// a tile are neighbours.
struct Scheduler {
  int num_m_tiles;
  int num_tiles;  // (slot, m_tile, split) triples
  // With CLUSTER_M a head's tiles are padded to whole clusters, so that the CTAs of a cluster
  // share a head.
  __device__ __forceinline__ Scheduler(int B, int slots, int S_q, int positions)
      : num_m_tiles((S_q + positions * CLUSTER_M - 1) / (positions * CLUSTER_M) * CLUSTER_M),
        num_tiles(num_m_tiles * B * slots * SPLITS) {}
  // The tile a CTA of a non-persistent grid owns.
  __device__ __forceinline__ int grid_tile() const {
    return (static_cast<int>(blockIdx.z) * gridDim.y + blockIdx.y) * num_m_tiles * SPLITS +
           static_cast<int>(blockIdx.x);
  }
  // Tile `tile` as (batch * slots + slot, m_tile, split); item is the (slot, m_tile) pair's
  // index, which its splits share.
  __device__ __forceinline__ void decode(int tile, int& bh, int& m_tile, int& split,
                                         int& item) const {
    split = tile % SPLITS;
    item = tile / SPLITS;
    const int items = num_tiles / SPLITS;
    if (IS_CAUSAL && CAUSAL_PAIRS) {
      // A head's tiles from its two ends in turn: heaviest, lightest, second heaviest, ...
      // (SPLITS == 1). A CTA takes tiles 2p and 2p + 1 (Walk::step): with an even count per head
      // those are one head's p-th heaviest and lightest; an odd count shifts every other head by
      // one, so that one pair in two heads joins a middle tile to the next head's heaviest.
      bh = item / num_m_tiles;
      const int j = item % num_m_tiles;
      m_tile = (j & 1) ? j / 2 : num_m_tiles - 1 - j / 2;
    } else if (IS_CAUSAL) {
      const int heads = items / num_m_tiles;
      if (PERSISTENT) {
        m_tile = num_m_tiles - 1 - item / heads;
        bh = item % heads;
      } else {
        m_tile = num_m_tiles - 1 - item % num_m_tiles;
        bh = item / num_m_tiles;
      }
    } else {
      bh = item / num_m_tiles;
      m_tile = item % num_m_tiles;
    }
  }
};

// KV tiles query tile m_tile reads (causal: up to its last position), and split `split`'s share.
__device__ __forceinline__ evo::SplitRange kv_tiles(const Rows& rows, int m_tile, int split,
                                                    int S_q, int S_kv) {
  const int kv_end =
      IS_CAUSAL ? evo::imin(S_kv, evo::imin((m_tile + 1) * rows.positions, S_q)) : S_kv;
  const int tiles = (kv_end + BLOCK_N - 1) / BLOCK_N;
  return SPLITS == 1 ? evo::SplitRange{0, tiles} : evo::split_range(tiles, split, SPLITS);
}

// A piece of a CTA's work: the KV tiles `kv` of one tile. With STREAM_K, a tile of the last,
// partial round is shared by `parts` CTAs, the first of them `first_cta`, whose state is in its
// partial slot `first_slot` (the others' in their slot 0); `tail_tile` is the tile's index among
// those tiles (its counter in Arrivals).
struct Piece {
  int bh, m_tile, split, item;
  evo::SplitRange kv;
  int parts;
  int first_cta;
  int tail_tile;
  int first_slot;
};

// The pieces of a CTA, in the order its producer and its consumers take them: the tile its grid
// position names; or, PERSISTENT, every gridDim.x-th tile. STREAM_K: only the whole rounds go
// that way; the KV tiles of the remaining tiles (fewer than the CTAs), taken in tile order as
// one sequence of units, are cut into one span per CTA, as equal as whole units allow, so that
// no CTA runs a whole extra tile while others idle. A span that covers a tile only in part
// leaves a partial state (evo/tile_partial.cuh); the tile's last CTA to finish merges the
// others' into its own and stores O. Only the producer walks the tail: its state stays in shared
// memory (the producer thread has 24 registers), and each piece reaches the consumers as a
// descriptor there (Layout::piece), published by the arrival on q_full.
class Walk {
 public:
  // With STREAM_K only the producer walks (and then starts the state in shared memory).
  __device__ __forceinline__ Walk(const Scheduler& scheduler, const Rows& rows, int S_q, int S_kv,
                                  unsigned state, bool producer)
      : scheduler_(scheduler), rows_(rows), S_q_(S_q), S_kv_(S_kv), state_(state) {
    const int cta = static_cast<int>(blockIdx.x);
    tile_ = PERSISTENT ? (CAUSAL_PAIRS ? 2 * cta : cta) : scheduler.grid_tile();
    if (STREAM_K && producer) {
      const int ctas = static_cast<int>(gridDim.x);
      Tail tail;
      tail.tile = tile_;
      if (CAUSAL_PAIRS) {
        // Whole rounds of pairs; a last single tile (an odd count) belongs to the tail.
        const int pairs = scheduler.num_tiles / 2;
        tail.whole_end = 2 * (pairs - pairs % ctas);
      } else {
        tail.whole_end = scheduler.num_tiles - scheduler.num_tiles % ctas;
      }
      tail.units = 0;
      for (int t = tail.whole_end; t < scheduler.num_tiles; ++t) tail.units += units(t);
      // Every CTA of the tail gets at least one unit.
      tail.ctas = evo::imin(ctas, tail.units);
      tail.unit = cta < tail.ctas ? span_start(tail, cta) : 0;
      tail.unit_end = cta < tail.ctas ? span_start(tail, cta + 1) : 0;
      tail.tile_index = tail.whole_end;
      tail.tile_unit = 0;
      store(tail);
    }
  }

  __device__ __forceinline__ bool next(Piece& piece) {
    if (!STREAM_K) {
      if (tile_ >= scheduler_.num_tiles) return false;
      whole(tile_, piece);
      tile_ = PERSISTENT ? step(tile_) : scheduler_.num_tiles;
      return true;
    }
    Tail tail = load();
    if (tail.tile < tail.whole_end) {
      whole(tail.tile, piece);
      tail.tile = step(tail.tile);
      store(tail);
      return true;
    }
    if (tail.unit >= tail.unit_end) return false;
    // The tail tile that holds the next unit.
    int tile_units = units(tail.tile_index);
    while (tail.tile_unit + tile_units <= tail.unit) {
      tail.tile_unit += tile_units;
      ++tail.tile_index;
      tile_units = units(tail.tile_index);
    }
    scheduler_.decode(tail.tile_index, piece.bh, piece.m_tile, piece.split, piece.item);
    const int first = tail.unit - tail.tile_unit;
    const int end = evo::imin(tail.unit_end - tail.tile_unit, tile_units);
    piece.kv = evo::SplitRange{first, end - first};
    piece.first_cta = owner(tail, tail.tile_unit);
    piece.parts = owner(tail, tail.tile_unit + tile_units - 1) - piece.first_cta + 1;
    piece.tail_tile = tail.tile_index - tail.whole_end;
    // Only the first CTA's span can start before the tile, and then the tile is its last piece.
    piece.first_slot = span_start(tail, piece.first_cta) < tail.tile_unit ? 1 : 0;
    tail.unit = tail.tile_unit + end;
    store(tail);
    return true;
  }

 private:
  // STREAM_K's progress: whole tiles first, then this CTA's span of tail units.
  struct Tail {
    int tile, whole_end;  // the next whole tile; whole tiles end at whole_end, the tail follows
    int units, ctas;      // units of the tail, CTAs that share them
    int unit, unit_end;   // what is left of this CTA's span
    int tile_index, tile_unit;  // the tail tile that holds `unit`, and that tile's first unit
  };
  __device__ __forceinline__ Tail load() const {
    unsigned a[4], b[4];
    evo::ld_shared_v4(a, state_);
    evo::ld_shared_v4(b, state_ + 16);
    return Tail{static_cast<int>(a[0]), static_cast<int>(a[1]), static_cast<int>(a[2]),
                static_cast<int>(a[3]), static_cast<int>(b[0]), static_cast<int>(b[1]),
                static_cast<int>(b[2]), static_cast<int>(b[3])};
  }
  __device__ __forceinline__ void store(const Tail& t) const {
    const unsigned a[4] = {static_cast<unsigned>(t.tile), static_cast<unsigned>(t.whole_end),
                           static_cast<unsigned>(t.units), static_cast<unsigned>(t.ctas)};
    const unsigned b[4] = {static_cast<unsigned>(t.unit), static_cast<unsigned>(t.unit_end),
                           static_cast<unsigned>(t.tile_index), static_cast<unsigned>(t.tile_unit)};
    evo::st_shared_v4(state_, a);
    evo::st_shared_v4(state_ + 16, b);
  }
  // A persistent CTA's whole tile after `tile`: every gridDim.x-th tile, or with CAUSAL_PAIRS
  // both tiles of every gridDim.x-th pair.
  static __device__ __forceinline__ int step(int tile) {
    const int ctas = static_cast<int>(gridDim.x);
    return CAUSAL_PAIRS ? ((tile & 1) ? tile - 1 + 2 * ctas : tile + 1) : tile + ctas;
  }
  __device__ __forceinline__ void whole(int tile, Piece& piece) const {
    scheduler_.decode(tile, piece.bh, piece.m_tile, piece.split, piece.item);
    piece.kv = kv_tiles(rows_, piece.m_tile, piece.split, S_q_, S_kv_);
    piece.parts = 1;
    piece.first_cta = static_cast<int>(blockIdx.x);
    piece.tail_tile = 0;
    piece.first_slot = 0;
  }
  __device__ __forceinline__ int units(int tile) const {
    int bh, m_tile, split, item;
    scheduler_.decode(tile, bh, m_tile, split, item);
    return kv_tiles(rows_, m_tile, split, S_q_, S_kv_).count;
  }
  static __device__ __forceinline__ int span_start(const Tail& tail, int cta) {
    return static_cast<int>(static_cast<long long>(cta) * tail.units / tail.ctas);
  }
  // The CTA whose span holds unit u: the last whose span starts at or before it.
  static __device__ __forceinline__ int owner(const Tail& tail, int u) {
    return static_cast<int>(
        ((static_cast<long long>(u) + 1) * tail.ctas + tail.units - 1) / tail.units - 1);
  }

  const Scheduler& scheduler_;
  const Rows& rows_;
  int S_q_, S_kv_;
  unsigned state_;  // STREAM_K: the Tail in shared memory
  int tile_;        // otherwise: the next tile
};

// STREAM_K: a piece as the producer hands it to the consumers, in two 16-byte halves: what the
// main loop needs, and what only a shared tile's epilogue does (read there, not kept in
// registers through the loop). A count of -1 ends the walk.
__device__ __forceinline__ void publish_piece(unsigned at, const Piece& piece) {
  const unsigned loop[4] = {static_cast<unsigned>(piece.bh), static_cast<unsigned>(piece.m_tile),
                            static_cast<unsigned>(piece.kv.first),
                            static_cast<unsigned>(piece.kv.count)};
  const unsigned sharing[4] = {
      static_cast<unsigned>(piece.parts), static_cast<unsigned>(piece.first_cta),
      static_cast<unsigned>(piece.tail_tile), static_cast<unsigned>(piece.first_slot)};
  evo::st_shared_v4(at, loop);
  evo::st_shared_v4(at + 16, sharing);
}
__device__ __forceinline__ void publish_end(unsigned at) {
  const unsigned end[4] = {0, 0, 0, static_cast<unsigned>(-1)};
  evo::st_shared_v4(at, end);
}
__device__ __forceinline__ bool read_piece_loop(unsigned at, Piece& piece) {
  unsigned v[4];
  evo::ld_shared_v4(v, at);
  piece.bh = static_cast<int>(v[0]);
  piece.m_tile = static_cast<int>(v[1]);
  piece.split = 0;
  piece.item = 0;
  piece.kv = evo::SplitRange{static_cast<int>(v[2]), static_cast<int>(v[3])};
  return piece.kv.count >= 0;
}
__device__ __forceinline__ int read_piece_first(unsigned at) {
  return static_cast<int>(evo::ld_shared_b32(at + 8));
}
__device__ __forceinline__ void read_piece_sharing(unsigned at, Piece& piece) {
  unsigned v[4];
  evo::ld_shared_v4(v, at + 16);
  piece.parts = static_cast<int>(v[0]);
  piece.first_cta = static_cast<int>(v[1]);
  piece.tail_tile = static_cast<int>(v[2]);
  piece.first_slot = static_cast<int>(v[3]);
}

// Loads the K or V tile of BLOCK_N rows from n_start into `dst`, completing on `full`. With
// CLUSTER_M each CTA of the cluster loads its share of the rows into every CTA's copy of the
// tile, whose full barrier then expects the whole tile from all of them. A share starts at a
// multiple of 8 rows (BLOCK_N is a multiple of 16): whole 1024-byte swizzle atoms.
__device__ __forceinline__ void load_kv_tile(unsigned dst, const evo::TensorMap& map, int n_start,
                                             int kv_head, int b, unsigned full) {
  const int share = CLUSTER_M > 1 ? static_cast<int>(evo::cluster_rank()) : 0;
#pragma unroll
  for (int cb = 0; cb < kColumnBlocks; ++cb) {
    const unsigned at = dst + cb * BLOCK_N * 128 + share * kKVRowsPerCta * 128;
    const int row = n_start + share * kKVRowsPerCta;
    if (CLUSTER_M > 1) {
      evo::tma_load_4d_multicast(at, map, cb * 64, row, kv_head, b, full, (1u << CLUSTER_M) - 1);
    } else {
      evo::tma_load_4d(at, map, cb * 64, row, kv_head, b, full);
    }
  }
}

// The producer: one thread that loads each tile's Q and its K/V tiles into the ring, in the
// order the consumers use them. A split with no KV tile loads nothing, not even Q.
__device__ __forceinline__ void produce(const Layout& smem, const evo::TensorMap& q_map,
                                        const evo::TensorMap& k_map, const evo::TensorMap& v_map,
                                        int B, int H, int H_kv, int S_q, int S_kv) {
  const Rows rows(H, H_kv);
  const int slots = PACK_GQA ? H_kv : H;
  const Scheduler scheduler(B, slots, S_q, rows.positions);
  Walk walk(scheduler, rows, S_q, S_kv, smem.walk_state(), true);
  int kv_iter = 0;  // K/V tiles loaded so far, over all of this CTA's pieces
  int round = 0;    // pieces loaded so far
  for (Piece piece; walk.next(piece);) {
    const int bh = piece.bh;
    const int m_tile = piece.m_tile;
    const evo::SplitRange kv = piece.kv;
    if (SPLITS > 1 && kv.count == 0) continue;  // one split always has a KV tile (S_kv >= 1)
    const int b = bh / slots;
    const int slot = bh % slots;
    const int kv_head = rows.kv_head(slot);
    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);
    if (STREAM_K) publish_piece(smem.piece(round), piece);
    evo::mbar_arrive_expect_tx(smem.q_full(), kQTileBytes);
#pragma unroll
    for (int cb = 0; cb < kColumnBlocks; ++cb) {
      // With PACK_GQA the map's box spans the G heads of the KV head: G blocks of positions.
      evo::tma_load_4d(smem.q() + cb * kBlockM * 128, q_map, cb * 64, m_tile * rows.positions,
                       PACK_GQA ? slot * rows.group : slot, b, smem.q_full());
    }
    for (int j = 0; j < kv.count; ++j, ++kv_iter) {
      const int stage = kv_iter % STAGES;
      const int free_parity = ((kv_iter / STAGES) & 1) ^ 1;
      const int n_start = (kv.first + j) * BLOCK_N;
      evo::mbar_wait_sleep(smem.k_empty(stage), free_parity);
      evo::mbar_arrive_expect_tx(smem.k_full(stage), kKVTileBytes);
      load_kv_tile(smem.k(stage), k_map, n_start, kv_head, b, smem.k_full(stage));
      evo::mbar_wait_sleep(smem.v_empty(stage), free_parity);
      evo::mbar_arrive_expect_tx(smem.v_full(stage), kKVTileBytes);
      load_kv_tile(smem.v(stage), v_map, n_start, kv_head, b, smem.v_full(stage));
    }
    ++round;
  }
  if (STREAM_K) {
    // The end, published like a piece: the consumers wait for the next Q as usual.
    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);
    publish_end(smem.piece(round));
    evo::mbar_arrive(smem.q_full());
  }
}

// One consumer warpgroup's side of the ring of turns (PINGPONG): wait for this warpgroup's turn
// to issue MMAs, and hand the turn to the next warpgroup once they are issued. Named barriers
// 1..NUM_CONSUMERS, one per consumer warpgroup.
struct Turns {
  int consumer;
  __device__ __forceinline__ void wait() const {
    if (PINGPONG) evo::named_barrier_sync<kTurnThreads>(1 + consumer);
  }
  __device__ __forceinline__ void pass() const {
    if (PINGPONG) evo::named_barrier_arrive<kTurnThreads>(1 + (consumer + 1) % NUM_CONSUMERS);
  }
};

// Marks tile buffer `bar` as released by this warp (the K/V empty barriers count consumer warps).
__device__ __forceinline__ void release(unsigned bar, int lane) {
  __syncwarp();
  if (lane == 0) evo::mbar_arrive(bar);
}

// Marks the Q tile, and with STREAM_K its piece descriptor, as released by this warp: every lane
// arrives (q_empty counts consumer threads), so each lane's reads of the descriptor are ordered
// before the producer's next store there by that lane's own arrive. __syncwarp then lane 0's
// arrive orders them as well, but compute-sanitizer's racecheck does not follow it and reported
// the producer's stores as hazards. Once per piece, so the extra arrivals cost nothing.
__device__ __forceinline__ void release_q(unsigned bar) { evo::mbar_arrive(bar); }

// Marks K/V stage barrier `bar` as released by this warp, with CLUSTER_M in every CTA of the
// cluster (lane r arrives on CTA r's): the next load into the stage writes to all of them.
__device__ __forceinline__ void release_kv(unsigned bar, int lane) {
  if (CLUSTER_M == 1) {
    release(bar, lane);
    return;
  }
  __syncwarp();
  if (lane < CLUSTER_M) evo::mbar_arrive_cluster(bar, static_cast<unsigned>(lane));
}

// Combines the rows of work item `item` (bh, m_tile) from every split's partials into O, with
// all the consumer warps of the CTA, one row per warp at a time.
__device__ __forceinline__ void combine_item(const Partials& partials,
                                             unsigned short* __restrict__ O, const Rows& rows,
                                             int bh, int m_tile, int slots, int B, int H, int S_q,
                                             int tid) {
  const int lane = tid % 32;
  const long long row_count = static_cast<long long>(B) * H * S_q;
  const int b = bh / slots;
  const int slot = bh % slots;
  for (int r = tid / 32; r < kBlockM; r += kConsumerWarps) {
    const int position = rows.position(m_tile, r);
    if (position >= S_q) continue;
    const long long row = (static_cast<long long>(b) * H + rows.head(slot, r)) * S_q + position;
    evo::combine_row<HEAD_DIM, SPLITS, evo::kLastCtaCombineFloatsInFlight>(
        partials.o + row * HEAD_DIM, row_count * HEAD_DIM, partials.lse + row, row_count, lane,
        evo::StoreRow16<Elem>{O + row * HEAD_DIM});
  }
}

// A consumer warpgroup: 64 query rows of every tile of the CTA.
__device__ __forceinline__ void consume(const Layout& smem, unsigned short* __restrict__ O,
                                        const evo::TensorMap& o_map, const Partials& partials,
                                        int B, int H, int H_kv, int S_q, int S_kv, int consumer) {
  constexpr float kSoftmaxScale = evo::softmax_scale<HEAD_DIM, FAST_EXP>();
  const int tid = evo::thread_index() - 128;  // within the consumers
  const int warp = (tid / 32) % 4;            // within the warpgroup
  const int lane = tid % 32;
  const int group = lane >> 2;  // fragment row within an 8-row half
  const int quad = lane & 3;    // fragment column pair
  const int wg_row0 = KV_INTERLEAVE ? 0 : consumer * 64;
  const Turns turns{consumer};
  // The first turn is consumer 0's: the last consumer signals it as if it had just issued.
  if (PINGPONG && consumer == NUM_CONSUMERS - 1) {
    evo::named_barrier_arrive<kTurnThreads>(1);
  }

  const Rows rows(H, H_kv);
  const int slots = PACK_GQA ? H_kv : H;
  const Scheduler scheduler(B, slots, S_q, rows.positions);
  Walk walk(scheduler, rows, S_q, S_kv, smem.walk_state(), false);
  int kv_iter = 0;
  int round = 0;
  for (;;) {
    // Without STREAM_K each consumer walks the tiles as the producer does; with it, the
    // producer's descriptor comes with the piece's Q.
    Piece piece;
    const int piece_round = round;
    if (STREAM_K) {
      evo::mbar_wait_sleep(smem.q_full(), round & 1);
      if (!read_piece_loop(smem.piece(round), piece)) break;
    } else if (!walk.next(piece)) {
      break;
    }
    int bh = piece.bh;
    int m_tile = piece.m_tile;
    const int split = piece.split;
    const int item = piece.item;
    int m_start = m_tile * kBlockM;
    const int tile_row = wg_row0 + warp * 16 + group;  // the thread's rows: this and + 8
    const evo::SplitRange kv = piece.kv;
    const int num_kv_tiles = kv.count;
    const int first_position = m_tile * rows.positions;

    float acc[HEAD_DIM / 2];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.f;
    float row_max[2] = {evo::neg_inf(), evo::neg_inf()};
    float row_sum[2] = {0.f, 0.f};
    float s[BLOCK_N / 2];
    unsigned p[BLOCK_N / 16][4];

    // S = Q K^T of this warpgroup's 64 rows, and O += P V, issued and committed.
    const auto issue_scores = [&](int stage) {
      evo::wgmma_attention_scores<BLOCK_N, HEAD_DIM, kBlockM, Elem>(s, smem.q(), wg_row0,
                                                                    smem.k(stage));
    };
    const auto issue_values = [&](int stage) {
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, Elem>(acc, p, smem.v(stage));
    };
    // Masks tile j's scores where it passes S_kv or, causal, the warpgroup's first row.
    const auto mask = [&](int j) {
      // STREAM_K reads the piece's first KV tile again rather than keep a register for it
      // through the loop (D = 128 at BLOCK_N = 160 spilled).
      const int n_start =
          ((STREAM_K ? read_piece_first(smem.piece(piece_round)) : kv.first) + j) * BLOCK_N;
      if (PACK_GQA) {
        // A packed tile's rows are not consecutive positions: each of the thread's two rows has
        // its own diagonal.
        if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > first_position)) {
          const int cols_left = S_kv - n_start - quad * 2;
          const int ahead[2] = {rows.position(m_tile, tile_row) - n_start - quad * 2,
                                rows.position(m_tile, tile_row + 8) - n_start - quad * 2};
          evo::mask_scores<BLOCK_N / 8>([&](int nf, int e) -> float& { return s[4 * nf + e]; },
                                        [&](int nf, int e) {
                                          const int col = nf * 8 + (e & 1);
                                          return col >= cols_left ||
                                                 (IS_CAUSAL && col > ahead[e >> 1]);
                                        });
        }
      } else if (n_start + BLOCK_N > S_kv ||
                 (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start + wg_row0)) {
        evo::wgmma_attention_mask<BLOCK_N, IS_CAUSAL>(s, S_kv - n_start - quad * 2,
                                                      m_start + tile_row - n_start - quad * 2);
      }
    };
    // The online softmax on tile j's masked scores.
    const auto softmax = [&](int j, float(&alpha)[2]) {
      mask(j);
      evo::wgmma_attention_softmax<BLOCK_N, FAST_EXP>(s, row_max, row_sum, kSoftmaxScale, alpha);
    };
    // LAGGED_MAX (a tile after the first): the probabilities against the rows' maxima so far, so
    // that the exponentials do not wait for the tile's maximum. Returns whether the warp's rows
    // took them exactly; where not (a score far above the maxima), once P_{j-1} V is done,
    // lagged_rescale scales the rows down to their own maxima or, for a row with no maximum yet
    // or a score some 100 log2 units above it, lagged_again computes the scores again. Rare on
    // N(0, 1) inputs; on keys with outlier rows, warps that all computed their scores again cost
    // 38 % at 4,16,4096,128 (fortieth session). The second check waits until after P V: before
    // it, a vote more spilled at BLOCK_N = 160.
    const auto softmax_lagged = [&](int j, float(&alpha)[2]) {
      mask(j);
      float tile_sum[2];
      const bool fits =
          __all_sync(0xffffffffu, evo::wgmma_attention_softmax_lagged<BLOCK_N>(
                                      s, row_max, kSoftmaxScale, LAGGED_SUM_BOUND, tile_sum));
      if (fits) {
        row_sum[0] += tile_sum[0];
        row_sum[1] += tile_sum[1];
        alpha[0] = alpha[1] = 1.f;
      }
      return fits;
    };
    const auto lagged_rescale = [&](float(&alpha)[2]) {
      return evo::wgmma_attention_lagged_rescale<BLOCK_N>(s, row_max, row_sum, kSoftmaxScale,
                                                          LAGGED_RESCALE_LIMIT, alpha);
    };
    // The warp's scores of tile j again from shared memory (the K tile is kept until here), and
    // the exact softmax on them. After P_{j-1} V: no MMA is in flight, and P's registers are free.
    const auto lagged_again = [&](int j, unsigned k_tile, float(&alpha)[2]) {
      evo::warp_attention_scores_sw128<BLOCK_N, HEAD_DIM, kBlockM, Elem>(
          s, smem.q(), wg_row0 + warp * 16, k_tile);
      mask(j);
      evo::wgmma_attention_softmax<BLOCK_N, true>(s, row_max, row_sum, kSoftmaxScale, alpha);
    };
    const auto pack_probabilities = [&] { evo::wgmma_attention_pack<BLOCK_N, Elem>(s, p); };
    const auto rescale = [&](const float(&alpha)[2]) {
      evo::wgmma_attention_rescale<HEAD_DIM>(acc, alpha);
    };
    const auto stage_of = [&](int j) { return (kv_iter + j) % STAGES; };
    const auto full_parity = [&](int j) { return ((kv_iter + j) / STAGES) & 1; };
    const auto wait_keys = [&](int j) {
      evo::mbar_wait_sleep(smem.k_full(stage_of(j)), full_parity(j));
    };
    const auto wait_values = [&](int j) {
      evo::mbar_wait_sleep(smem.v_full(stage_of(j)), full_parity(j));
    };

    // The KV tiles this warpgroup takes: all of the piece's, or with KV_INTERLEAVE every
    // NUM_CONSUMERS-th of the CTA's sequence of KV tiles (its stage then always serves it).
    constexpr int kStep = KV_INTERLEAVE ? NUM_CONSUMERS : 1;
    const int j_first =
        KV_INTERLEAVE ? (consumer + NUM_CONSUMERS - kv_iter % NUM_CONSUMERS) % NUM_CONSUMERS : 0;
    const auto last_of_mine = [&](int j) {
      return KV_INTERLEAVE ? j + kStep >= num_kv_tiles : j == num_kv_tiles - 1;
    };

    // A split with no KV tile (more splits than the tile has KV tiles) loads nothing: it only
    // leaves an empty partial (LSE -inf) below.
    if (SPLITS == 1 || num_kv_tiles > 0) {
      if (!STREAM_K) evo::mbar_wait_sleep(smem.q_full(), round & 1);
      // KV_INTERLEAVE: a consumer with no KV tile of its own (fewer than NUM_CONSUMERS) still
      // releases Q, which counts every consumer thread.
      if (KV_INTERLEAVE && j_first >= num_kv_tiles) release_q(smem.q_empty());
      float alpha[2];
      if (INTRA_OVERLAP && (!KV_INTERLEAVE || j_first < num_kv_tiles)) {
        // The first tile alone, then for each later tile j: issue Q K_j^T and P_{j-1} V_{j-1}
        // together (j-1: this warpgroup's tile before j), wait for the scores only, run the
        // softmax while P V runs, then wait for P V. RESCALE_UNDER_QK rescales O for tile j - 1's
        // maximum between the two issues, under Q K_j^T, rather than after P V before the next
        // issue (on the path from one MMA to the next): under ncu a copy without the rescale
        // took 3.6 % (PINGPONG=0) to 5.5 % fewer cycles; moved under Q K^T it saved 3.5 % with
        // PINGPONG and cost 2.3 % without.
        wait_keys(j_first);
        turns.wait();
        issue_scores(stage_of(j_first));
        turns.pass();
        evo::wgmma_wait<0>();
        evo::wgmma_fence_registers(s);
        release_kv(smem.k_empty(stage_of(j_first)), lane);
        if (last_of_mine(j_first)) release_q(smem.q_empty());
        softmax(j_first, alpha);
        pack_probabilities();
        for (int j = j_first + kStep; j < num_kv_tiles; j += kStep) {
          wait_keys(j);
          wait_values(j - kStep);
          turns.wait();
          issue_scores(stage_of(j));
          if (RESCALE_UNDER_QK) rescale(alpha);  // after the first tile O is still 0
          issue_values(stage_of(j - kStep));
          turns.pass();
          evo::wgmma_wait<1>();
          evo::wgmma_fence_registers(s);
          // LAGGED_MAX keeps K_j (and Q) until its tile's softmax is known exact.
          const bool lagged = LAGGED_MAX && softmax_lagged(j, alpha);
          if (!LAGGED_MAX) {
            release_kv(smem.k_empty(stage_of(j)), lane);
            if (last_of_mine(j)) release_q(smem.q_empty());
            softmax(j, alpha);
          }
          // SOFTMAX_WARP_SYNC: a warp barrier here changes how ptxas orders the softmax against
          // the wait for P V (both rows' maxima before the exponentials). Under ncu at
          // 4,16,4096,128 it kept the tensor pipe about a point busier at BLOCK_N = 160 and a few
          // tenths less at 128, so the search decides.
          if (SOFTMAX_WARP_SYNC) __syncwarp();
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          evo::wgmma_fence_registers(p);
          release_kv(smem.v_empty(stage_of(j - kStep)), lane);
          if (LAGGED_MAX) {
            if (!lagged && !lagged_rescale(alpha)) lagged_again(j, smem.k(stage_of(j)), alpha);
            release_kv(smem.k_empty(stage_of(j)), lane);
            if (last_of_mine(j)) release_q(smem.q_empty());
          }
          if (!RESCALE_UNDER_QK) rescale(alpha);
          pack_probabilities();
        }
        // Computed here rather than tracked through the loop: one register less there (STREAM_K
        // at BLOCK_N = 160 spilled).
        const int last = j_first + (num_kv_tiles - 1 - j_first) / kStep * kStep;
        wait_values(last);
        turns.wait();
        if (RESCALE_UNDER_QK) rescale(alpha);
        issue_values(stage_of(last));
        turns.pass();
        evo::wgmma_wait<0>();
        evo::wgmma_fence_registers(acc);
        release_kv(smem.v_empty(stage_of(last)), lane);
      } else if (!INTRA_OVERLAP) {
        for (int j = j_first; j < num_kv_tiles; j += kStep) {
          wait_keys(j);
          turns.wait();
          issue_scores(stage_of(j));
          turns.pass();
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(s);
          release_kv(smem.k_empty(stage_of(j)), lane);
          if (last_of_mine(j)) release_q(smem.q_empty());
          softmax(j, alpha);
          rescale(alpha);
          pack_probabilities();
          wait_values(j);
          turns.wait();
          issue_values(stage_of(j));
          turns.pass();
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          release_kv(smem.v_empty(stage_of(j)), lane);
        }
      }
      kv_iter += num_kv_tiles;
      ++round;
    }

    if (KV_INTERLEAVE) {
      // Consumers 1.. leave their state for consumer 0, which merges it (in consumer order: the
      // same bits every call) and goes on alone to the epilogue.
      const int t = tid % 128;
      if (consumer != 0) {
        evo::store_tile_partial<HEAD_DIM / 2>(evo::SharedRegion<128>{smem.merge(consumer)}, acc,
                                              row_max, row_sum, t);
      }
      evo::named_barrier_sync<kConsumerThreads>(kArrivalBarrier);
      if (consumer != 0) {
        // The next tile's state must not overwrite this one before consumer 0 has read it.
        evo::named_barrier_sync<kConsumerThreads>(kArrivalBarrier);
        continue;
      }
      for (int other = 1; other < NUM_CONSUMERS; ++other) {
        evo::merge_tile_partial<HEAD_DIM / 2, FAST_EXP>(evo::SharedRegion<128>{smem.merge(other)},
                                                        acc, row_max, row_sum, kSoftmaxScale, t);
      }
      evo::named_barrier_sync<kConsumerThreads>(kArrivalBarrier);
    }

    const int b = bh / slots;
    const int slot = bh % slots;
    if (SPLITS > 1) {
      // This split's partial rows: its output normalized by its own denominator, and the LSE.
      constexpr float kScale2 = evo::softmax_scale<HEAD_DIM, true>();
      const long long row_count = static_cast<long long>(B) * H * S_q;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = tile_row + 8 * h;
        const int position = rows.position(m_tile, r);
        const float l = evo::quad_sum(row_sum[h]);
        if (position < S_q) {
          const long long row = split * row_count +
                                (static_cast<long long>(b) * H + rows.head(slot, r)) * S_q +
                                position;
          const float inv = l > 0.f ? 1.f / l : 0.f;
          float* o_row = partials.o + row * HEAD_DIM + 2 * quad;
#pragma unroll
          for (int df = 0; df < HEAD_DIM / 8; ++df) {
            *reinterpret_cast<float2*>(o_row + 8 * df) =
                make_float2(acc[4 * df + 2 * h] * inv, acc[4 * df + 2 * h + 1] * inv);
          }
          if (quad == 0) partials.lse[row] = evo::split_lse(row_max[h], l, kScale2);
        }
      }
      if (LAST_CTA_COMBINES) {
        if (evo::last_split_arrives<kConsumerThreads, SPLITS>(partials.arrivals + item, tid,
                                                              kArrivalBarrier)) {
          combine_item(partials, O, rows, bh, m_tile, slots, B, H, S_q, tid);
        }
      }
      continue;
    }

    if (STREAM_K) {
      // Read again for the epilogue, not kept in registers through the loop.
      read_piece_loop(smem.piece(piece_round), piece);
      read_piece_sharing(smem.piece(piece_round), piece);
      bh = piece.bh;
      m_tile = piece.m_tile;
      m_start = m_tile * kBlockM;
    }
    if (STREAM_K && piece.parts > 1) {
      // A tail tile shared with other CTAs: leave this CTA's state; the last to arrive merges
      // the others' into its own and goes on to store O.
      const int cta = static_cast<int>(blockIdx.x);
      // A CTA's state is in its slot 0 unless the tile is its span's last piece.
      const auto slot = [&](int c) { return c == piece.first_cta ? piece.first_slot : 0; };
      evo::store_tile_partial<HEAD_DIM / 2>(
          evo::GlobalRegion<kConsumerThreads>{partials.o +
                                              (2 * cta + slot(cta)) * kTilePartialFloats},
          acc, row_max, row_sum, tid);
      if (!evo::last_cta_arrives<kConsumerThreads>(partials.arrivals + piece.tail_tile, piece.parts,
                                                   tid, kArrivalBarrier)) {
        continue;
      }
      // Every state is merged from memory in CTA order, this CTA's own too: which CTA arrives
      // last changes from call to call, and the output must not (the same bits every call).
#pragma unroll
      for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.f;
      row_max[0] = row_max[1] = evo::neg_inf();
      row_sum[0] = row_sum[1] = 0.f;
      for (int other = piece.first_cta; other < piece.first_cta + piece.parts; ++other) {
        evo::merge_tile_partial<HEAD_DIM / 2, FAST_EXP>(
            evo::GlobalRegion<kConsumerThreads>{partials.o +
                                                (2 * other + slot(other)) * kTilePartialFloats},
            acc, row_max, row_sum, kSoftmaxScale, tid);
      }
    }

    // Epilogue: normalize each thread's pairs and store them.
    const float inv[2] = {evo::wgmma_attention_normalizer(row_sum[0]),
                          evo::wgmma_attention_normalizer(row_sum[1])};
    // With PACK_GQA a warpgroup's 64 rows are one box of the O map only where a head's block of
    // positions is a multiple or a divisor of 64 (GROUP a power of two does that for one or two
    // consumers); otherwise the rows are stored from registers.
    const bool box_store = !PACK_GQA || rows.positions % 64 == 0 || 64 % rows.positions == 0;
    if (TMA_STORE && box_store) {
      // The tile's previous store must have read it before it is overwritten.
      const unsigned o_tile = smem.o(consumer);
      if (tid % 128 == 0) evo::bulk_wait_group_read<0>();
      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + group + 8 * h;  // within the warpgroup's 64
#pragma unroll
        for (int df = 0; df < HEAD_DIM / 8; ++df) {
          evo::st_shared_b32(
              o_tile + (df / 8) * 64 * 128 + evo::swizzle_128b(row, df % 8) + quad * 4,
              evo::wgmma_attention_output_pair<Elem, HEAD_DIM>(acc, inv[h], h, df));
        }
      }
      evo::fence_proxy_async_shared();
      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);
      if (tid % 128 == 0) {
        // The warpgroup's 64 rows as the O map's box: 64 positions of one head, or (PACK_GQA)
        // whole blocks of positions of 64 / positions heads.
#pragma unroll
        for (int cb = 0; cb < kColumnBlocks; ++cb) {
          evo::tma_store_4d(o_map, o_tile + cb * 64 * 128, cb * 64, rows.position(m_tile, wg_row0),
                            rows.head(slot, wg_row0), b);
        }
        evo::bulk_commit_group();
      }
    } else if (PACK_GQA) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = tile_row + 8 * h;
        const int position = rows.position(m_tile, r);
        if (position < S_q) {
          unsigned short* o_row =
              O +
              ((static_cast<long long>(b) * H + rows.head(slot, r)) * S_q + position) * HEAD_DIM;
          evo::wgmma_attention_store_row<Elem, HEAD_DIM>(o_row, acc, inv[h], h, 0, quad);
        }
      }
    } else {
      unsigned short* o_head = O + static_cast<long long>(bh) * S_q * HEAD_DIM;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m_start + tile_row + 8 * h;
        if (row < S_q)
          evo::wgmma_attention_store_row<Elem, HEAD_DIM>(o_head, acc, inv[h], h, row, quad);
      }
    }
  }
  // Shared memory must outlive the stores that read it.
  if (TMA_STORE && tid % 128 == 0) evo::bulk_wait_group<0>();
  // The last consumer's final pass has no turn after it: consumer 0 takes it, so that no named
  // barrier is left half-arrived when the CTA exits.
  if (PINGPONG && consumer == 0) evo::named_barrier_sync<kTurnThreads>(1);
}

}  // namespace hopper

extern "C" __global__ void __launch_bounds__(hopper::kThreads, 1) sdpa_hopper_fwd(
    const unsigned short* __restrict__ /*Q*/, const unsigned short* __restrict__ /*K*/,
    const unsigned short* __restrict__ /*V*/, const __grid_constant__ evo::TensorMap Q_map,
    const __grid_constant__ evo::TensorMap K_map, const __grid_constant__ evo::TensorMap V_map,
    unsigned short* __restrict__ O, const __grid_constant__ evo::TensorMap O_map,
    float* __restrict__ O_partial, float* __restrict__ LSE_partial, int* __restrict__ Arrivals,
    int B, int H, int H_kv, int S_q, int S_kv) {
  extern __shared__ __align__(1024) unsigned char smem_bytes[];
  const hopper::Layout smem{evo::smem_u32(smem_bytes)};
  const int tid = evo::thread_index();
  if (tid == 0) {
    evo::prefetch_tensor_map(Q_map);
    evo::prefetch_tensor_map(K_map);
    evo::prefetch_tensor_map(V_map);
    if (TMA_STORE) evo::prefetch_tensor_map(O_map);
    evo::mbar_init(smem.q_full(), 1);
    evo::mbar_init(smem.q_empty(), hopper::kConsumerWarps * 32);
    for (int s = 0; s < STAGES; ++s) {
      evo::mbar_init(smem.k_full(s), 1);
      evo::mbar_init(smem.k_empty(s), hopper::kStageReleasers);
      evo::mbar_init(smem.v_full(s), 1);
      evo::mbar_init(smem.v_empty(s), hopper::kStageReleasers);
    }
    evo::fence_mbarrier_init();
  }
  // With CLUSTER_M the other CTAs' copies and arrivals reach these barriers: they must be set up
  // in every CTA of the cluster first.
  if (CLUSTER_M > 1) {
    evo::cluster_sync();
  } else {
    __syncthreads();
  }
  const int warpgroup = tid / 128;
  if (warpgroup == 0) {
    if constexpr (NUM_CONSUMERS >= 2) evo::registers_decrease<PRODUCER_REGS>();
    if (tid == 0) hopper::produce(smem, Q_map, K_map, V_map, B, H, H_kv, S_q, S_kv);
  } else {
    if constexpr (NUM_CONSUMERS >= 2) evo::registers_increase<hopper::kConsumerRegs>();
    hopper::consume(smem, O, O_map, hopper::Partials{O_partial, LSE_partial, Arrivals}, B, H, H_kv,
                    S_q, S_kv, warpgroup - 1);
  }
  // The other CTAs' consumers release their last stages into this CTA's barriers: its shared
  // memory must outlive those arrivals.
  if (CLUSTER_M > 1) evo::cluster_sync();
}

// The split-KV combine as a second kernel (SPLITS > 1 without LAST_CTA_COMBINES): one warp per
// row of O, rows in [B, H, S_q] order as the partials are.
extern "C" __global__ void __launch_bounds__(128)
    sdpa_hopper_combine(const float* __restrict__ O_partial, const float* __restrict__ LSE_partial,
                        unsigned short* __restrict__ O, int B, int H, int S_q) {
  const long long row_count = static_cast<long long>(B) * H * S_q;
  const long long row = static_cast<long long>(blockIdx.x) * 4 + threadIdx.x / 32;
  if (row >= row_count) return;
  evo::combine_row<HEAD_DIM, SPLITS, evo::kCombineFloatsInFlight>(
      O_partial + row * HEAD_DIM, row_count * HEAD_DIM, LSE_partial + row, row_count,
      threadIdx.x % 32, evo::StoreRow16<hopper::Elem>{O + row * HEAD_DIM});
}

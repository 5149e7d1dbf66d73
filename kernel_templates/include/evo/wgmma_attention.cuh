// The steps of flash attention on Hopper's warpgroup MMA (sm_90a), shared by the templates that
// use it. A warpgroup owns 64 query rows. Its m64nN accumulators are the m16n8 fragments of each
// warp stacked along N: register i of a thread holds row thread_row + 8 * ((i >> 1) & 1), where
// thread_row is the thread's row in its warp's 16-row slice, and column
// 8 * (i >> 2) + 2 * quad + (i & 1), quad being the lane's index within its group of four.
// Q, K and V tiles are 64-column blocks of 128-byte rows in the 128-byte swizzle.
#pragma once

#include "evo/attention.cuh"
#include "evo/core.cuh"
#include "evo/mma_sync_attention.cuh"
#include "evo/online_softmax.cuh"
#include "evo/wgmma.cuh"

namespace evo {

// Issues and commits S = Q K^T for the warpgroup's rows q_row0.. of a Q tile of QRows rows, K
// being a tile of BlockN rows; the caller waits. k16 steps walk 32 bytes inside a column block.
template <int BlockN, int HeadDim, int QRows, class Elem>
__device__ __forceinline__ void wgmma_attention_scores(float (&s)[BlockN / 2], unsigned q_tile,
                                                       int q_row0, unsigned k_tile) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < HeadDim / 16; ++ks) {
    const unsigned q_addr = q_tile + (ks / 4) * QRows * 128 + q_row0 * 128 + (ks % 4) * 32;
    const unsigned k_addr = k_tile + (ks / 4) * BlockN * 128 + (ks % 4) * 32;
    Wgmma<BlockN, Elem>::ss(s, smem_desc_sw128(q_addr, 16), smem_desc_sw128(k_addr, 16),
                            ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// Issues and commits O += P V; the caller waits. The probabilities of column groups 2kk and
// 2kk+1 are the A fragment of k16 step kk; V is read transposed, its 64-column blocks
// BlockN * 128 bytes apart.
template <int BlockN, int HeadDim, class Elem>
__device__ __forceinline__ void wgmma_attention_values(float (&acc)[HeadDim / 2],
                                                       const unsigned (&p)[BlockN / 16][4],
                                                       unsigned v_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BlockN / 16; ++kk) {
    Wgmma<HeadDim, Elem>::rs(acc, p[kk], smem_desc_sw128(v_tile + kk * 16 * 128, BlockN * 128));
  }
  wgmma_commit();
}

// Masks a tile of scores: columns at or past cols_left and, when Causal, columns past
// rows_ahead, both counted from the thread's first column for its first row.
template <int BlockN, bool Causal>
__device__ __forceinline__ void wgmma_attention_mask(float (&s)[BlockN / 2], int cols_left,
                                                     int rows_ahead) {
  mask_scores<BlockN / 8>([&](int nf, int e) -> float& { return s[4 * nf + e]; },
                          OutOfBoundsOrFuture<Causal>{cols_left, rows_ahead});
}

// The online softmax over the thread's two rows of a tile of scores: probabilities replace the
// scores, and alpha[h] returns the factor for what row h accumulated before.
template <int BlockN, bool FastExp>
__device__ __forceinline__ void wgmma_attention_softmax(float (&s)[BlockN / 2], float (&row_max)[2],
                                                        float (&row_sum)[2], float scale,
                                                        float (&alpha)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    alpha[h] = online_softmax_row<BlockN / 8, FastExp>(
        [&](int nf, int i) -> float& { return s[4 * nf + 2 * h + i]; }, row_max[h], row_sum[h],
        scale,
        [&](int nf, float p0, float p1) {
          s[4 * nf + 2 * h] = p0;
          s[4 * nf + 2 * h + 1] = p1;
        });
  }
}

// The largest sum of one thread's probabilities of a row in a tile that
// wgmma_attention_softmax_lagged takes as exact: each probability is then at most 2^14, a quarter
// of fp16's largest finite value, so P rounds with its usual relative error and the fp32 sums and
// accumulators hold it without loss. Higher than it need be for N(0, 1) inputs on purpose: on real
// data a row's maximum can climb several log2 units after its first tile, and every warp that
// passes the bound waits for P V before it goes on (wgmma_attention_lagged_rescale).
constexpr float kLaggedSumBound = 16384.f;

// The online softmax of a tile against the rows' maxima of the tiles before it, without the
// tile's own: the exponentials need not wait for the tile's maximum (its FMNMX tree and shuffles
// were most of what kept the tensor pipe from full under ncu at 4,16,4096,128). The maxima stay;
// the probabilities replace the scores and tile_sum[h] returns row h's sum over the thread's
// columns. Exact while no probability passes 1 by much: returns false where a row has no maximum
// yet (every earlier score masked) or its sum passes kLaggedSumBound (also inf and NaN), and the
// caller then scales the rows down (wgmma_attention_lagged_rescale) or, past
// kLaggedRescaleLimit, computes the tile's scores again and runs wgmma_attention_softmax on them.
// bound: kLaggedSumBound, or a smaller one where a test wants the exact path taken.
template <int BlockN>
__device__ __forceinline__ bool wgmma_attention_softmax_lagged(float (&s)[BlockN / 2],
                                                               const float (&row_max)[2],
                                                               float scale, float bound,
                                                               float (&tile_sum)[2]) {
  bool fits = true;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float neg_m_scaled = -row_max[h] * scale;
    float tree[BlockN / 8];
#pragma unroll
    for (int nf = 0; nf < BlockN / 8; ++nf) {
      float& p0 = s[4 * nf + 2 * h];
      float& p1 = s[4 * nf + 2 * h + 1];
      p0 = exp2_approx(fmaf(p0, scale, neg_m_scaled));
      p1 = exp2_approx(fmaf(p1, scale, neg_m_scaled));
      tree[nf] = p0 + p1;
    }
    tile_sum[h] = tree_sum(tree);
    fits = fits && row_max[h] != neg_inf() && tile_sum[h] <= bound;
  }
  return fits;
}

// The largest probability (against the old maxima) that wgmma_attention_lagged_rescale takes;
// above it (or inf, or a row with no maximum yet) the tile's scores are computed again. Far below
// fp32's 2^128, so that a row's factor 2^-e stays a normal float.
constexpr float kLaggedRescaleLimit = 0x1p100f;

// For a warp whose probabilities against the old maxima passed the lagged bound: where every row
// has a maximum and no probability passes limit (a score up to about 100 log2 units above its
// row's maximum), each row's probabilities, sum and accumulator (through alpha, for the caller's
// rescale) are scaled by 2^-e, e being the exponent of the row's largest probability, the row's
// maximum is raised by e log2 units, and it returns true. Scaling by a power of two is exact, so
// P V and O / l are what the exact softmax gives, without the scores again. Otherwise it changes
// nothing and returns false. The whole warp calls it (a vote, and the rows' largest
// probabilities reduced over each quad), after P_{j-1} V: P's registers are free then. The path
// is rare, so a running maximum and sum rather than trees: fewer registers.
template <int BlockN>
__device__ __forceinline__ bool wgmma_attention_lagged_rescale(float (&s)[BlockN / 2],
                                                               float (&row_max)[2],
                                                               float (&row_sum)[2], float scale,
                                                               float limit, float (&alpha)[2]) {
  float largest[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    largest[h] = 0.f;
#pragma unroll
    for (int nf = 0; nf < BlockN / 8; ++nf) {
      largest[h] = fmaxf(largest[h], fmaxf(s[4 * nf + 2 * h], s[4 * nf + 2 * h + 1]));
    }
    largest[h] = quad_max(largest[h]);
  }
  if (!__all_sync(0xffffffffu, row_max[0] != neg_inf() && row_max[1] != neg_inf() &&
                                   largest[0] < limit && largest[1] < limit)) {
    return false;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // Rows whose probabilities stay below 2 keep their maximum (alpha 1).
    const int e = largest[h] >= 2.f ? (__float_as_int(largest[h]) >> 23) - 127 : 0;
    const float factor = __int_as_float((127 - e) << 23);
    float sum = 0.f;
#pragma unroll
    for (int nf = 0; nf < BlockN / 8; ++nf) {
      s[4 * nf + 2 * h] *= factor;
      s[4 * nf + 2 * h + 1] *= factor;
      sum += s[4 * nf + 2 * h] + s[4 * nf + 2 * h + 1];
    }
    row_max[h] += static_cast<float>(e) / scale;
    row_sum[h] = row_sum[h] * factor + sum;
    alpha[h] = factor;
  }
  return true;
}

// One warp's 16 rows of S = Q K^T again, from the tiles in shared memory (64-column blocks of
// 128-byte rows in the 128-byte swizzle, as wgmma_attention_scores reads them), on warp-level
// MMAs (mma.sync) into the same registers: for the rare tile whose probabilities
// wgmma_attention_softmax_lagged could not take against the old maxima, after they replaced the
// scores. q_row is the warp's first row in the Q tile of QRows rows; k_tile a tile of BlockN keys.
template <int BlockN, int HeadDim, int QRows, class Elem>
__device__ __forceinline__ void warp_attention_scores_sw128(float (&s)[BlockN / 2], unsigned q_tile,
                                                            int q_row, unsigned k_tile) {
  const int lane = thread_index() % 32;
  const LdmatrixLane a = a_operand_lane(lane);
  const LdmatrixLane b = b_operand_lane(lane);
  const int a_row = q_row + a.row;
  // Byte offset of 16-byte chunk `chunk` of a 128-byte row: chunk ^ (row % 8) in the swizzle.
  const auto swizzled = [](int row, int chunk) {
    return static_cast<unsigned>(chunk ^ (row & 7)) << 4;
  };
  warp_scores<1, BlockN, HeadDim, Elem>(
      reinterpret_cast<float(&)[1][BlockN / 8][4]>(s),
      [&](int, int kd) {
        return q_tile + ((kd / 4) * QRows + a_row) * 128 + swizzled(a_row, (kd % 4) * 2 + a.chunk);
      },
      [&](int np, int kd) {
        const int key = 16 * np + b.row;
        return k_tile + ((kd / 4) * BlockN + key) * 128 + swizzled(key, (kd % 4) * 2 + b.chunk);
      });
}

// Rounds the probabilities into P's A fragments for wgmma_attention_values.
template <int BlockN, class Elem>
__device__ __forceinline__ void wgmma_attention_pack(const float (&s)[BlockN / 2],
                                                     unsigned (&p)[BlockN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BlockN / 16; ++kk) {
#pragma unroll
    for (int r = 0; r < 4; ++r) p[kk][r] = Elem::pack2(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  }
}

// Scales what each of the thread's two rows accumulated by its alpha.
template <int HeadDim>
__device__ __forceinline__ void wgmma_attention_rescale(float (&acc)[HeadDim / 2],
                                                        const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < HeadDim / 2; ++i) acc[i] *= alpha[(i >> 1) & 1];
}

// 1 / (the sum of a row's probabilities), 0 for a row that saw no key (every score masked).
__device__ __forceinline__ float wgmma_attention_normalizer(float row_sum) {
  const float l = quad_sum(row_sum);
  return l > 0.f ? 1.f / l : 0.f;
}

// Output pair df (columns 8 * df + 2 * quad and +1) of the thread's row h, scaled by that row's
// normalizer and rounded.
template <class Elem, int HeadDim>
__device__ __forceinline__ unsigned wgmma_attention_output_pair(const float (&acc)[HeadDim / 2],
                                                                float inv, int h, int df) {
  return Elem::pack2(acc[4 * df + 2 * h] * inv, acc[4 * df + 2 * h + 1] * inv);
}

// Stores the thread's pairs of its row h (row `row` of O, rows of HeadDim values from o_head),
// scaled by the row's normalizer. The callers place the normalizers and the row bound checks
// themselves: ptxas schedules the stores differently for each placement, and each template keeps
// the one measured fastest for it on the H100.
template <class Elem, int HeadDim>
__device__ __forceinline__ void wgmma_attention_store_row(unsigned short* o_head,
                                                          const float (&acc)[HeadDim / 2],
                                                          float inv, int h, int row, int quad) {
#pragma unroll
  for (int df = 0; df < HeadDim / 8; ++df) {
    st_global_b32(o_head + static_cast<long long>(row) * HeadDim + 8 * df + 2 * quad,
                  wgmma_attention_output_pair<Elem, HeadDim>(acc, inv, h, df));
  }
}

}  // namespace evo

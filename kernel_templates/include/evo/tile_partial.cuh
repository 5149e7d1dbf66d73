// A query tile whose KV range is shared by several CTAs (stream-K): each CTA runs the online
// softmax over its own span of KV tiles, and the partial states are merged into one, exactly as
// if one CTA had seen every span (up to rounding). The state is what each thread of the tile's
// computing threads holds: its fp32 output accumulators (not yet normalized), and for its two
// rows the largest raw score and its own share of the softmax denominator. Accumulator element i
// belongs to the thread's row (i >> 1) & 1, in the m16n8 fragment order of mma.sync and the
// stacked fragments of wgmma alike.
//
// A region holds one such state for Threads threads, laid out so that each 16-byte access of a
// warp is contiguous: the accumulators as AccFloats / 4 planes of Threads float4s, then one
// plane of (row_max[0], row_max[1], row_sum[0], row_sum[1]).
#pragma once

#include "evo/core.cuh"

namespace evo {

template <int AccFloats, int Threads>
struct TilePartial {
  static_assert(AccFloats % 4 == 0, "the accumulators are stored as float4s");
  enum : int { kFloats = (AccFloats + 4) * Threads };  // one region
};

// Leaves thread tid's state in `region` (TilePartial<AccFloats, Threads>::kFloats floats).
template <int AccFloats, int Threads>
__device__ __forceinline__ void store_tile_partial(float* region, const float (&acc)[AccFloats],
                                                   const float (&row_max)[2],
                                                   const float (&row_sum)[2], int tid) {
#pragma unroll
  for (int i = 0; i < AccFloats; i += 4) {
    st_global_v4_f32(region + (i / 4 * Threads + tid) * 4, acc[i], acc[i + 1], acc[i + 2],
                     acc[i + 3]);
  }
  st_global_v4_f32(region + (AccFloats / 4 * Threads + tid) * 4, row_max[0], row_max[1], row_sum[0],
                   row_sum[1]);
}

// Merges the state another CTA left in `region` (after last_cta_arrives of evo/split_kv.cuh)
// into thread tid's.
// `scale` is the online softmax's (softmax_scale<HeadDim, FastExp>).
template <int AccFloats, int Threads, bool FastExp>
__device__ __forceinline__ void merge_tile_partial(const float* region, float (&acc)[AccFloats],
                                                   float (&row_max)[2], float (&row_sum)[2],
                                                   float scale, int tid) {
  float other[4];
  ld_global_cg_vec(other, region + (AccFloats / 4 * Threads + tid) * 4);
  float mine_weight[2];
  float other_weight[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m = fmaxf(row_max[h], other[h]);
    // Rows that saw no key in either state keep max = -inf: 0 as the reference avoids NaN.
    const float m_ref = m == neg_inf() ? 0.f : m;
    if constexpr (FastExp) {
      mine_weight[h] = exp2_approx((row_max[h] - m_ref) * scale);
      other_weight[h] = exp2_approx((other[h] - m_ref) * scale);
    } else {
      mine_weight[h] = expf((row_max[h] - m_ref) * scale);
      other_weight[h] = expf((other[h] - m_ref) * scale);
    }
    row_sum[h] = row_sum[h] * mine_weight[h] + other[2 + h] * other_weight[h];
    row_max[h] = m;
  }
#pragma unroll
  for (int i = 0; i < AccFloats; i += 4) {
    float o[4];
    ld_global_cg_vec(o, region + (i / 4 * Threads + tid) * 4);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = ((i + e) >> 1) & 1;
      acc[i + e] = fmaf(acc[i + e], mine_weight[h], o[e] * other_weight[h]);
    }
  }
}

}  // namespace evo

// A query tile whose KV range is shared by several sets of threads (stream-K across CTAs, or
// consumer warpgroups of one CTA that take alternate KV tiles): each runs the online softmax over
// its own KV tiles, and the partial states are merged into one, exactly as if one set of threads
// had seen every KV tile (up to rounding). The state is what each computing thread holds: its
// fp32 output accumulators (not yet normalized), and for its two rows the largest raw score and
// its own share of the softmax denominator. Accumulator element i belongs to the thread's row
// (i >> 1) & 1, in the m16n8 fragment order of mma.sync and the stacked fragments of wgmma alike.
//
// A region holds one such state for Threads threads, in global memory (GlobalRegion: another
// CTA's state) or shared memory (SharedRegion: another warpgroup's), laid out so that each
// 16-byte access of a warp is contiguous: the accumulators as AccFloats / 4 planes of Threads
// float4s, then one plane of (row_max[0], row_max[1], row_sum[0], row_sum[1]).
#pragma once

#include "evo/core.cuh"

namespace evo {

template <int AccFloats, int Threads>
struct TilePartial {
  static_assert(AccFloats % 4 == 0, "the accumulators are stored as float4s");
  enum : int { kFloats = (AccFloats + 4) * Threads };  // one region
};

// Plane `plane` of thread tid's state in a global region. Loads go through L2 only, so that a
// state another SM wrote during this kernel is never read from a stale L1 line.
template <int Threads>
struct GlobalRegion {
  float* base;
  __device__ __forceinline__ void store(int plane, int tid, float a, float b, float c,
                                        float d) const {
    st_global_v4_f32(base + (plane * Threads + tid) * 4, a, b, c, d);
  }
  __device__ __forceinline__ void load(float (&v)[4], int plane, int tid) const {
    ld_global_cg_vec(v, base + (plane * Threads + tid) * 4);
  }
};

// The same layout in shared memory, at a 16-byte aligned shared address.
template <int Threads>
struct SharedRegion {
  unsigned base;
  __device__ __forceinline__ void store(int plane, int tid, float a, float b, float c,
                                        float d) const {
    const unsigned v[4] = {__float_as_uint(a), __float_as_uint(b), __float_as_uint(c),
                           __float_as_uint(d)};
    st_shared_v4(base + (plane * Threads + tid) * 16, v);
  }
  __device__ __forceinline__ void load(float (&v)[4], int plane, int tid) const {
    unsigned u[4];
    ld_shared_v4(u, base + (plane * Threads + tid) * 16);
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = __uint_as_float(u[e]);
  }
};

// Leaves thread tid's state in `region` (TilePartial<AccFloats, Threads>::kFloats floats).
template <int AccFloats, typename Region>
__device__ __forceinline__ void store_tile_partial(const Region& region,
                                                   const float (&acc)[AccFloats],
                                                   const float (&row_max)[2],
                                                   const float (&row_sum)[2], int tid) {
#pragma unroll
  for (int i = 0; i < AccFloats; i += 4) {
    region.store(i / 4, tid, acc[i], acc[i + 1], acc[i + 2], acc[i + 3]);
  }
  region.store(AccFloats / 4, tid, row_max[0], row_max[1], row_sum[0], row_sum[1]);
}

// Merges the state that other threads left in `region` into thread tid's, once they are known
// to have left it (after last_cta_arrives of evo/split_kv.cuh, or a barrier).
// `scale` is the online softmax's (softmax_scale<HeadDim, FastExp>).
template <int AccFloats, bool FastExp, typename Region>
__device__ __forceinline__ void merge_tile_partial(const Region& region, float (&acc)[AccFloats],
                                                   float (&row_max)[2], float (&row_sum)[2],
                                                   float scale, int tid) {
  float other[4];
  region.load(other, AccFloats / 4, tid);
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
    region.load(o, i / 4, tid);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = ((i + e) >> 1) & 1;
      acc[i + e] = fmaf(acc[i + e], mine_weight[h], o[e] * other_weight[h]);
    }
  }
}

}  // namespace evo

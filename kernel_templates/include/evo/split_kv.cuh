// Split-KV attention (flash-decoding): the KV range of one query tile is spread over Splits
// CTAs. Split s leaves, per query row, its output normalized by its own softmax denominator and
// the log-sum-exp of its scores, in log2 units (scale2 = log2(e) / sqrt(D), m the row's largest
// raw score in the split, l = sum_j 2^(scale2 (s_j - m)) over the split's keys):
//   O_s = (sum_j 2^(scale2 (s_j - m)) v_j) / l,   LSE_s = scale2 m + log2(l).
// The combine is then the softmax over all keys, exactly up to rounding:
//   M = max_s LSE_s,   w_s = 2^(LSE_s - M),   O = sum_s w_s O_s / sum_s w_s.
// A split that saw no visible key of a row (fewer KV tiles than splits, or causal masking) has
// l = 0, LSE_s = -inf, O_s = 0 and weight 0.
//
// Layout: partial outputs fp32 [Splits][rows][HeadDim] and LSEs fp32 [Splits][rows] (the rows
// in whatever order the template keeps them; it passes the split strides). A template combines
// either in a second kernel (one warp per row) or in the CTA that finishes a work item's last
// split (last_split_arrives, with a self-resetting counter per work item); both use combine_row,
// which does not depend on how the partials were computed (mma.sync or wgmma) nor on the output
// type (Store).
#pragma once

#include "evo/core.cuh"
#include "evo/half_types.cuh"

namespace evo {

// The KV tiles [first, first + count) that split `split` of `splits` owns among `tiles`: whole
// tiles, spread evenly (counts differ by at most one; a split owns none when tiles < splits).
struct SplitRange {
  int first;
  int count;
};
__device__ __forceinline__ SplitRange split_range(int tiles, int split, int splits) {
  const int first = split * tiles / splits;
  return {first, (split + 1) * tiles / splits - first};
}

// LSE_s of a row from its largest raw score, its softmax denominator l (summed over the whole
// row) and scale2 = log2(e) / sqrt(D): -inf where the split saw no visible key (l = 0).
__device__ __forceinline__ float split_lse(float row_max, float l, float scale2) {
  return l > 0.f ? fmaf(row_max, scale2, log2f(l)) : neg_inf();
}

// A pair of fp32 values of a partial output row.
__device__ __forceinline__ void st_global_v2_f32(float* p, float x, float y) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(x), "f"(y) : "memory");
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// The columns of a row that one lane combines: HeadDim / 32 consecutive ones, so that a warp
// reads a split's whole row in one coalesced sweep.
template <int HeadDim>
struct CombineLanes {
  static_assert(HeadDim % 64 == 0 && HeadDim <= 256, "HEAD_DIM must be 64, 128, 192 or 256");
  enum : int { kColumns = HeadDim / 32 };
};

// combine_row's FloatsInFlight for a combine kernel (registers for 32 splits of 128 columns)
// and for the CTA that combines after its own work: 0, the rows loaded once the weights are
// known (a 254-register sdpa_fp16 at D=256 spilled with even one split loaded before).
constexpr int kCombineFloatsInFlight = 128;
constexpr int kLastCtaCombineFloatsInFlight = 0;

// One warp combines one row from its Splits partials: o_row0 / lse_row0 point at split 0's
// partial output row and LSE, and the other splits follow o_split_stride / lse_split_stride
// elements apart. Each lane loads up to FloatsInFlight partial values (whole splits of
// CombineLanes<HeadDim>::kColumns) before the weights are known, then combines them; with 0, a
// split's values are loaded once its weight is known. A combine kernel has registers for every
// split at once, a CTA that combines after its own work may not. store(column, values)
// writes the lane's CombineLanes<HeadDim>::kColumns combined values from `column` on (StoreRow16
// for fp16 or bf16 rows). Every lane of the warp calls it (shuffles).
template <int HeadDim, int Splits, int FloatsInFlight, class Store>
__device__ __forceinline__ void combine_row(const float* o_row0, long long o_split_stride,
                                            const float* lse_row0, long long lse_split_stride,
                                            int lane, Store store) {
  static_assert(Splits >= 1 && Splits <= 32, "one lane holds each split's LSE: at most 32 splits");
  constexpr int kColumns = CombineLanes<HeadDim>::kColumns;
  // With FloatsInFlight > 0 the partial rows are loaded before the weights are known: a combine
  // is a chain of L2 round trips that the whole call waits for, and the weights' shuffles
  // between the LSE's load and the rows' loads made it one round trip longer.
  constexpr bool kEarly = FloatsInFlight > 0;
  constexpr int kFit = FloatsInFlight / kColumns > 0 ? FloatsInFlight / kColumns : 1;
  constexpr int kBatch = !kEarly ? 1 : Splits < kFit ? Splits : kFit;
  const float* o_lane = o_row0 + lane * kColumns;
  float v[kBatch][kColumns];
  // Splits [first, first + kBatch) into v.
  const auto load = [&](int first) {
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (first + b < Splits) ld_global_cg_vec(v[b], o_lane + (first + b) * o_split_stride);
    }
  };
  const float lse = lane < Splits ? ld_global_cg(lse_row0 + lane * lse_split_stride) : neg_inf();
  float o[kColumns];
#pragma unroll
  for (int i = 0; i < kColumns; ++i) o[i] = 0.f;
  float after_rows = lse;
  if constexpr (kEarly) {
    load(0);
    // ptxas schedules the shuffles, which wait for the LSE only, before the rows' loads unless
    // they wait for those too: a product with zero (kept, since it is NaN for an infinite
    // value) of one value of each split makes them.
#pragma unroll
    for (int b = 0; b < kBatch; ++b) after_rows = fmaf(v[b][0], 0.f, after_rows);
  }
  const float lse_max = warp_max(after_rows);
  // Splits that saw no key weigh nothing (and -inf - -inf would be NaN where none did).
  const float weight = lse == neg_inf() ? 0.f : exp2f(lse - lse_max);
  const float weight_sum = warp_sum(weight);
#pragma unroll
  for (int s = 0; s < Splits; ++s) {
    const float w = __shfl_sync(0xffffffffu, weight, s);
    float row[kColumns];
    if constexpr (kEarly) {
      if (s > 0 && s % kBatch == 0) load(s);
#pragma unroll
      for (int i = 0; i < kColumns; ++i) row[i] = v[s % kBatch][i];
    } else {
      ld_global_cg_vec(row, o_lane + s * o_split_stride);
    }
#pragma unroll
    for (int i = 0; i < kColumns; ++i) o[i] = fmaf(w, row[i], o[i]);
  }
  const float inv = weight_sum > 0.f ? 1.f / weight_sum : 0.f;
#pragma unroll
  for (int i = 0; i < kColumns; ++i) o[i] *= inv;
  store(lane * kColumns, o);
}

// A combine_row store into a row of 16-bit floats (Element: Fp16 or Bf16 of evo/half_types.cuh).
template <class Element>
struct StoreRow16 {
  unsigned short* row;
  template <int N>
  __device__ __forceinline__ void operator()(int column, const float (&v)[N]) const {
    static_assert(N % 2 == 0, "pairs of values, 4-byte aligned");
    unsigned packed[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) packed[i] = Element::pack2(v[2 * i], v[2 * i + 1]);
    unsigned short* p = row + column;
    if constexpr (N % 8 == 0) {
#pragma unroll
      for (int i = 0; i < N / 2; i += 4) {
        const unsigned four[4] = {packed[i], packed[i + 1], packed[i + 2], packed[i + 3]};
        st_global_v4(p + 2 * i, four);
      }
    } else if constexpr (N % 4 == 0) {
#pragma unroll
      for (int i = 0; i < N / 2; i += 2) {
        asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p + 2 * i), "r"(packed[i]),
                     "r"(packed[i + 1])
                     : "memory");
      }
    } else {
#pragma unroll
      for (int i = 0; i < N / 2; ++i) st_global_b32(p + 2 * i, packed[i]);
    }
  }
};

// Named barrier `id` (1..15), complete once Threads threads (whole warps) reach it: a CTA's
// computing warps, leaving out a producer warp that never does.
template <int Threads>
__device__ __forceinline__ void split_barrier(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(Threads) : "memory");
}

// Like split_barrier, and returns whether `predicate` held in any of the Threads threads.
template <int Threads>
__device__ __forceinline__ bool split_barrier_or(int id, bool predicate) {
  unsigned any;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n"
      " bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(any)
      : "r"(static_cast<unsigned>(predicate)), "r"(id), "n"(Threads)
      : "memory");
  return any != 0;
}

// The last-CTA protocol: each of a work item's `arrivals` CTAs calls this with all its Threads
// computing threads (tid in [0, Threads)) once its partials are written; it returns true in the
// CTA that arrived last, whose threads may then read every other CTA's partials (ld.global.cg)
// and combine them. `counter` (int, zero before the first CTA arrives) counts the arrivals and
// is zero again when this returns true, so that a counter zeroed once serves every later call.
template <int Threads>
__device__ __forceinline__ bool last_cta_arrives(int* counter, int arrivals, int tid,
                                                 int barrier_id) {
  __threadfence();  // this thread's partials are visible device-wide before the count moves
  split_barrier<Threads>(barrier_id);
  bool last = false;
  if (tid == 0) last = atomicAdd(counter, 1) == arrivals - 1;
  last = split_barrier_or<Threads>(barrier_id, last);
  if (last) {
    __threadfence();  // the other CTAs' partials, published before their arrivals, are seen
    if (tid == 0) atomicExch(counter, 0);
  }
  return last;
}

// last_cta_arrives for the Splits CTAs of a split-KV work item.
template <int Threads, int Splits>
__device__ __forceinline__ bool last_split_arrives(int* counter, int tid, int barrier_id) {
  return last_cta_arrives<Threads>(counter, Splits, tid, barrier_id);
}

}  // namespace evo

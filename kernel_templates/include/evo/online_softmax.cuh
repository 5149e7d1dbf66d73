// The online softmax of flash attention over the accumulator fragments of S = Q K^T.
//
// Its unit is one row of S as the tensor cores leave it in a thread: NumFrags fragments of n8
// columns, the row's two scores of fragment nf at score(nf, 0) and score(nf, 1), and the other
// three lanes of the quad (lanes xor 1 and xor 2) holding the rest of the row. That is the
// m16n8 accumulator of mma.sync (elements 2h and 2h + 1 for the row half h) and the m64nN
// accumulator of wgmma alike (the m16n8 fragments stacked), so every template shares it.
#pragma once

#include "evo/core.cuh"

namespace evo {

// The factor the online softmax applies to raw scores: 1/sqrt(HeadDim), with log2(e) folded in
// when FastExp (exp2 with one FMA per score instead of expf).
template <int HeadDim, bool FastExp>
__host__ __device__ constexpr float softmax_scale() {
  return static_cast<float>((FastExp ? 1.4426950408889634 : 1.0) / const_sqrt(HeadDim));
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Pairwise trees, not a running max or sum: a serial chain of 2 * NumFrags dependent FMNMX / FADD
// stalls the warp on each result (ncu on sdpa_fp16: fixed-latency waits dominated).
template <int NumFrags>
__device__ __forceinline__ float tree_max(float (&tree)[NumFrags]) {
#pragma unroll
  for (int stride = 1; stride < NumFrags; stride *= 2) {
#pragma unroll
    for (int nf = 0; nf + stride < NumFrags; nf += 2 * stride) {
      tree[nf] = fmaxf(tree[nf], tree[nf + stride]);
    }
  }
  return tree[0];
}

template <int NumFrags>
__device__ __forceinline__ float tree_sum(float (&tree)[NumFrags]) {
#pragma unroll
  for (int stride = 1; stride < NumFrags; stride *= 2) {
#pragma unroll
    for (int nf = 0; nf + stride < NumFrags; nf += 2 * stride) tree[nf] += tree[nf + stride];
  }
  return tree[0];
}

// One row's step of the online softmax over a new tile of scores. `scale` is the softmax scale
// (1/sqrt(D), times any dequantization factor), with log2(e) folded in when FastExp (exp2 with
// one FMA per score instead of expf). Updates row_max and row_sum, hands each pair of
// probabilities to keep(nf, p0, p1) (back into the scores, or packed for the P V MMA), and
// returns alpha, the factor by which what was accumulated before this tile must be rescaled.
template <int NumFrags, bool FastExp, class Score, class Keep>
__device__ __forceinline__ float online_softmax_row(Score score, float& row_max, float& row_sum,
                                                    float scale, Keep keep) {
  float tree[NumFrags];
#pragma unroll
  for (int nf = 0; nf < NumFrags; ++nf) tree[nf] = fmaxf(score(nf, 0), score(nf, 1));
  const float mx = quad_max(fmaxf(row_max, tree_max(tree)));
  // A row with every score so far masked keeps max = -inf; using 0 as the reference avoids
  // (-inf) - (-inf) = NaN and still maps masked scores to exp(-inf) = 0.
  const float m_ref = mx == neg_inf() ? 0.f : mx;
  float alpha;
  float neg_m_scaled = 0.f;  // FastExp only
  if constexpr (FastExp) {
    neg_m_scaled = -m_ref * scale;
    alpha = exp2_approx(fmaf(row_max, scale, neg_m_scaled));
  } else {
    alpha = expf((row_max - m_ref) * scale);
  }
  row_max = mx;
#pragma unroll
  for (int nf = 0; nf < NumFrags; ++nf) {
    float p[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if constexpr (FastExp) {
        p[i] = exp2_approx(fmaf(score(nf, i), scale, neg_m_scaled));
      } else {
        p[i] = expf((score(nf, i) - m_ref) * scale);
      }
    }
    tree[nf] = p[0] + p[1];
    keep(nf, p[0], p[1]);
  }
  row_sum = row_sum * alpha + tree_sum(tree);
  return alpha;
}

}  // namespace evo

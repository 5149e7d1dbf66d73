#!/usr/bin/env python3
"""Copies of sdpa_hopper (correct: only the machine code's order changes) that fence the online
softmax into basic blocks, so that ptxas cannot hoist the wait for the warpgroup's own P V above
the row maxima (the thirty-eighth session's SASS: WARPGROUP.DEPBAR.LE gsb0, 0x0 sits before the
FMNMX tree at BLOCK_N=128, and a copy without maxima kept the tensor pipe 91.8 % busy against
79.2 %). A fence is a branch to a trap on a value no row produces (trap: it spilled 96 to 340
bytes, C7512, and was not run), a __syncwarp whose mask depends on the value (wsync), a
__threadfence_block (membar) or a __nanosleep(0) (sleep).
OUT/ref: the template; OUT/EDGEmax: a fence after the rows' maxima; OUT/EDGEboth: also one
after the exponentials and sums, before the wait. Usage: sol4.py OUT"""
import sys

import sol_copy

out = sys.argv[1]
VARIANT = r'''
namespace sol {
__device__ __forceinline__ void block_edge(float x) {
#if SOL_EDGE == 1
  __syncwarp(__float_as_uint(x) == 0xffffffffu ? 1u : 0xffffffffu);
#elif SOL_EDGE == 2
  (void)x;
  __threadfence_block();
#elif SOL_EDGE == 3
  (void)x;
  __nanosleep(0);
#else
  if (__float_as_uint(x) == 0xffffffffu) asm volatile("trap;");
#endif
}
template <int BlockN, bool EdgeAfterSums>
__device__ __forceinline__ void softmax(float (&s)[BlockN / 2], float (&row_max)[2],
                                        float (&row_sum)[2], float scale, float (&alpha)[2]) {
  constexpr int kFrags = BlockN / 8;
  float mx[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tree[kFrags];
#pragma unroll
    for (int nf = 0; nf < kFrags; ++nf) tree[nf] = fmaxf(s[4 * nf + 2 * h], s[4 * nf + 2 * h + 1]);
    mx[h] = evo::quad_max(fmaxf(row_max[h], evo::tree_max(tree)));
  }
  block_edge(fmaxf(mx[0], mx[1]));
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    constexpr int kFrags2 = BlockN / 8;
    float tree[kFrags2];
    const float m_ref = mx[h] == evo::neg_inf() ? 0.f : mx[h];
    const float neg_m_scaled = -m_ref * scale;
    alpha[h] = evo::exp2_approx(fmaf(row_max[h], scale, neg_m_scaled));
    row_max[h] = mx[h];
#pragma unroll
    for (int nf = 0; nf < kFrags2; ++nf) {
      float p[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) p[i] = evo::exp2_approx(fmaf(s[4 * nf + 2 * h + i], scale, neg_m_scaled));
      tree[nf] = p[0] + p[1];
      s[4 * nf + 2 * h] = p[0];
      s[4 * nf + 2 * h + 1] = p[1];
    }
    row_sum[h] = row_sum[h] * alpha[h] + evo::tree_sum(tree);
  }
  if (EdgeAfterSums) block_edge(row_sum[0] + row_sum[1]);
}
}  // namespace sol
'''
EDGES = {"trap": 0, "wsync": 1, "membar": 2, "sleep": 3}
for name in ["ref"] + [e + s for e in EDGES for s in ("max", "both")]:
    template = sol_copy.copy(out, name)
    assert template.text.count(sol_copy.SOFTMAX) == 1
    if name != "ref":
        edge = EDGES[name.removesuffix("both").removesuffix("max")]
        template.before_namespace(f"#define SOL_EDGE {edge}\n" + VARIANT + "\n")
        flag = "true" if name.endswith("both") else "false"
        template.patch(sol_copy.SOFTMAX, "static_assert(FAST_EXP, \"sol4: FAST_EXP only\"); "
                       f"sol::softmax<BLOCK_N, {flag}>(s, row_max, row_sum, kSoftmaxScale, alpha);")
    template.write()

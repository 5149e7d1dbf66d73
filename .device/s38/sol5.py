#!/usr/bin/env python3
"""Is the row maximum's cost at 4,16,4096,128 its latency before the exponentials or its
instructions? Speed-of-light copies of sdpa_hopper (tolerance opened): OUT/stale takes each tile's
exponentials against the row's maximum of the tiles before (the first tile of each piece exact;
fine for N(0, 1) data, not in general) while the exact maximum is still computed, with its shuffles, for the next tile: the
same instructions, the maximum off the exponentials' path; OUT/noshfl keeps the dependency but
reduces the maximum over the thread's own columns only (no shuffles; wrong). Usage: sol5.py OUT"""
import sys

import sol_copy

out = sys.argv[1]
VARIANT = r'''
namespace sol {
template <int BlockN, bool Stale, bool Shuffle>
__device__ __forceinline__ void softmax(float (&s)[BlockN / 2], float (&row_max)[2],
                                        float (&row_sum)[2], float scale, float (&alpha)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    constexpr int kFrags = BlockN / 8;
    float tree[kFrags];
#pragma unroll
    for (int nf = 0; nf < kFrags; ++nf) tree[nf] = fmaxf(s[4 * nf + 2 * h], s[4 * nf + 2 * h + 1]);
    const float local = fmaxf(row_max[h], evo::tree_max(tree));
    const float mx = Shuffle ? evo::quad_max(local) : local;
    // Stale: the reference is the maximum the row had before this tile, known before its scores.
    const float ref = Stale ? row_max[h] : mx;
    const float m_ref = ref == evo::neg_inf() ? 0.f : ref;
    const float neg_m_scaled = -m_ref * scale;
    alpha[h] = evo::exp2_approx(fmaf(row_max[h], scale, neg_m_scaled));
    // Stale: the exact maximum is still computed and feeds the next tile (numerically the old one).
    row_max[h] = Stale ? fmaxf(ref, mx - 1e30f) : ref;
#pragma unroll
    for (int nf = 0; nf < kFrags; ++nf) {
      float p[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) p[i] = evo::exp2_approx(fmaf(s[4 * nf + 2 * h + i], scale, neg_m_scaled));
      tree[nf] = p[0] + p[1];
      s[4 * nf + 2 * h] = p[0];
      s[4 * nf + 2 * h + 1] = p[1];
    }
    row_sum[h] = row_sum[h] * alpha[h] + evo::tree_sum(tree);
  }
}
}  // namespace sol
'''
for name, args in (("stale", "true, true"), ("noshfl", "false, false")):
    template = sol_copy.copy(out, name, wrong=True)
    template.before_namespace(VARIANT + "\n")
    template.patch("const auto softmax = [&](int j, float(&alpha)[2]) {",
                   "const auto softmax = [&](int j, float(&alpha)[2], bool first = false) {")
    template.patch("softmax(j_first, alpha);", "softmax(j_first, alpha, true);")
    template.patch(sol_copy.SOFTMAX, "if (first) { " + sol_copy.SOFTMAX + " } else { " +
                   f"sol::softmax<BLOCK_N, {args}>(s, row_max, row_sum, kSoftmaxScale, alpha); }}")
    template.write()

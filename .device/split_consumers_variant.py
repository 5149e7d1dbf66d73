#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) for decoding: its two
consumer warpgroups share one query tile of 64 rows and take alternate KV tiles (consumer c the
tiles j with j % 2 == c), and consumer 1's state is merged into consumer 0's through shared
memory before the epilogue. A CTA then streams its KV range with two MMA chains instead of one,
so that 64 CTAs (SPLITS=8 of 8 KV heads) might keep up with the HBM rate. For NUM_CONSUMERS=2
PINGPONG=0 INTRA_OVERLAP=0 STREAM_K=0 FAST_EXP=1 LAST_CTA_COMBINES=0 TMA_STORE=0 and an even STAGES (each stage then
serves one consumer, so no mbarrier parity can alias). Usage: split_consumers_variant.py OUT KNOB=VALUE..."""
from template_copy import TemplateCopy

copy = TemplateCopy.from_argv()
patch = copy.patch
copy.before_namespace("""static_assert(NUM_CONSUMERS == 2 && !PINGPONG && !INTRA_OVERLAP && !STREAM_K && FAST_EXP &&
                  STAGES % 2 == 0 && !LAST_CTA_COMBINES && !TMA_STORE,
              "the split-consumers copy needs 2 consumers, no ping-pong, no overlap, no stream-K, "
              "FAST_EXP, an even STAGES, no last-CTA combine and no TMA store");
""")
patch("  kBlockM = NUM_CONSUMERS * 64,\n", "  kBlockM = 64,  // both consumers share the tile's rows\n")
patch("  const int wg_row0 = consumer * 64;\n", "  const int wg_row0 = 0;\n")
# Each KV stage is released by the 4 warps of the consumer that used it.
patch("      evo::mbar_init(smem.k_empty(s), hopper::kConsumerWarps);",
      "      evo::mbar_init(smem.k_empty(s), 4);")
patch("      evo::mbar_init(smem.v_empty(s), hopper::kConsumerWarps);",
      "      evo::mbar_init(smem.v_empty(s), 4);")
# Consumer c takes the KV tiles j % 2 == c, and releases Q after its last one (below).
patch("        for (int j = 0; j < num_kv_tiles; ++j) {",
      "        for (int j = consumer; j < num_kv_tiles; j += 2) {")
patch("""          if (j == num_kv_tiles - 1) release(smem.q_empty(), lane);
          softmax(j, alpha);
          rescale(alpha);""", """          softmax(j, alpha);
          rescale(alpha);""")
patch("""          release(smem.v_empty(stage_of(j)), lane);
        }
      }
      kv_iter += num_kv_tiles;""", """          release(smem.v_empty(stage_of(j)), lane);
        }
        release(smem.q_empty(), lane);
      }
      kv_iter += num_kv_tiles;""")
# The merge: consumer 1 leaves its state in shared memory, consumer 0 folds it into its own.
patch("""    const int b = bh / slots;
    const int slot = bh % slots;
    if (SPLITS > 1) {""", """    {
      const int t = tid % 128;
      const unsigned scratch = smem.bar(0) + 1024;
      const auto at = [&](int plane) { return scratch + (plane * 128 + t) * 16; };
      if (consumer == 1) {
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 2; i += 4) {
          const unsigned v[4] = {__float_as_uint(acc[i]), __float_as_uint(acc[i + 1]),
                                 __float_as_uint(acc[i + 2]), __float_as_uint(acc[i + 3])};
          evo::st_shared_v4(at(i / 4), v);
        }
        const unsigned st[4] = {__float_as_uint(row_max[0]), __float_as_uint(row_max[1]),
                                __float_as_uint(row_sum[0]), __float_as_uint(row_sum[1])};
        evo::st_shared_v4(at(HEAD_DIM / 8), st);
      }
      evo::named_barrier_sync<256>(kArrivalBarrier);
      if (consumer == 1) {
        evo::named_barrier_sync<256>(kArrivalBarrier);  // consumer 0 has read the state
        continue;
      }
      unsigned st[4];
      evo::ld_shared_v4(st, at(HEAD_DIM / 8));
      float mine[2], other[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float other_max = __uint_as_float(st[h]);
        const float m = fmaxf(row_max[h], other_max);
        const float m_ref = m == evo::neg_inf() ? 0.f : m;
        mine[h] = evo::exp2_approx((row_max[h] - m_ref) * kSoftmaxScale);
        other[h] = evo::exp2_approx((other_max - m_ref) * kSoftmaxScale);
        row_sum[h] = row_sum[h] * mine[h] + __uint_as_float(st[2 + h]) * other[h];
        row_max[h] = m;
      }
#pragma unroll
      for (int i = 0; i < HEAD_DIM / 2; i += 4) {
        unsigned v[4];
        evo::ld_shared_v4(v, at(i / 4));
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = ((i + e) >> 1) & 1;
          acc[i + e] = fmaf(acc[i + e], mine[h], __uint_as_float(v[e]) * other[h]);
        }
      }
      evo::named_barrier_sync<256>(kArrivalBarrier);
    }
    const int b = bh / slots;
    const int slot = bh % slots;
    if (SPLITS > 1) {""")
copy.write()
copy.derive("BLOCK_M", lambda e: "64")
copy.derive("SMEM_BYTES", lambda e: f"({e}) + 1024 + 128 * (D / 2 + 4) * 4")

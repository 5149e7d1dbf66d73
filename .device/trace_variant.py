#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) that records clock64() at
the events of each tile into the global evo_trace, for the first 4 CTAs and 64 tiles each: per
consumer warpgroup (thread 0 of it) 0 tile start, 7 K_0 landed, 1 first Q K^T issued, 6 first
softmax done, 2 loop done, 3 last P V issued, 4 last P V done, 5 epilogue done; the producer
0 Q load issued, 1 last K/V copy issued. Read by trace_read.py. Usage: trace_variant.py OUT KNOB=V..."""
import os
from template_copy import SOFTMAX_WAIT_PACK, TemplateCopy

copy = TemplateCopy.from_argv()
patch = copy.patch

copy.before_namespace("""__device__ unsigned long long evo_trace[4][3][64][24];
#define EVO_TRACE(e)                                                              \\
  do {                                                                            \\
    if (blockIdx.x < 4 && tid % 128 == 0 && piece_round < 64)                     \\
      evo_trace[blockIdx.x][1 + consumer][piece_round][e] = clock64();            \\
  } while (0)
""")
patch("    const int first_position = m_tile * rows.positions;\n",
      "    const int first_position = m_tile * rows.positions;\n    EVO_TRACE(0);\n")
patch("        wait_keys(0);\n        turns.wait();\n        issue_scores(stage_of(0));\n",
      "        wait_keys(0);\n        EVO_TRACE(7);\n        turns.wait();\n        issue_scores(stage_of(0));\n        EVO_TRACE(1);\n")
patch("        softmax(0, alpha);\n        pack_probabilities();\n",
      "        softmax(0, alpha);\n        pack_probabilities();\n        EVO_TRACE(6);\n")
patch("        const int last = num_kv_tiles - 1;\n",
      "        const int last = num_kv_tiles - 1;\n        EVO_TRACE(2);\n")
patch("        issue_values(stage_of(last));\n        turns.pass();\n",
      "        issue_values(stage_of(last));\n        EVO_TRACE(3);\n        turns.pass();\n")
patch("        release(smem.v_empty(stage_of(last)), lane);\n      } else {",
      "        EVO_TRACE(4);\n        release(smem.v_empty(stage_of(last)), lane);\n      } else {")
patch("    }\n  }\n  // Shared memory must outlive", "    }\n    EVO_TRACE(5);\n  }\n  // Shared memory must outlive")
patch("    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);\n    if (STREAM_K) publish_piece",
      "    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);\n"
      "    if (blockIdx.x < 4 && round < 64) evo_trace[blockIdx.x][0][round][0] = clock64();\n"
      "    if (STREAM_K) publish_piece")
patch("    ++round;\n  }\n  if (STREAM_K) {",
      "    if (blockIdx.x < 4 && round < 64) evo_trace[blockIdx.x][0][round][1] = clock64();\n"
      "    ++round;\n  }\n  if (STREAM_K) {")
# Inside the loop, at j == 16: 8 turn obtained, 9 issued and passed, 10 scores landed, 11 softmax
# done, 12 P V landed, 13 packed. In the TMA_STORE epilogue: 14 after inv, 15 first barrier,
# 16 stores to shared done, 17 second barrier.
loop_events = os.environ.get("LOOP_EVENTS", "1") == "1"
if loop_events:
  patch("          wait_values(j - 1);\n          turns.wait();\n",
      "          wait_values(j - 1);\n          turns.wait();\n          if (j == 16) EVO_TRACE(8);\n")
  patch("          issue_values(stage_of(j - 1));\n          turns.pass();\n          evo::wgmma_wait<1>();\n",
      "          issue_values(stage_of(j - 1));\n          turns.pass();\n          if (j == 16) EVO_TRACE(9);\n          evo::wgmma_wait<1>();\n          if (j == 16) EVO_TRACE(10);\n")
  patch("          softmax(j, alpha);\n          evo::wgmma_wait<0>();\n",
      "          softmax(j, alpha);\n          if (j == 16) EVO_TRACE(11);\n          evo::wgmma_wait<0>();\n          if (j == 16) EVO_TRACE(12);\n")
  patch("          if (!RESCALE_UNDER_QK) rescale(alpha);\n          pack_probabilities();\n",
      "          if (!RESCALE_UNDER_QK) rescale(alpha);\n          pack_probabilities();\n          if (j == 16) EVO_TRACE(13);\n")
patch("      const unsigned o_tile = smem.o(consumer);\n", "      const unsigned o_tile = smem.o(consumer);\n      EVO_TRACE(14);\n")
patch("      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);\n#pragma unroll\n      for (int h = 0; h < 2; ++h) {\n        const int row = warp",
      "      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);\n      EVO_TRACE(15);\n#pragma unroll\n      for (int h = 0; h < 2; ++h) {\n        const int row = warp")
patch("      evo::fence_proxy_async_shared();\n      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);\n",
      "      EVO_TRACE(16);\n      evo::fence_proxy_async_shared();\n      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);\n      EVO_TRACE(17);\n")
# Variants (env VARIANT, letters): a: the TMA store of O issued by warp 3's lane 0, not thread 0;
# b: the normalizers computed before the last P V is waited for; n: no clock64 events at all.
variant = os.environ.get("VARIANT", "")
if "a" in variant:
    patch("      if (tid % 128 == 0) evo::bulk_wait_group_read<0>();", "      if (tid % 128 == 96) evo::bulk_wait_group_read<0>();")
    patch("      if (tid % 128 == 0) {\n        // The warpgroup's 64 rows", "      if (tid % 128 == 96) {\n        // The warpgroup's 64 rows")
    patch("  if (TMA_STORE && tid % 128 == 0) evo::bulk_wait_group<0>();", "  if (TMA_STORE && tid % 128 == 96) evo::bulk_wait_group<0>();")
if "b" in variant:
    patch("    if (SPLITS == 1 || num_kv_tiles > 0) {\n      if (!STREAM_K)",
          "    float inv_pre[2] = {0.f, 0.f};\n    if (SPLITS == 1 || num_kv_tiles > 0) {\n      if (!STREAM_K)")
    patch("        wait_values(last);\n        turns.wait();\n        if (RESCALE_UNDER_QK) rescale(alpha);",
          "        inv_pre[0] = evo::wgmma_attention_normalizer(row_sum[0]);\n        inv_pre[1] = evo::wgmma_attention_normalizer(row_sum[1]);\n"
          "        wait_values(last);\n        turns.wait();\n        if (RESCALE_UNDER_QK) rescale(alpha);")
    patch("    const float inv[2] = {evo::wgmma_attention_normalizer(row_sum[0]),\n                          evo::wgmma_attention_normalizer(row_sum[1])};",
          "    const bool merged = STREAM_K && piece.parts > 1;\n"
          "    const float inv[2] = {merged ? evo::wgmma_attention_normalizer(row_sum[0]) : inv_pre[0],\n"
          "                          merged ? evo::wgmma_attention_normalizer(row_sum[1]) : inv_pre[1]};")
# p: the next P packed into registers of its own before the wait for the last P V, copied into
# P after it (ptxas otherwise hoists that wait above the softmax to pack in place).
if "p" in variant:
    patch(SOFTMAX_WAIT_PACK + "\n", """          softmax(j, alpha);
          unsigned next_p[BLOCK_N / 16][4];
          evo::wgmma_attention_pack<BLOCK_N, Elem>(s, next_p);
          evo::wgmma_fence_registers(next_p);
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          evo::wgmma_fence_registers(p);
          release(smem.v_empty(stage_of(j - 1)), lane);
          if (!RESCALE_UNDER_QK) rescale(alpha);
#pragma unroll
          for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
#pragma unroll
            for (int r = 0; r < 4; ++r) p[kk][r] = next_p[kk][r];
          }
""")
# d: P in two register buffers, alternating, so that the next P is packed while the last P V still
# reads the other; the wait for a P V moves to the next turn, after the next Q K^T's issue (before
# the rescale). Needs RESCALE_UNDER_QK=1.
if "d" in variant:
    copy.replace_span("        for (int j = 1; j < num_kv_tiles; ++j) {",
                      "        release(smem.v_empty(stage_of(last)), lane);\n", """        // P_j lives in buffer j % 2 (p, other_p).
        const auto step = [&](int j, unsigned(&p_prev)[BLOCK_N / 16][4],
                              unsigned(&p_new)[BLOCK_N / 16][4]) {
          wait_keys(j);
          wait_values(j - 1);
          turns.wait();
          issue_scores(stage_of(j));
          evo::wgmma_wait<1>();  // P V_{j-2} done: O may be rescaled, P_{j-2}'s buffer reused
          evo::wgmma_fence_registers(acc);
          if (j >= 2) release(smem.v_empty(stage_of(j - 2)), lane);
          rescale(alpha);
          evo::wgmma_fence_registers(acc);
          evo::wgmma_fence_registers(p_prev);
          evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, Elem>(acc, p_prev, smem.v(stage_of(j - 1)));
          turns.pass();
          evo::wgmma_wait<1>();
          evo::wgmma_fence_registers(s);
          release(smem.k_empty(stage_of(j)), lane);
          if (j == num_kv_tiles - 1) release(smem.q_empty(), lane);
          softmax(j, alpha);
          evo::wgmma_fence_registers(p_new);
          evo::wgmma_attention_pack<BLOCK_N, Elem>(s, p_new);
        };
        const auto finish = [&](int last, unsigned(&p_last)[BLOCK_N / 16][4]) {
          wait_values(last);
          turns.wait();
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          if (last >= 1) release(smem.v_empty(stage_of(last - 1)), lane);
          rescale(alpha);
          evo::wgmma_fence_registers(acc);
          evo::wgmma_fence_registers(p_last);
          evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, Elem>(acc, p_last, smem.v(stage_of(last)));
          turns.pass();
          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          release(smem.v_empty(stage_of(last)), lane);
        };
        unsigned other_p[BLOCK_N / 16][4];
        for (int j = 1;; j += 2) {
          if (j >= num_kv_tiles) {
            finish(j - 1, p);
            break;
          }
          step(j, p, other_p);
          if (j + 1 >= num_kv_tiles) {
            finish(j, other_p);
            break;
          }
          step(j + 1, other_p, p);
        }
""")
if "n" in variant:
    patch("evo_trace[blockIdx.x][1 + consumer][piece_round][e] = clock64();", "(void)0;")
copy.write()

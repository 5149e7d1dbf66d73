#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) whose Q K^T takes Q from
registers (wgmma with A from registers, K by descriptor): each consumer loads its 64 rows of Q
once per tile (ldmatrix from the swizzled Q tile), so that each Q K^T reads only K from shared
memory (the ninth session's arithmetic: at the tensor pipe's peak, Q, K, V reads and the copies
into shared memory would take about 85 % of its bandwidth). Usage: q_regs_variant.py OUT KNOB=VALUE..."""
from template_copy import TemplateCopy, wgmma_forms

copy = TemplateCopy.from_argv()
patch = copy.patch
copy.before_namespace(wgmma_forms("qkrs", range(64, 257, 16), a_from_registers=True, transpose_b=False))
patch("""    const auto issue_scores = [&](int stage) {
      evo::wgmma_attention_scores<BLOCK_N, HEAD_DIM, kBlockM, Elem>(s, smem.q(), wg_row0,
                                                                    smem.k(stage));
    };""", """    unsigned qf[HEAD_DIM / 16][4];
    const auto load_q = [&] {
#pragma unroll
      for (int ks = 0; ks < HEAD_DIM / 16; ++ks) {
        const int m = lane >> 3;
        const int row = wg_row0 + warp * 16 + (m & 1) * 8 + (lane & 7);
        evo::ldmatrix_x4(qf[ks], smem.q() + (ks / 4) * kBlockM * 128 +
                                     evo::swizzle_128b(row, (ks % 4) * 2 + (m >> 1)));
      }
    };
    const auto issue_scores = [&](int stage) {
      evo::wgmma_fence_registers(qf);
      evo::wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < HEAD_DIM / 16; ++ks) {
        qkrs::Mma<BLOCK_N, IS_BF16 != 0>::run(
            s, qf[ks], evo::smem_desc_sw128(smem.k(stage) + (ks / 4) * BLOCK_N * 128 + (ks % 4) * 32, 16),
            ks > 0 ? 1 : 0);
      }
      evo::wgmma_commit();
    };""")
patch("""      if (!STREAM_K) evo::mbar_wait_sleep(smem.q_full(), round & 1);
      float alpha[2];""", """      if (!STREAM_K) evo::mbar_wait_sleep(smem.q_full(), round & 1);
      load_q();
      float alpha[2];""")
patch('#include "evo/mbarrier.cuh"\n', '#include "evo/mbarrier.cuh"\n#include "evo/mma_sync.cuh"\n')
copy.write()

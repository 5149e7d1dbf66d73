#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) whose Q K^T takes Q from
registers (wgmma with A from registers, K by descriptor): each consumer loads its 64 rows of Q
once per tile (ldmatrix from the swizzled Q tile), so that each Q K^T reads only K from shared
memory (the ninth session's arithmetic: at the tensor pipe's peak, Q, K, V reads and the copies
into shared memory would take about 85 % of its bandwidth). Usage: q_regs_variant.py OUT KNOB=VALUE..."""
import os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
out = sys.argv[1]
subprocess.run([sys.executable, os.path.join(here, "fixed_template.py")] + sys.argv[1:], check=True)
path = os.path.join(out, "sdpa_hopper", "sdpa_hopper.cu")
src = open(path).read()


def patch(anchor, new, count=1):
    global src
    assert src.count(anchor) == count, (src.count(anchor), anchor)
    src = src.replace(anchor, new)


# m64nNk16 with A from registers and B K-major by descriptor (not transposed).
qk = "namespace qkrs {\ntemplate <int N, bool Bf> struct Mma;\n"
for N in range(64, 257, 16):
    regs = N // 2
    lst = ", ".join(f"%{i}" for i in range(regs))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    for bf, ty in ((False, "f16"), (True, "bf16")):
        qk += f"""template <> struct Mma<{N}, {'true' if bf else 'false'}> {{
  static __device__ __forceinline__ void run(float (&d)[{regs}], const unsigned (&a)[4], unsigned long long b, int accumulate) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 5}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{ty}.{ty} {{{lst}}}, {{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, 1, 1, 0;\\n}}\\n"
                 : {cons}
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
  }}
}};
"""
qk += "}  // namespace qkrs\n"
patch("namespace hopper {\n", qk + "namespace hopper {\n")
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
open(path, "w").write(src)

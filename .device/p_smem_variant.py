#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) whose P V reads P from
shared memory (both wgmma operands by descriptor) instead of registers: each consumer warpgroup
packs its probabilities, and once its previous P V is done, stores them into a 128-byte swizzled
tile of its own (the layout of a Q tile of 64 rows). The packed registers are then no input of a
running wgmma, so ptxas has no reason to hoist the wait for P V above the softmax.
DOUBLE=1 (environment): two P tiles per warpgroup, tile j's P stored into tile j % 2 while
P_{j-1} V runs from the other, before the wait for it, so that no store waits for that P V.
Usage: [DOUBLE=1] p_smem_variant.py OUT KNOB=VALUE..."""
import os
from template_copy import SOFTMAX_WAIT_PACK, TemplateCopy, wgmma_forms

buffers = 2 if os.environ.get("DOUBLE", "0") == "1" else 1
copy = TemplateCopy.from_argv()
patch = copy.patch
# P V: A (P) and B (V, transposed) by descriptor, N = HEAD_DIM.
copy.before_namespace(wgmma_forms("pvss", (64, 128, 256), a_from_registers=False, transpose_b=True,
                                  always_accumulate=True))
patch("  kOTileBytes = TMA_STORE ? kBlockM * HEAD_DIM * 2 : 0,  // 64 rows per consumer, by column block\n",
      "  kOTileBytes = TMA_STORE ? kBlockM * HEAD_DIM * 2 : 0,  // 64 rows per consumer, by column block\n"
      "  kPTileBytes = (BLOCK_N + 63) / 64 * 64 * 128,  // a consumer's P: 64 rows, by column block\n"
      f"  kPBuffers = {buffers},  // P tiles per consumer\n")
patch("""  __device__ __forceinline__ unsigned bar(int i) const {
    return base + kQTileBytes + 2 * STAGES * kKVTileBytes + kOTileBytes + 8 * i;
  }""", """  __device__ __forceinline__ unsigned p(int tile) const {
    return base + kQTileBytes + 2 * STAGES * kKVTileBytes + kOTileBytes + tile * kPTileBytes;
  }
  __device__ __forceinline__ unsigned bar(int i) const {
    return base + kQTileBytes + 2 * STAGES * kKVTileBytes + kOTileBytes +
           kPBuffers * NUM_CONSUMERS * kPTileBytes + 8 * i;
  }""")
patch("""    const auto issue_values = [&](int stage) {
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, Elem>(acc, p, smem.v(stage));
    };""", """    // P tiles stored so far in this tile; P V reads the last one.
    int p_count = 0;
    const auto p_tile_of = [&](int n) { return smem.p(kPBuffers * consumer + n % kPBuffers); };
    const auto issue_values = [&](int stage) {
      const unsigned p_tile = p_tile_of(p_count - 1);
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
        pvss::Mma<HEAD_DIM, IS_BF16 != 0>::run(
            acc, evo::smem_desc_sw128(p_tile + (kk / 4) * 64 * 128 + (kk % 4) * 32, 16),
            evo::smem_desc_sw128(smem.v(stage) + kk * 16 * 128, BLOCK_N * 128));
      }
      evo::wgmma_commit();
    };
    // The packed P into the warpgroup's next P tile (once the P V that read it is done), visible
    // to the async proxy; the warpgroup's four warps meet before the next issue (the turn's
    // barrier with PINGPONG, otherwise one of their own).
    const auto store_probabilities = [&] {
      const unsigned p_tile = p_tile_of(p_count++);
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int df = 2 * kk + (r >> 1);
          const int row = warp * 16 + group + 8 * (r & 1);
          evo::st_shared_b32(p_tile + (df / 8) * 64 * 128 + evo::swizzle_128b(row, df % 8) + quad * 4,
                             p[kk][r]);
        }
      }
      evo::fence_proxy_async_shared();
      if (!PINGPONG) evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);
    };""")
# Tile 0 and the loop without overlap: pack and store at once.
patch("""        softmax(0, alpha);
        pack_probabilities();""", """        softmax(0, alpha);
        pack_probabilities();
        store_probabilities();""")
patch("""          rescale(alpha);
          pack_probabilities();
          wait_values(j);""", """          rescale(alpha);
          pack_probabilities();
          store_probabilities();
          wait_values(j);""")
# The overlapped loop: pack under P V, store after it (DOUBLE: before the wait, into the other tile).
store_before_wait = "          store_probabilities();\n" if buffers == 2 else ""
store_after_wait = "" if buffers == 2 else "\n          store_probabilities();"
patch(SOFTMAX_WAIT_PACK, f"""          softmax(j, alpha);
          pack_probabilities();
{store_before_wait}          evo::wgmma_wait<0>();
          evo::wgmma_fence_registers(acc);
          release(smem.v_empty(stage_of(j - 1)), lane);
          if (!RESCALE_UNDER_QK) rescale(alpha);{store_after_wait}""")
copy.write()
copy.derive("SMEM_BYTES",
            lambda e: f"({e}) + {buffers} * NUM_CONSUMERS * ceil_div(BLOCK_N, 64) * 64 * 128")

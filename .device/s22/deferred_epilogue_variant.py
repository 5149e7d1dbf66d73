#!/usr/bin/env python3
"""Issue 15 (twenty-second session): a copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE
fixed) whose persistent consumers issue the next tile's first Q K^T right after this tile's last
P V, and store this tile's O while that Q K^T runs; the next tile's softmax comes after the
store. The next tile's Q loads into a second Q buffer, which is the template's O tile: O is staged
in the rows of the Q buffer the warpgroup has just finished reading (its own 64 rows), so the
shared memory is the template's. The Q buffer is released to the producer once the O store has
read it, after the next tile's first KV tile. For PERSISTENT=1 STREAM_K=0 SPLITS=1 TMA_STORE=1
INTRA_OVERLAP=1 PINGPONG=1 PACK_GQA=0 KV_INTERLEAVE=0 only (static_assert). The tile's code is
written twice, once per Q buffer (de2.sh); the first build, which de.sh measured, had one copy with
`const int q_buffer = round & 1` and `const int next_buffer = (round + 1) & 1`.
Usage: deferred_epilogue_variant.py OUT KNOB=VALUE..."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from template_copy import TemplateCopy

copy = TemplateCopy.from_argv()
PEEL = os.environ.get("PEEL", "0")
patch = copy.patch
copy.before_namespace("#define PEEL_FIRST " + PEEL + "\n" + """static_assert(PERSISTENT && !STREAM_K && SPLITS == 1 && TMA_STORE && INTRA_OVERLAP &&
                  PINGPONG && !PACK_GQA && !KV_INTERLEAVE && !LAST_CTA_COMBINES,
              "the deferred-epilogue copy needs PERSISTENT, TMA_STORE, INTRA_OVERLAP, PINGPONG, "
              "one split, no STREAM_K, PACK_GQA or KV_INTERLEAVE");
""")
# Q buffer 1 is the O tile; its mbarriers after the K/V ones (STREAM_K's piece slots are unused).
patch("  __device__ __forceinline__ unsigned q() const { return base; }",
      "  __device__ __forceinline__ unsigned q() const { return base; }\n"
      "  __device__ __forceinline__ unsigned qb(int b) const { return b ? o(0) : base; }")
patch("  __device__ __forceinline__ unsigned q_full() const { return bar(0); }\n"
      "  __device__ __forceinline__ unsigned q_empty() const { return bar(1); }",
      "  __device__ __forceinline__ unsigned q_full(int b = 0) const { return b ? bar(2 + 4 * STAGES) : bar(0); }\n"
      "  __device__ __forceinline__ unsigned q_empty(int b = 0) const { return b ? bar(3 + 4 * STAGES) : bar(1); }")
patch("""    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);
    if (STREAM_K) publish_piece(smem.piece(round), piece);
    evo::mbar_arrive_expect_tx(smem.q_full(), kQTileBytes);
#pragma unroll
    for (int cb = 0; cb < kColumnBlocks; ++cb) {
      // With PACK_GQA the map's box spans the G heads of the KV head: G blocks of positions.
      evo::tma_load_4d(smem.q() + cb * kBlockM * 128, q_map, cb * 64, m_tile * rows.positions,
                       PACK_GQA ? slot * rows.group : slot, b, smem.q_full());
    }""", """    const int qb = round & 1;
    evo::mbar_wait_sleep(smem.q_empty(qb), ((round >> 1) & 1) ^ 1);
    evo::mbar_arrive_expect_tx(smem.q_full(qb), kQTileBytes);
#pragma unroll
    for (int cb = 0; cb < kColumnBlocks; ++cb) {
      evo::tma_load_4d(smem.qb(qb) + cb * kBlockM * 128, q_map, cb * 64, m_tile * rows.positions,
                       slot, b, smem.q_full(qb));
    }""")
patch("""    evo::mbar_init(smem.q_full(), 1);
    evo::mbar_init(smem.q_empty(), hopper::kConsumerWarps);""", """    for (int b = 0; b < 2; ++b) {
      evo::mbar_init(smem.q_full(b), 1);
      evo::mbar_init(smem.q_empty(b), hopper::kConsumerWarps);
    }""")

# The code of one tile, its Q buffer QB a constant: the consumer's loop holds it twice, once per
# buffer, so that every Q descriptor is built from a constant address.
TILE = r"""    Piece next_piece;
    const bool have_next = walk.next(next_piece);
    constexpr int q_buffer = QB;
    const int num_kv_tiles = piece.kv.count;

    const auto issue_scores = [&](int buffer, int stage) {
      evo::wgmma_attention_scores<BLOCK_N, HEAD_DIM, kBlockM, Elem>(s, smem.qb(buffer), wg_row0,
                                                                    smem.k(stage));
    };
    const auto issue_values = [&](int stage) {
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, Elem>(acc, p, smem.v(stage));
    };
    const auto softmax = [&](const Piece& pc, int j) {
      const int n_start = (pc.kv.first + j) * BLOCK_N;
      if (n_start + BLOCK_N > S_kv ||
          (IS_CAUSAL && n_start + BLOCK_N - 1 > pc.m_tile * kBlockM + wg_row0)) {
        evo::wgmma_attention_mask<BLOCK_N, IS_CAUSAL>(
            s, S_kv - n_start - quad * 2, pc.m_tile * kBlockM + tile_row - n_start - quad * 2);
      }
      evo::wgmma_attention_softmax<BLOCK_N, FAST_EXP>(s, row_max, row_sum, kSoftmaxScale, alpha);
    };
    const auto pack_probabilities = [&] { evo::wgmma_attention_pack<BLOCK_N, Elem>(s, p); };
    const auto rescale = [&] { evo::wgmma_attention_rescale<HEAD_DIM>(acc, alpha); };
    const auto stage_of = [&](int j) { return (kv_iter + j) % STAGES; };
    const auto full_parity = [&](int j) { return ((kv_iter + j) / STAGES) & 1; };
    const auto wait_keys = [&](int j) {
      evo::mbar_wait_sleep(smem.k_full(stage_of(j)), full_parity(j));
    };
    const auto wait_values = [&](int j) {
      evo::mbar_wait_sleep(smem.v_full(stage_of(j)), full_parity(j));
    };
    // O of this tile, normalized, into this warpgroup's own rows of its Q buffer (read to the end
    // by its Q K^T), and stored from there.
    const auto epilogue = [&] {
      const float inv[2] = {evo::wgmma_attention_normalizer(row_sum[0]),
                            evo::wgmma_attention_normalizer(row_sum[1])};
      const unsigned rows_at = smem.qb(q_buffer) + wg_row0 * 128;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp * 16 + group + 8 * h;
#pragma unroll
        for (int df = 0; df < HEAD_DIM / 8; ++df) {
          evo::st_shared_b32(
              rows_at + (df / 8) * kBlockM * 128 + evo::swizzle_128b(row, df % 8) + quad * 4,
              evo::wgmma_attention_output_pair<Elem, HEAD_DIM>(acc, inv[h], h, df));
        }
      }
      evo::fence_proxy_async_shared();
      evo::named_barrier_sync<128>(kEpilogueBarrier + consumer);
      if (tid % 128 == 0) {
        const int b = piece.bh / slots;
        const int slot = piece.bh % slots;
#pragma unroll
        for (int cb = 0; cb < kColumnBlocks; ++cb) {
          evo::tma_store_4d(o_map, rows_at + cb * kBlockM * 128, cb * 64,
                            rows.position(piece.m_tile, wg_row0), rows.head(slot, wg_row0), b);
        }
        evo::bulk_commit_group();
      }
      store_pending = q_buffer;
    };

#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.f;
    if (!carried) {
      evo::mbar_wait_sleep(smem.q_full(q_buffer), (round >> 1) & 1);
      wait_keys(0);
      turns.wait();
      issue_scores(q_buffer, stage_of(0));
      turns.pass();
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(s);
      release(smem.k_empty(stage_of(0)), lane);
      row_max[0] = row_max[1] = evo::neg_inf();
      row_sum[0] = row_sum[1] = 0.f;
      softmax(piece, 0);
      pack_probabilities();
    }
    // One KV tile of the loop. The first is peeled (PEEL=1) so that the release of the last
    // tile's Q buffer stays out of the loop.
    const auto kv_step = [&](int j) {
      wait_keys(j);
      wait_values(j - 1);
      turns.wait();
      issue_scores(q_buffer, stage_of(j));
      if (RESCALE_UNDER_QK) rescale();
      issue_values(stage_of(j - 1));
      turns.pass();
      evo::wgmma_wait<1>();
      evo::wgmma_fence_registers(s);
      release(smem.k_empty(stage_of(j)), lane);
      softmax(piece, j);
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      release(smem.v_empty(stage_of(j - 1)), lane);
      if (!RESCALE_UNDER_QK) rescale();
      pack_probabilities();
    };
    if (PEEL_FIRST) {
      if (num_kv_tiles > 1) kv_step(1);
      release_stored();
      for (int j = 2; j < num_kv_tiles; ++j) kv_step(j);
    } else {
      for (int j = 1; j < num_kv_tiles; ++j) {
        kv_step(j);
        if (j == 1) release_stored();
      }
      release_stored();
    }
    const int last = num_kv_tiles - 1;
    wait_values(last);
    carried = have_next;
    // Each path straight: ptxas serializes every wgmma where a conditional issue leaves it
    // unsure which scores are in flight.
    if (carried) {
      constexpr int next_buffer = 1 - q_buffer;
      evo::mbar_wait_sleep(smem.q_full(next_buffer), ((round + 1) >> 1) & 1);
      wait_keys(num_kv_tiles);
      turns.wait();
      rescale();
      issue_values(stage_of(last));
      issue_scores(next_buffer, stage_of(num_kv_tiles));
      turns.pass();
      evo::wgmma_wait<1>();
      evo::wgmma_fence_registers(acc);
      release(smem.v_empty(stage_of(last)), lane);
      epilogue();
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(s);
      release(smem.k_empty(stage_of(num_kv_tiles)), lane);
      row_max[0] = row_max[1] = evo::neg_inf();
      row_sum[0] = row_sum[1] = 0.f;
      softmax(next_piece, 0);
      pack_probabilities();
    } else {
      turns.wait();
      rescale();
      issue_values(stage_of(last));
      turns.pass();
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(acc);
      release(smem.v_empty(stage_of(last)), lane);
      epilogue();
    }
    kv_iter += num_kv_tiles;
    ++round;
    piece = next_piece;
    have = have_next;
"""

copy.replace_span("// A consumer warpgroup: 64 query rows of every tile of the CTA.\n",
                  "  if (PINGPONG && consumer == 0) evo::named_barrier_sync<kTurnThreads>(1);\n}\n", r"""
// Arrives `count` times at once (the warps of a warpgroup, for one thread that speaks for them).
__device__ __forceinline__ void mbar_arrive_count(unsigned bar, int count) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(count)
               : "memory");
}

// A consumer warpgroup: 64 query rows of every tile of the CTA.
__device__ __forceinline__ void consume(const Layout& smem, unsigned short* __restrict__ O,
                                        const evo::TensorMap& o_map, const Partials& partials,
                                        int B, int H, int H_kv, int S_q, int S_kv, int consumer) {
  (void)O;
  (void)partials;
  constexpr float kSoftmaxScale = evo::softmax_scale<HEAD_DIM, FAST_EXP>();
  const int tid = evo::thread_index() - 128;  // within the consumers
  const int warp = (tid / 32) % 4;            // within the warpgroup
  const int lane = tid % 32;
  const int group = lane >> 2;
  const int quad = lane & 3;
  const int wg_row0 = consumer * 64;
  const int tile_row = wg_row0 + warp * 16 + group;
  const Turns turns{consumer};
  if (consumer == NUM_CONSUMERS - 1) evo::named_barrier_arrive<kTurnThreads>(1);

  const Rows rows(H, H_kv);
  const int slots = H;
  const Scheduler scheduler(B, slots, S_q, rows.positions);
  Walk walk(scheduler, rows, S_q, S_kv, smem.walk_state(), false);
  int kv_iter = 0;
  int round = 0;
  float acc[HEAD_DIM / 2];
  float row_max[2] = {evo::neg_inf(), evo::neg_inf()};
  float row_sum[2] = {0.f, 0.f};
  float s[BLOCK_N / 2];
  unsigned p[BLOCK_N / 16][4];
  float alpha[2];
  // The Q buffer whose O store has not been waited for yet (-1: none).
  int store_pending = -1;
  const auto release_stored = [&] {
    if (store_pending >= 0) {
      if (tid % 128 == 0) {
        evo::bulk_wait_group_read<0>();
        mbar_arrive_count(smem.q_empty(store_pending), 4);
      }
      store_pending = -1;
    }
  };
  Piece piece;
  bool have = walk.next(piece);
  bool carried = false;
  // The tile's Q buffer a constant in each of two copies of the tile's code (SPECIALIZE): a
  // descriptor built from a buffer chosen at run time is work on the path of every issue.
  while (have) {
    {
""" + TILE.replace("QB", "0") + """    }
    if (!have) break;
    {
""" + TILE.replace("QB", "1") + r"""    }
  }
  // Shared memory must outlive the stores that read it.
  if (tid % 128 == 0) evo::bulk_wait_group<0>();
  // The last consumer's final pass has no turn after it: consumer 0 takes it, so that no named
  // barrier is left half-arrived when the CTA exits.
  if (PINGPONG && consumer == 0) evo::named_barrier_sync<kTurnThreads>(1);
}
""")
copy.write()


def two_more_barriers(expr):
    old = "8 * (2 + 4 * STAGES)"
    assert expr.count(old) == 1, expr
    return expr.replace(old, "8 * (4 + 4 * STAGES)")


copy.derive("SMEM_BYTES", two_more_barriers)

#!/usr/bin/env python3
"""A copy of sdpa_hopper (fixed_template.py's, knobs KNOB=VALUE fixed) whose persistent consumers
issue the next tile's first Q K^T beside this tile's last P V, run its softmax under that P V,
and only then store this tile's O: a tile's first Q K^T no longer runs alone. The next tile's Q
loads into a second Q tile. For PERSISTENT=1 STREAM_K=0 SPLITS=1 INTRA_OVERLAP=1
RESCALE_UNDER_QK=1 only (static_assert). Usage: tile_overlap_variant.py OUT KNOB=VALUE..."""
from template_copy import TemplateCopy

copy = TemplateCopy.from_argv()
patch = copy.patch
copy.before_namespace("""static_assert(PERSISTENT && !STREAM_K && SPLITS == 1 && INTRA_OVERLAP && RESCALE_UNDER_QK,
              "the tile-overlap copy needs PERSISTENT, one split, INTRA_OVERLAP, RESCALE_UNDER_QK");
""")
# Two Q tiles; their mbarriers after the K/V ones (STREAM_K's piece slots are unused).
patch("  __device__ __forceinline__ unsigned q() const { return base; }",
      "  __device__ __forceinline__ unsigned q(int buffer) const { return base + buffer * kQTileBytes; }")
patch("base + kQTileBytes +", "base + 2 * kQTileBytes +", count=4)
patch("  __device__ __forceinline__ unsigned q_full() const { return bar(0); }\n"
      "  __device__ __forceinline__ unsigned q_empty() const { return bar(1); }",
      "  __device__ __forceinline__ unsigned q_full(int b) const { return b ? bar(2 + 4 * STAGES) : bar(0); }\n"
      "  __device__ __forceinline__ unsigned q_empty(int b) const { return b ? bar(3 + 4 * STAGES) : bar(1); }")
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
      evo::tma_load_4d(smem.q(qb) + cb * kBlockM * 128, q_map, cb * 64, m_tile * rows.positions,
                       PACK_GQA ? slot * rows.group : slot, b, smem.q_full(qb));
    }""")
patch("""  if (STREAM_K) {
    // The end, published like a piece: the consumers wait for the next Q as usual.
    evo::mbar_wait_sleep(smem.q_empty(), (round & 1) ^ 1);
    publish_end(smem.piece(round));
    evo::mbar_arrive(smem.q_full());
  }""", "")
patch("""    evo::mbar_init(smem.q_full(), 1);
    evo::mbar_init(smem.q_empty(), hopper::kConsumerWarps);""", """    for (int b = 0; b < 2; ++b) {
      evo::mbar_init(smem.q_full(b), 1);
      evo::mbar_init(smem.q_empty(b), hopper::kConsumerWarps);
    }""")

# The consumer's walk, from its first tile to the end of its main loop.
copy.replace_span("  int kv_iter = 0;\n  int round = 0;\n  for (;;) {\n    // Without STREAM_K each consumer",
                  "      kv_iter += num_kv_tiles;\n      ++round;\n    }\n", r"""  int kv_iter = 0;
  int round = 0;
  float acc[HEAD_DIM / 2];
  float row_max[2] = {evo::neg_inf(), evo::neg_inf()};
  float row_sum[2] = {0.f, 0.f};
  float s[BLOCK_N / 2];
  unsigned p[BLOCK_N / 16][4];
  float alpha[2];
  // This tile's first Q K^T was issued beside the last tile's last P V, its softmax run and its
  // P packed.
  bool carried = false;
  Piece next_piece;
  bool have_next = walk.next(next_piece);
  for (;;) {
    if (!have_next) break;
    Piece piece = next_piece;
    have_next = walk.next(next_piece);
    const int piece_round = round;
    (void)piece_round;
    int bh = piece.bh;
    int m_tile = piece.m_tile;
    const int split = piece.split;
    const int item = piece.item;
    int m_start = m_tile * kBlockM;
    const int tile_row = wg_row0 + warp * 16 + group;  // the thread's rows: this and + 8
    const evo::SplitRange kv = piece.kv;
    const int num_kv_tiles = kv.count;
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.f;
    if (!carried) {
      row_max[0] = row_max[1] = evo::neg_inf();
      row_sum[0] = row_sum[1] = 0.f;
    }
    float out_sum[2];

    const auto issue_scores = [&](int q_buffer, int stage) {
      evo::wgmma_attention_scores<BLOCK_N, HEAD_DIM, kBlockM, Elem>(s, smem.q(q_buffer), wg_row0,
                                                                    smem.k(stage));
    };
    const auto issue_values = [&](int stage) {
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      evo::wgmma_attention_values<BLOCK_N, HEAD_DIM, Elem>(acc, p, smem.v(stage));
    };
    // Masks KV tile j of tile `pc` where it passes S_kv or, causal, the warpgroup's first row,
    // and runs the online softmax on it.
    const auto softmax = [&](const Piece& pc, int j) {
      const int n_start = (pc.kv.first + j) * BLOCK_N;
      if (PACK_GQA) {
        if (n_start + BLOCK_N > S_kv ||
            (IS_CAUSAL && n_start + BLOCK_N - 1 > pc.m_tile * rows.positions)) {
          const int cols_left = S_kv - n_start - quad * 2;
          const int ahead[2] = {rows.position(pc.m_tile, tile_row) - n_start - quad * 2,
                                rows.position(pc.m_tile, tile_row + 8) - n_start - quad * 2};
          evo::mask_scores<BLOCK_N / 8>([&](int nf, int e) -> float& { return s[4 * nf + e]; },
                                        [&](int nf, int e) {
                                          const int col = nf * 8 + (e & 1);
                                          return col >= cols_left ||
                                                 (IS_CAUSAL && col > ahead[e >> 1]);
                                        });
        }
      } else if (n_start + BLOCK_N > S_kv ||
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
    const int q_buffer = round & 1;
    if (!carried) {
      evo::mbar_wait_sleep(smem.q_full(q_buffer), (round >> 1) & 1);
      wait_keys(0);
      turns.wait();
      issue_scores(q_buffer, stage_of(0));
      turns.pass();
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(s);
      release(smem.k_empty(stage_of(0)), lane);
      if (num_kv_tiles == 1) release(smem.q_empty(q_buffer), lane);
      softmax(piece, 0);
      pack_probabilities();
    }
    for (int j = 1; j < num_kv_tiles; ++j) {
      wait_keys(j);
      wait_values(j - 1);
      turns.wait();
      issue_scores(q_buffer, stage_of(j));
      rescale();  // at j = 1 the accumulators are still 0
      issue_values(stage_of(j - 1));
      turns.pass();
      evo::wgmma_wait<1>();
      evo::wgmma_fence_registers(s);
      release(smem.k_empty(stage_of(j)), lane);
      if (j == num_kv_tiles - 1) release(smem.q_empty(q_buffer), lane);
      softmax(piece, j);
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      release(smem.v_empty(stage_of(j - 1)), lane);
      pack_probabilities();
    }
    const int last = num_kv_tiles - 1;
    wait_values(last);
    carried = have_next;
    // Each path straight: ptxas serializes every wgmma where a conditional issue leaves it
    // unsure which scores are in flight.
    if (carried) {
      const int next_buffer = (round + 1) & 1;
      evo::mbar_wait_sleep(smem.q_full(next_buffer), ((round + 1) >> 1) & 1);
      wait_keys(num_kv_tiles);
      turns.wait();
      issue_scores(next_buffer, stage_of(num_kv_tiles));
      rescale();
      issue_values(stage_of(last));
      turns.pass();
      evo::wgmma_wait<1>();
      evo::wgmma_fence_registers(s);
      release(smem.k_empty(stage_of(num_kv_tiles)), lane);
      if (next_piece.kv.count == 1) release(smem.q_empty(next_buffer), lane);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        out_sum[h] = row_sum[h];
        row_max[h] = evo::neg_inf();
        row_sum[h] = 0.f;
      }
      softmax(next_piece, 0);
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(acc);
      evo::wgmma_fence_registers(p);
      release(smem.v_empty(stage_of(last)), lane);
      pack_probabilities();
    } else {
      turns.wait();
      rescale();
      issue_values(stage_of(last));
      turns.pass();
      evo::wgmma_wait<0>();
      evo::wgmma_fence_registers(acc);
      release(smem.v_empty(stage_of(last)), lane);
      out_sum[0] = row_sum[0];
      out_sum[1] = row_sum[1];
    }
    kv_iter += num_kv_tiles;
    ++round;
""")
patch("""    const float inv[2] = {evo::wgmma_attention_normalizer(row_sum[0]),
                          evo::wgmma_attention_normalizer(row_sum[1])};""",
      """    const float inv[2] = {evo::wgmma_attention_normalizer(out_sum[0]),
                          evo::wgmma_attention_normalizer(out_sum[1])};""")
copy.write()
# Two Q tiles and their two mbarriers; no stream-K piece slots.
old = "(BLOCK_M * D * (1 + TMA_STORE) + STAGES * 2 * BLOCK_N * D) * 2 + 8 * (2 + 4 * STAGES) + (STREAM_K ? 96 : 0)"
new = "(BLOCK_M * D * (2 + TMA_STORE) + STAGES * 2 * BLOCK_N * D) * 2 + 8 * (4 + 4 * STAGES)"


def two_q_tiles(expr):
    assert expr == old, expr
    return new


copy.derive("SMEM_BYTES", two_q_tiles)

// Pieces of flash attention that do not depend on how the tensor cores are driven: the KV
// tiles a query tile visits and the mask of a tile's scores.
#pragma once

#include "evo/core.cuh"

namespace evo {

// KV tiles of BlockN keys that query tile m_tile (BlockM rows) reads. Causal masking is
// top-left aligned, as PyTorch's is_causal: the last valid row of the tile sees keys
// [0, last_row], and later KV tiles are skipped entirely.
template <int BlockM, int BlockN, bool Causal>
__device__ __forceinline__ int causal_kv_tiles(int m_tile, int S_q, int S_kv) {
  const int m_start = m_tile * BlockM;
  const int kv_end = Causal ? imin(S_kv, imin(m_start + BlockM, S_q)) : S_kv;
  return (kv_end + BlockN - 1) / BlockN;
}

// Sets to -inf the scores of one m16 row block that hidden(nf, e) says its row may not see.
// score(nf, e) is element e of the block's n8 fragment nf (the m16n8 accumulator layout): row
// 8 * (e >> 1) and column 8 * nf + (e & 1) relative to this thread's first element.
template <int NumFrags, class Score, class Hidden>
__device__ __forceinline__ void mask_scores(Score score, Hidden hidden) {
#pragma unroll
  for (int nf = 0; nf < NumFrags; ++nf) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (hidden(nf, e)) score(nf, e) = neg_inf();
    }
  }
}

// Columns at or past S_kv and, when Causal, columns past the row, as two per-thread bounds
// against compile-time offsets instead of a row and a column per element: cols_left = S_kv -
// (the thread's first column), diagonal = (the thread's first row) - (its first column).
template <bool Causal>
struct OutOfBoundsOrFuture {
  int cols_left;
  int diagonal;
  __device__ __forceinline__ bool operator()(int nf, int e) const {
    const int col_offset = nf * 8 + (e & 1);
    const int row_offset = (e >> 1) << 3;
    return col_offset >= cols_left || (Causal && col_offset - row_offset > diagonal);
  }
};

}  // namespace evo

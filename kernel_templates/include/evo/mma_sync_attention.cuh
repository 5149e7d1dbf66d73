// Flash attention on mma.sync (sm_80+), one warp's share of a tile: fp16 Q, K and V tiles in
// XOR-swizzled shared memory read by ldmatrix, S = Q K^T and O += P V on m16n8k16 MMAs with fp32
// accumulators, P kept in registers, and the output written through shared memory in whole
// 16-byte chunks (to evenly spaced rows, or to rows given one by one), or as a split-KV partial
// in fp32 straight from the accumulators. A warp owns MFrags m16 blocks of query rows; S has
// BlockN / 8 n8 fragments per block and O has HeadDim / 8.
#pragma once

#include "evo/core.cuh"
#include "evo/cp_async.cuh"
#include "evo/half_types.cuh"
#include "evo/mma_sync.cuh"
#include "evo/online_softmax.cuh"

namespace evo {

// The tiling of an mma.sync attention kernel: NumWarps warps share BlockM query rows, each
// whole m16 blocks, against KV tiles of BlockN keys (whole k16 steps of P V), HeadDim columns
// (rows of 8k 16-byte chunks, as the XOR swizzle needs).
template <int BlockM, int BlockN, int NumWarps, int HeadDim>
struct WarpTiling {
  static_assert(NumWarps >= 1 && NumWarps <= 32, "NUM_WARPS must be in [1, 32]");
  static_assert(BlockM > 0 && BlockM % (16 * NumWarps) == 0,
                "BLOCK_M / NUM_WARPS (query rows per warp) must be a positive multiple of 16");
  static_assert(BlockN > 0 && BlockN % 16 == 0, "BLOCK_N must be a positive multiple of 16");
  static_assert(HeadDim > 0 && HeadDim % 64 == 0 && HeadDim <= 256,
                "HEAD_DIM must be 64, 128, 192 or 256");
  // An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
  enum : int {
    kWarpRows = BlockM / NumWarps,
    kMFrags = kWarpRows / 16,  // m16 blocks per warp
    kNFrags = BlockN / 8,      // n8 fragments of S per KV tile
    kDFrags = HeadDim / 8,     // n8 fragments of O
  };

  // Whether a KV tile starting at key n_start holds a key that some row of the warp, whose
  // first row is warp_first_row, may see under causal masking (warp-uniform: ldmatrix and mma
  // need the whole warp).
  static __device__ __forceinline__ bool warp_sees(int n_start, int warp_first_row) {
    return n_start <= warp_first_row + kWarpRows - 1;
  }
};

// Byte offset of 16-byte chunk c of row r in a [rows][HeadDim] fp16 tile. XOR-ing the chunk
// with (r & 7) puts the 8 rows read by one ldmatrix 8x8 matrix on 8 distinct bank groups.
template <int HeadDim>
__device__ __forceinline__ unsigned swizzle(int r, int c) {
  return static_cast<unsigned>((r * HeadDim + ((c ^ (r & 7)) << 3)) * 2);
}

// Copies rows [row0, row0 + Rows) of a [num_rows][HeadDim] fp16 matrix into a tile in the
// layout of swizzle<HeadDim> (what cp_async.cuh's load_rows_async does with that offset), with
// few registers when each of the Loaders threads issues many copies (one or two warps loading a
// whole K/V tile). A thread keeps one 16-byte column c of rows r0, r0 + RowStep, ...
// (RowStep = Loaders / chunks per row, r0 < RowStep, both powers of two), so row r0 + s has
// (r & 7) = (r0 & 7) ^ (s & 7), and its chunk sits at swizzle(r0, c) ^ ((s & 7) << 4), plus s
// rows: at most 8 distinct lane offsets, the rest immediates. Rows past num_rows are zero-filled
// from a valid address.
template <int Rows, int HeadDim, int Loaders>
__device__ __forceinline__ void load_swizzled_rows_async(unsigned smem_tile,
                                                         const unsigned short* __restrict__ src,
                                                         int row0, int num_rows, int tid) {
  constexpr int kChunksPerRow = HeadDim / 8;
  static_assert(Loaders % kChunksPerRow == 0, "every loader keeps one column of 16 bytes");
  constexpr int kRowStep = Loaders / kChunksPerRow;
  static_assert((kRowStep & (kRowStep - 1)) == 0, "Loaders / (HeadDim / 8) must be a power of 2");
  const int c = tid % kChunksPerRow;
  const int r0 = tid / kChunksPerRow;
  const unsigned lane_offset = swizzle<HeadDim>(r0, c);
  const int rows_left = num_rows - row0 - r0;  // this thread's rows s < rows_left exist
  const unsigned short* lane_src = src + static_cast<long long>(row0 + r0) * HeadDim + c * 8;
#pragma unroll
  for (int s = 0; s < Rows; s += kRowStep) {
    if (Rows % kRowStep == 0 || r0 + s < Rows) {
      const bool valid = s < rows_left;
      const unsigned dst = smem_tile + ((lane_offset ^ ((s & 7) << 4)) + s * HeadDim * 2);
      cp_async_16(dst, valid ? lane_src + s * HeadDim : src, valid ? 16 : 0);
    }
  }
}

// The row and 16-byte chunk (within a k16 step) that a lane addresses for ldmatrix.x4; lane l
// addresses a row of matrix l / 8.
struct LdmatrixLane {
  int row;
  int chunk;
};
// A operand (Q, a 16-row block): matrices {rows 0-7, k 0-7}, {rows 8-15, k 0-7},
// {rows 0-7, k 8-15}, {rows 8-15, k 8-15} = a0..a3.
__device__ __forceinline__ LdmatrixLane a_operand_lane(int lane) { return {lane & 15, lane >> 4}; }
// B operand stored as its columns' rows (K in Q K^T): {keys 0-7, d 0-7}, {keys 0-7, d 8-15},
// {keys 8-15, d 0-7}, {keys 8-15, d 8-15} = b0, b1 of n8 tile 0, b0, b1 of n8 tile 1.
__device__ __forceinline__ LdmatrixLane b_operand_lane(int lane) {
  return {(lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1};
}
// B operand stored as its rows, transposed on load (V in P V): {keys 0-7, d 0-7},
// {keys 8-15, d 0-7}, {keys 0-7, d 8-15}, {keys 8-15, d 8-15} = b0, b1 of d tile 0, b0, b1 of
// d tile 1.
__device__ __forceinline__ LdmatrixLane b_transposed_lane(int lane) {
  return {(lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4};
}

// The lane's ldmatrix rows and chunks for the three operand patterns of attention.
struct AttentionLanes {
  LdmatrixLane q;  // A of Q K^T
  LdmatrixLane k;  // B of Q K^T
  LdmatrixLane v;  // B of P V, transposed
};
__device__ __forceinline__ AttentionLanes attention_lanes(int lane) {
  return {a_operand_lane(lane), b_operand_lane(lane), b_transposed_lane(lane)};
}

template <int MFrags, int NumFrags>
__device__ __forceinline__ void zero_fragments(float (&f)[MFrags][NumFrags][4]) {
#pragma unroll
  for (int mf = 0; mf < MFrags; ++mf) {
#pragma unroll
    for (int nf = 0; nf < NumFrags; ++nf) {
#pragma unroll
      for (int e = 0; e < 4; ++e) f[mf][nf][e] = 0.f;
    }
  }
}

// A warp's state of the online softmax before its first KV tile: O = 0, row maxima -inf (no
// score seen), row sums 0.
template <int MFrags, int DFrags>
__device__ __forceinline__ void start_rows(float (&acc)[MFrags][DFrags][4],
                                           float (&row_max)[MFrags][2],
                                           float (&row_sum)[MFrags][2]) {
  zero_fragments(acc);
#pragma unroll
  for (int mf = 0; mf < MFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[mf][h] = neg_inf();
      row_sum[mf][h] = 0.f;
    }
  }
}

// Multiplies row half h of an m16 block's O accumulators by alpha.
template <int DFrags>
__device__ __forceinline__ void rescale_rows(float (&acc)[DFrags][4], int h, float alpha) {
#pragma unroll
  for (int df = 0; df < DFrags; ++df) {
    acc[df][2 * h] *= alpha;
    acc[df][2 * h + 1] *= alpha;
  }
}

// d += a * b on m16n8k16 with Elem's operands (evo/half_types.cuh: Fp16, Bf16).
template <class Elem>
__device__ __forceinline__ void mma_16816_of(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                             unsigned b1);
template <>
__device__ __forceinline__ void mma_16816_of<Fp16>(float (&d)[4], const unsigned (&a)[4],
                                                   unsigned b0, unsigned b1) {
  mma_16816(d, a, b0, b1);
}
template <>
__device__ __forceinline__ void mma_16816_of<Bf16>(float (&d)[4], const unsigned (&a)[4],
                                                   unsigned b0, unsigned b1) {
  mma_16816_bf16(d, a, b0, b1);
}

// s = Q K^T for the warp's rows against the BlockN keys of a K tile, on Elem's operands.
// q_address(mf, kd) and k_address(np, kd) are the lane's ldmatrix addresses of m16 block mf, of
// keys [16 np, 16 np + 16), at k16 step kd: the template's choice of layout and of how to compute
// them.
template <int MFrags, int BlockN, int HeadDim, class Elem = Fp16, class QAddress, class KAddress>
__device__ __forceinline__ void warp_scores(float (&s)[MFrags][BlockN / 8][4], QAddress q_address,
                                            KAddress k_address) {
  zero_fragments(s);
#pragma unroll
  for (int kd = 0; kd < HeadDim / 16; ++kd) {
    unsigned qa[MFrags][4];
#pragma unroll
    for (int mf = 0; mf < MFrags; ++mf) ldmatrix_x4(qa[mf], q_address(mf, kd));
#pragma unroll
    for (int np = 0; np < BlockN / 16; ++np) {
      unsigned kb[4];
      ldmatrix_x4(kb, k_address(np, kd));
#pragma unroll
      for (int mf = 0; mf < MFrags; ++mf) {
        mma_16816_of<Elem>(s[mf][2 * np], qa[mf], kb[0], kb[1]);
        mma_16816_of<Elem>(s[mf][2 * np + 1], qa[mf], kb[2], kb[3]);
      }
    }
  }
}

// The accumulator fragments of n8 tiles 2kk and 2kk+1 are exactly the A fragment (rows g / g+8,
// k pairs 2q and 2q+8) of k16 step kk: P never leaves registers, it is only packed to fp16.
template <int MFrags, int NumFrags>
__device__ __forceinline__ void pack_probabilities(const float (&s)[MFrags][NumFrags][4],
                                                   unsigned (&p)[MFrags][NumFrags / 2][4], int kk) {
#pragma unroll
  for (int mf = 0; mf < MFrags; ++mf) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float(&f)[4] = s[mf][2 * kk + half];
      p[mf][kk][2 * half] = pack_half2(f[0], f[1]);
      p[mf][kk][2 * half + 1] = pack_half2(f[2], f[3]);
    }
  }
}

// acc += P V for the warp's rows and the BlockN keys of a V tile. pack(kk) runs before k16 step
// kk uses p[.][kk] (pack_probabilities there, or nothing when P was packed during the softmax);
// v_address(kk, dp) is the lane's ldmatrix.trans address of keys [16 kk, 16 kk + 16) and
// columns [16 dp, 16 dp + 16).
template <int MFrags, int BlockN, int HeadDim, class Pack, class VAddress>
__device__ __forceinline__ void warp_accumulate_pv(float (&acc)[MFrags][HeadDim / 8][4],
                                                   unsigned (&p)[MFrags][BlockN / 16][4], Pack pack,
                                                   VAddress v_address) {
#pragma unroll
  for (int kk = 0; kk < BlockN / 16; ++kk) {
    pack(kk);
#pragma unroll
    for (int dp = 0; dp < HeadDim / 16; ++dp) {
      unsigned vb[4];
      ldmatrix_x4_trans(vb, v_address(kk, dp));
#pragma unroll
      for (int mf = 0; mf < MFrags; ++mf) {
        mma_16816(acc[mf][2 * dp], p[mf][kk], vb[0], vb[1]);
        mma_16816(acc[mf][2 * dp + 1], p[mf][kk], vb[2], vb[3]);
      }
    }
  }
}

// O = numerator * acc / l for the warp's rows (l the row sums, summed over the quad here),
// staged as fp16 in the warp's own rows of a swizzled [rows][HeadDim] tile at stage_smem (read
// by no other warp): the first half of each store below.
template <int MFrags, int HeadDim>
__device__ __forceinline__ void warp_stage_output(const float (&acc)[MFrags][HeadDim / 8][4],
                                                  const float (&row_sum)[MFrags][2],
                                                  float numerator, unsigned stage_smem,
                                                  int warp_row0, int group, int quad) {
  float inv_sum[MFrags][2];
#pragma unroll
  for (int mf = 0; mf < MFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(row_sum[mf][h]);
      inv_sum[mf][h] = l > 0.f ? numerator / l : 0.f;
    }
  }
  __syncwarp();
#pragma unroll
  for (int mf = 0; mf < MFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp_row0 + mf * 16 + group + h * 8;
#pragma unroll
      for (int df = 0; df < HeadDim / 8; ++df) {
        const unsigned v = pack_half2(acc[mf][df][2 * h] * inv_sum[mf][h],
                                      acc[mf][df][2 * h + 1] * inv_sum[mf][h]);
        st_shared_b32(stage_smem + swizzle<HeadDim>(r, df) + quad * 4, v);
      }
    }
  }
  __syncwarp();
}

// Epilogue of one warp: O = numerator * acc / l for its rows (l the row sums, summed over the
// quad here), staged in the warp's own rows of a swizzled [rows][HeadDim] fp16 tile at
// stage_smem (read by no other warp), then written to o_head ([S_q][HeadDim] fp16) in whole
// 16-byte chunks. Rows at or past S_q are not written. group and quad are the lane's fragment
// row and column pair (lane >> 2, lane & 3), passed in because the caller keeps them anyway:
// recomputed here, they change ptxas's register allocation of the whole kernel.
template <int MFrags, int HeadDim>
__device__ __forceinline__ void warp_store_output(const float (&acc)[MFrags][HeadDim / 8][4],
                                                  const float (&row_sum)[MFrags][2],
                                                  float numerator, unsigned stage_smem,
                                                  unsigned short* o_head, int warp_row0,
                                                  int m_start, int S_q, int lane, int group,
                                                  int quad) {
  constexpr int kWarpRows = MFrags * 16;
  constexpr int kChunksPerRow = HeadDim / 8;
  warp_stage_output<MFrags, HeadDim>(acc, row_sum, numerator, stage_smem, warp_row0, group, quad);
  constexpr int kWarpChunks = kWarpRows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kWarpChunks / 32; ++i) {
    const int idx = i * 32 + lane;
    const int r = warp_row0 + idx / kChunksPerRow;
    const int c = idx % kChunksPerRow;
    const int row = m_start + r;
    if (row < S_q) {
      unsigned v[4];
      ld_shared_v4(v, stage_smem + swizzle<HeadDim>(r, c));
      st_global_v4(o_head + static_cast<long long>(row) * HeadDim + c * 8, v);
    }
  }
}

// warp_store_output for rows that are not evenly spaced in memory (query rows of several heads
// packed into one tile): row_dst(r) is the address of tile row r's output row ([HeadDim] fp16),
// or nullptr for a row not to write.
template <int MFrags, int HeadDim, class RowDestination>
__device__ __forceinline__ void warp_store_output_rows(const float (&acc)[MFrags][HeadDim / 8][4],
                                                       const float (&row_sum)[MFrags][2],
                                                       float numerator, unsigned stage_smem,
                                                       int warp_row0, int lane, int group, int quad,
                                                       RowDestination row_dst) {
  constexpr int kChunksPerRow = HeadDim / 8;
  warp_stage_output<MFrags, HeadDim>(acc, row_sum, numerator, stage_smem, warp_row0, group, quad);
  constexpr int kWarpChunks = MFrags * 16 * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kWarpChunks / 32; ++i) {
    const int idx = i * 32 + lane;
    const int r = warp_row0 + idx / kChunksPerRow;
    const int c = idx % kChunksPerRow;
    unsigned short* row = row_dst(r);
    if (row != nullptr) {
      unsigned v[4];
      ld_shared_v4(v, stage_smem + swizzle<HeadDim>(r, c));
      st_global_v4(row + c * 8, v);
    }
  }
}

// Epilogue of one warp of a split-KV kernel (evo/split_kv.cuh): each row's partial output
// acc / l in fp32, straight from the accumulators (a quad writes 32 contiguous bytes per n8
// fragment), l being the row's softmax denominator summed over the quad. row_dst(r) is the
// address of tile row r's partial row ([HeadDim] fp32), or nullptr for a row not to write; for
// each row written, lane 0 of its quad calls row_done(r, row_max, l) (the caller stores the
// row's log-sum-exp). A row that saw no key (l = 0) gets zeros.
template <int MFrags, int HeadDim, class RowDestination, class RowDone>
__device__ __forceinline__ void warp_store_partial(const float (&acc)[MFrags][HeadDim / 8][4],
                                                   const float (&row_max)[MFrags][2],
                                                   const float (&row_sum)[MFrags][2], int warp_row0,
                                                   int group, int quad, RowDestination row_dst,
                                                   RowDone row_done) {
#pragma unroll
  for (int mf = 0; mf < MFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(row_sum[mf][h]);  // the whole warp shuffles, before any branch
      const int r = warp_row0 + mf * 16 + group + h * 8;
      float* row = row_dst(r);
      if (row != nullptr) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
        for (int df = 0; df < HeadDim / 8; ++df) {
          const float x = acc[mf][df][2 * h] * inv;
          const float y = acc[mf][df][2 * h + 1] * inv;
          asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(row + df * 8 + quad * 2), "f"(x),
                       "f"(y)
                       : "memory");
        }
        if (quad == 0) row_done(r, row_max[mf][h], l);
      }
    }
  }
}

}  // namespace evo

// Fused RMSNorm forward: y = x / sqrt(mean(x^2) + eps) * weight for each row of x [rows, cols],
// with weight [cols]; x, weight and y in fp16, or in bf16 with IS_BF16; fp32 arithmetic; eps =
// 1 / eps_inv, a run-time argument. One read of x and one write of y is all the traffic a call
// needs (the weight stays in L2), so the kernel is bound by memory bandwidth and the knobs are
// about how the rows are spread and read:
// - ROW_THREADS threads share a row (fewer than 32: several rows per warp, reduced by shuffles;
//   more: several warps, reduced through shared memory) and ROWS_PER_CTA rows share a CTA;
// - VEC elements per access (16 bytes at 8), where every row and the weight are aligned to it
//   (cols a multiple of VEC, pointers aligned); otherwise the row is read element by element;
// - CHUNKS accesses per thread are kept in registers between the sum of squares and the
//   scaling, so those columns are read from memory once; columns past them are read again for
//   the scaling (from L1 or L2 where they are still there). CHUNKS = 0 re-reads the whole row;
// - PERSISTENT: one CTA per SM slot loops over the row groups; CACHE_WEIGHT then keeps the
//   weight of the kept chunks in registers across the CTA's rows;
// - STREAMING: the kept chunks of x are loaded, and y is stored, with cache-streaming hints
//   (evict first), so that data used once does not push the weight and the re-read columns out.
//
// Knobs and the problem define IS_BF16 are prepended by evo. The row reduction and the packed
// vector accesses come from evo's device library (include/evo).

#if !defined(ROW_THREADS) || !defined(ROWS_PER_CTA) || !defined(VEC) || !defined(CHUNKS) || \
    !defined(PERSISTENT) || !defined(CACHE_WEIGHT) || !defined(STREAMING) || !defined(IS_BF16)
#error "rmsnorm.cu needs its knobs and problem defines, which evo prepends"
#endif

#include "evo/core.cuh"
#include "evo/dtype.cuh"
#include "evo/half_types.cuh"
#include "evo/half_vector.cuh"
#include "evo/row_reduce.cuh"

EVO_ASSERT_FLAGS(PERSISTENT, CACHE_WEIGHT, STREAMING, IS_BF16);
static_assert(CHUNKS >= 0 && CHUNKS <= 32, "CHUNKS must be in [0, 32]");
static_assert((ROW_THREADS * ROWS_PER_CTA) % 32 == 0 && ROW_THREADS * ROWS_PER_CTA <= 1024,
              "a CTA is 32 to 1024 threads, whole warps");

namespace rmsnorm {

// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = ROW_THREADS * ROWS_PER_CTA,
  kDtype = IS_BF16 ? EVO_DTYPE_BF16 : EVO_DTYPE_F16,
};

#if IS_BF16
typedef evo::Bf16 Elem;
#else
typedef evo::Fp16 Elem;
#endif

typedef evo::RowReduce<ROW_THREADS, ROWS_PER_CTA> Reduce;

template <int V>
__device__ __forceinline__ float sum_of_squares(const evo::HalfVector<V>& v) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const float e = v.template get<kDtype>(i);
    s = fmaf(e, e, s);
  }
  return s;
}

// x * r * weight, elementwise, rounded to the output type.
template <int V>
__device__ __forceinline__ evo::HalfVector<V> scaled(const evo::HalfVector<V>& x, float r,
                                                     const evo::HalfVector<V>& weight) {
  evo::HalfVector<V> y;
#pragma unroll
  for (int i = 0; i < V; i += 2) {
    const float lo = x.template get<kDtype>(i) * r * weight.template get<kDtype>(i);
    const float hi =
        V > 1 ? x.template get<kDtype>(i + 1) * r * weight.template get<kDtype>(i + 1) : 0.f;
    y.template set_pair<Elem>(i, lo, hi);
  }
  return y;
}

// The CTA's rows with accesses of V elements, Chunks of them per thread kept in registers: VEC
// and CHUNKS where every row is aligned to VEC * 2 bytes, else 1 and 0 (rows that are not
// aligned are rare enough not to cost the registers of a second copy of the kept row). Chunk c
// of a row is its columns [c * kChunk, (c + 1) * kChunk); thread `lane` of the row accesses V of
// them at c * kChunk + lane * V, so a warp reads contiguous bytes.
template <int V, int Chunks>
__device__ __forceinline__ void normalize_rows(const unsigned short* __restrict__ x,
                                               const unsigned short* __restrict__ weight,
                                               unsigned short* __restrict__ y, int rows, int cols,
                                               float eps, Reduce::Storage& reduce_storage) {
  constexpr int kChunk = ROW_THREADS * V;
  constexpr int kKept = Chunks > 0 ? Chunks : 1;  // array extents: zero-length arrays are not C++
  constexpr int kKeptWeight = CACHE_WEIGHT ? kKept : 1;
  const int t = evo::thread_index();
  const int lane = t % ROW_THREADS;
  const int row_in_group = t / ROW_THREADS;
  const int groups = (rows + ROWS_PER_CTA - 1) / ROWS_PER_CTA;

  // A persistent CTA's threads see the same columns in every row, so their weight can stay.
  evo::HalfVector<V> kept_weight[kKeptWeight];
  if constexpr (CACHE_WEIGHT != 0) {
#pragma unroll
    for (int c = 0; c < Chunks; ++c) {
      const int col = c * kChunk + lane * V;
      if (col < cols) kept_weight[c].template load<false>(weight + col);
    }
  }

  int parity = 0;
  for (int group = blockIdx.x; group < groups;
       group += PERSISTENT ? static_cast<int>(gridDim.x) : groups) {
    const int row = group * ROWS_PER_CTA + row_in_group;
    // Threads of rows past the end still take part in the reduction's barrier.
    const bool active = row < rows;
    const long long offset = static_cast<long long>(row) * cols;
    const unsigned short* x_row = x + offset;
    unsigned short* y_row = y + offset;

    evo::HalfVector<V> kept[kKept];
    float squares = 0.f;
#pragma unroll
    for (int c = 0; c < Chunks; ++c) {
      const int col = c * kChunk + lane * V;
      if (active && col < cols) {
        kept[c].template load<STREAMING>(x_row + col);
        squares += sum_of_squares(kept[c]);
      }
    }
    // Columns past the kept chunks: read here for the sum and again below for the output.
#pragma unroll 4
    for (int col = Chunks * kChunk + lane * V; active && col < cols; col += kChunk) {
      evo::HalfVector<V> v;
      v.template load<false>(x_row + col);
      squares += sum_of_squares(v);
    }
    squares = Reduce::sum(squares, reduce_storage, parity);
    parity ^= 1;
    const float r = rsqrtf(squares / static_cast<float>(cols) + eps);

#pragma unroll
    for (int c = 0; c < Chunks; ++c) {
      const int col = c * kChunk + lane * V;
      if (active && col < cols) {
        evo::HalfVector<V> w;
        if constexpr (CACHE_WEIGHT != 0) {
          w = kept_weight[c];
        } else {
          w.template load<false>(weight + col);
        }
        scaled(kept[c], r, w).template store<STREAMING>(y_row + col);
      }
    }
#pragma unroll 4
    for (int col = Chunks * kChunk + lane * V; active && col < cols; col += kChunk) {
      evo::HalfVector<V> v;
      evo::HalfVector<V> w;
      v.template load<false>(x_row + col);
      w.template load<false>(weight + col);
      scaled(v, r, w).template store<STREAMING>(y_row + col);
    }
  }
}

}  // namespace rmsnorm

// The 1 (CTAs per SM) matters: with the thread count alone ptxas aimed at fewer registers than
// the kept row needs and spilled (48 registers and 8 bytes of spills where 64 fit).
extern "C" __global__ void __launch_bounds__(rmsnorm::kThreads, 1)
    rmsnorm_fwd(const unsigned short* __restrict__ x, const unsigned short* __restrict__ weight,
                unsigned short* __restrict__ y, int rows, int cols, float eps_inv) {
  __shared__ rmsnorm::Reduce::Storage reduce_storage;
  const float eps = 1.f / eps_inv;
  // Vector accesses need every row start aligned: cols a multiple of VEC and aligned pointers
  // (a caller's tensor may be a view that starts anywhere).
  const unsigned long long addresses = reinterpret_cast<unsigned long long>(x) |
                                       reinterpret_cast<unsigned long long>(weight) |
                                       reinterpret_cast<unsigned long long>(y);
  if (VEC == 1 || (cols % VEC == 0 && addresses % (2 * VEC) == 0)) {
    rmsnorm::normalize_rows<VEC, CHUNKS>(x, weight, y, rows, cols, eps, reduce_storage);
  } else {
    rmsnorm::normalize_rows<1, 0>(x, weight, y, rows, cols, eps, reduce_storage);
  }
}

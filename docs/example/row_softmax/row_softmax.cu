// Row softmax, the worked example of docs/templates.md: y[r, c] = exp(x[r, c] - m_r) / s_r for
// x, y fp16 [rows, cols], with m_r the row's maximum and s_r its sum of exponentials. Three
// passes over the row (maximum, sum, output), each thread taking every ROW_THREADS-th column.
//
// evo prepends the knobs as #defines (ROW_THREADS, ROWS_PER_CTA, FAST_EXP); rows and cols are
// kernel arguments, so one compile serves every problem size.

#if !defined(ROW_THREADS) || !defined(ROWS_PER_CTA) || !defined(FAST_EXP)
#error "row_softmax.cu needs its knobs, which evo prepends"
#endif

#include "evo/core.cuh"        // half_to_float, pack_half2, exp2_approx, neg_inf
#include "evo/row_reduce.cuh"  // RowReduce: the maximum and the sum over a row's threads

typedef evo::RowReduce<ROW_THREADS, ROWS_PER_CTA> Reduce;
// An enum rather than a constexpr variable: NVRTC would emit that as an unused .global symbol.
enum : int { kThreads = ROW_THREADS * ROWS_PER_CTA };

__device__ __forceinline__ float exp_of(float v) {
#if FAST_EXP
  return evo::exp2_approx(v * 1.4426950408889634f);  // ex2.approx: exp(v) = 2^(v * log2(e))
#else
  return expf(v);
#endif
}

extern "C" __global__ void __launch_bounds__(kThreads, 1)
    row_softmax(const unsigned short* __restrict__ x, unsigned short* __restrict__ y, int rows,
                int cols) {
  __shared__ Reduce::Storage storage;
  const int lane = threadIdx.x % ROW_THREADS;
  const int row = blockIdx.x * ROWS_PER_CTA + threadIdx.x / ROW_THREADS;
  // Threads of a row past the end still take part in the reductions (they hold a barrier).
  const bool active = row < rows;
  const unsigned short* x_row = x + static_cast<long long>(row) * cols;
  unsigned short* y_row = y + static_cast<long long>(row) * cols;

  float m = evo::neg_inf();
  for (int c = lane; active && c < cols; c += ROW_THREADS) {
    m = fmaxf(m, evo::half_to_float(x_row[c]));
  }
  m = Reduce::max(m, storage, 0);
  float s = 0.f;
  for (int c = lane; active && c < cols; c += ROW_THREADS) {
    s += exp_of(evo::half_to_float(x_row[c]) - m);
  }
  s = Reduce::sum(s, storage, 1);  // the other buffer: no barrier needed between the two
  const float inv = 1.f / s;
  for (int c = lane; active && c < cols; c += ROW_THREADS) {
    const float p = exp_of(evo::half_to_float(x_row[c]) - m) * inv;
    y_row[c] = static_cast<unsigned short>(evo::pack_half2(p, 0.f));  // p in the lower half
  }
}

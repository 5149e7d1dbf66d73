// The FP32 reference of row_softmax: one thread per row, plain loops and expf, so that it is
// easy to trust; it runs once per check problem and seed, so its speed matters little.

#include "evo/core.cuh"  // half_to_float

extern "C" __global__ void softmax_reference(const unsigned short* __restrict__ x,
                                             float* __restrict__ y, int rows, int cols) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const unsigned short* x_row = x + static_cast<long long>(row) * cols;
  float* y_row = y + static_cast<long long>(row) * cols;
  float m = evo::half_to_float(x_row[0]);
  for (int c = 1; c < cols; ++c) m = fmaxf(m, evo::half_to_float(x_row[c]));
  float s = 0.f;
  for (int c = 0; c < cols; ++c) s += expf(evo::half_to_float(x_row[c]) - m);
  for (int c = 0; c < cols; ++c) y_row[c] = expf(evo::half_to_float(x_row[c]) - m) / s;
}

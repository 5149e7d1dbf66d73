// The FP32 reference of RMSNorm, shared by every RMSNorm template: y = x / sqrt(mean(x^2) + eps)
// * weight for each row of x [rows, cols], weight [cols], eps = 1 / eps_inv. Deliberately naive
// (a plain tree in shared memory, accurate division and square root) so that it is easy to
// trust; speed does not matter. Launch: grid (rows), kThreads threads, no dynamic shared memory.
//
// The dtypes are parameters: the manifest's reference arguments define REF_X and REF_W as their
// dtypes (evo/dtype.cuh) and REF_Y, which must be f32.

#include "evo/core.cuh"
#include "evo/dtype.cuh"

#if !defined(REF_X) || !defined(REF_W) || !defined(REF_Y)
#error "rmsnorm_reference.cu needs arguments x, weight and y with defines REF_X, REF_W, REF_Y"
#endif
static_assert(REF_Y == EVO_DTYPE_F32, "the reference writes an f32 output");

namespace rmsnorm_reference {

enum : int { kThreads = 256 };  // the manifest's block; a power of two

typedef evo::Dtype<REF_X> XType;
typedef evo::Dtype<REF_W> WType;

}  // namespace rmsnorm_reference

extern "C" __global__ void __launch_bounds__(rmsnorm_reference::kThreads)
    rmsnorm_reference_f32(const rmsnorm_reference::XType::Storage* __restrict__ x,
                          const rmsnorm_reference::WType::Storage* __restrict__ weight,
                          float* __restrict__ y, int rows, int cols, float eps_inv) {
  using rmsnorm_reference::WType;
  using rmsnorm_reference::XType;
  __shared__ float sums[rmsnorm_reference::kThreads];
  const int row = blockIdx.x;
  if (row >= rows || blockDim.x != rmsnorm_reference::kThreads) return;
  const XType::Storage* x_row = x + static_cast<long long>(row) * cols;
  float* y_row = y + static_cast<long long>(row) * cols;

  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = XType::to_float(x_row[c]);
    sum += v * v;
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = rmsnorm_reference::kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  const float eps = 1.f / eps_inv;
  const float r = 1.f / sqrtf(sums[0] / static_cast<float>(cols) + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    y_row[c] = XType::to_float(x_row[c]) * r * WType::to_float(weight[c]);
  }
}

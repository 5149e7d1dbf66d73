// Two kernels of one call sharing scratch sized by the device (tests/data/sm_scratch/manifest.json),
// and their reference: Partial has a row per CTA of the first kernel's grid, plus row 0, so a
// gate that sized it for fewer multiprocessors than the grid saw is caught by its guard zone.

extern "C" __global__ void sm_partial(const float* x, float* partial, int n) {
  __shared__ float sums[128];
  const int chunks = (n + 255) / 256;
  float mine = 0;  // thread 0's: the sum of this CTA's chunks
  int count = 0;
  for (int c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int end = min(c * 256 + 256, n);
    float sum = 0;
    for (int i = c * 256 + threadIdx.x; i < end; i += blockDim.x) sum += x[i];
    sums[threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (unsigned t = 0; t < blockDim.x; ++t) mine += sums[t];
      ++count;
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  partial[2 * (1 + blockIdx.x)] = mine;
  partial[2 * (1 + blockIdx.x) + 1] = (float)count;
  if (blockIdx.x == 0) {
    partial[0] = (float)gridDim.x;
    partial[1] = 0;
  }
}

extern "C" __global__ void sm_finish(const float* x, const float* partial, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int rows = (int)partial[0];
  float sum = 0;
  for (int r = 1; r <= rows; ++r) sum += partial[2 * r] + partial[2 * r + 1];
  y[i] = x[i] + sum;
}

extern "C" __global__ void sm_reference(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += x[j];
  y[i] = x[i] + (float)sum + (float)((n + 255) / 256);
}

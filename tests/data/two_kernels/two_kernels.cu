// Two kernels of one call sharing scratch (tests/data/two_kernels/manifest.json), and their
// reference in the same file: nothing here reads the knob THREADS, which the reference's
// instantiation does not define. The tests break copies of this file by replacing the marked
// lines.

extern "C" __global__ void two_partial(const float* x, float* partial, float* total, int* tickets,
                                       int n) {
  __shared__ float sums[128];  // THREADS <= 128
  const int start = blockIdx.x * 256;
  const int end = min(start + 256, n);
  float sum = 0;
  for (int i = start + threadIdx.x; i < end; i += blockDim.x) sum += x[i];
  sums[threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.x != 0) return;
  float chunk = 0;
  for (unsigned t = 0; t < blockDim.x; ++t) chunk += sums[t];
  partial[blockIdx.x] = chunk;  // the partial store
  atomicAdd(total, 1.0f);
  // The last chunk to take a ticket hands the counter back zeroed, for the next call.
  __threadfence();
  const int ticket = atomicAdd(tickets, 1);
  if (ticket == (int)gridDim.x - 1) *tickets = 0;  // the reset
}

extern "C" __global__ void two_finish(const float* x, const float* partial, const float* total,
                                      float* y, int n, int chunks) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float sum = 0;
  for (int c = 0; c < chunks; ++c) sum += partial[c];
  y[i] = x[i] + sum + *total;
}

extern "C" __global__ void two_reference(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += x[j];
  y[i] = x[i] + (float)sum + (float)((n + 255) / 256);
}

// Reductions over the threads of one row, for kernels whose CTA holds kRows rows of kRowThreads
// consecutive threads each (thread t works on row t / kRowThreads): row-wise norms and softmaxes.
// Up to 32 threads a row is reduced by shuffles alone (a row of fewer threads shares its warp
// with other rows; the xor offsets stay below kRowThreads, so inside its own group); a wider row
// adds one step through shared memory and one __syncthreads, which every thread of the CTA must
// reach, active row or not.
#pragma once

namespace evo {

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <int kRowThreads, int kRows>
struct RowReduce {
  static_assert(kRowThreads >= 1 && (kRowThreads & (kRowThreads - 1)) == 0,
                "a row's threads must be a power of two");
  static_assert(kRowThreads <= 32 || kRowThreads % 32 == 0, "a wide row is whole warps");
  enum : int { kWarps = kRowThreads > 32 ? kRowThreads / 32 : 1 };

  // The cross-warp partials of wide rows, twice: consecutive reductions alternate between the
  // two (the caller flips `parity`), so each needs one barrier. A thread can only write a buffer
  // again after the barrier of the reduction in between, which every thread reaches only after
  // it has read that buffer.
  struct Storage {
    float partial[2][kRows][kWarps];
  };

  // The reduction of `value` over the row's threads, returned to each of them.
  template <class Op>
  static __device__ __forceinline__ float reduce(float value, Storage& storage, int parity, Op op) {
#pragma unroll
    for (int offset = (kRowThreads < 32 ? kRowThreads : 32) / 2; offset > 0; offset /= 2) {
      value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
    }
    if (kRowThreads <= 32) return value;
    const int t = threadIdx.x;
    const int row = t / kRowThreads;
    float* partial = storage.partial[parity][row];
    if (t % 32 == 0) partial[(t % kRowThreads) / 32] = value;
    __syncthreads();
    value = partial[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) value = op(value, partial[w]);
    return value;
  }

  static __device__ __forceinline__ float sum(float value, Storage& storage, int parity) {
    return reduce(value, storage, parity, SumOp());
  }
  static __device__ __forceinline__ float max(float value, Storage& storage, int parity) {
    return reduce(value, storage, parity, MaxOp());
  }
};

}  // namespace evo

// FP32 reference for sdpa_fp16: O = softmax(Q K^T / sqrt(D)) V, one CTA per (query row, head,
// batch). Deliberately naive (plain loops, accurate expf, no tensor cores) so that it is easy to
// trust; speed does not matter. Launch: grid (S_q, H, B), 128 threads, S_kv * 4 bytes of dynamic
// shared memory. Only HEAD_DIM and IS_CAUSAL are defined by evo.

#if !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "reference.cu needs HEAD_DIM and IS_CAUSAL defined"
#endif
static_assert(HEAD_DIM > 0, "HEAD_DIM must be positive");
static_assert(IS_CAUSAL == 0 || IS_CAUSAL == 1, "IS_CAUSAL must be 0 or 1");

namespace sdpa_ref {

// ---- PTX wrappers ----

__device__ __forceinline__ float half_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
  return f;
}

// ---- end of PTX wrappers ----

// Reduction over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result.
template <bool kMax>
__device__ float block_reduce(float v, float* partial) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  const int warp = threadIdx.x / 32;
  const int num_warps = blockDim.x / 32;
  if (threadIdx.x % 32 == 0) partial[warp] = v;
  __syncthreads();
  float r = partial[0];
  for (int w = 1; w < num_warps; ++w) r = kMax ? fmaxf(r, partial[w]) : r + partial[w];
  __syncthreads();  // partial is reused by the next reduction
  return r;
}

}  // namespace sdpa_ref

extern "C" __global__ void sdpa_reference_f32(const unsigned short* __restrict__ Q,
                                              const unsigned short* __restrict__ K,
                                              const unsigned short* __restrict__ V,
                                              float* __restrict__ O, int B, int H, int S_q,
                                              int S_kv) {
  extern __shared__ float scores[];  // S_kv entries
  __shared__ float partial[32];

  const int i = blockIdx.x;  // query row
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  if (i >= S_q || h >= H || b >= B) return;
  const long long bh = static_cast<long long>(b) * H + h;
  const unsigned short* q = Q + (bh * S_q + i) * HEAD_DIM;
  const unsigned short* k = K + bh * S_kv * HEAD_DIM;
  const unsigned short* v = V + bh * S_kv * HEAD_DIM;
  float* o = O + (bh * S_q + i) * HEAD_DIM;
  const float scale = 1.0f / sqrtf(static_cast<float>(HEAD_DIM));
  const float neg_inf = __int_as_float(0xff800000);

  float local_max = neg_inf;
  for (int j = threadIdx.x; j < S_kv; j += blockDim.x) {
    float s = neg_inf;
    if (!IS_CAUSAL || j <= i) {  // causal is top-left aligned, as PyTorch's is_causal
      float dot = 0.f;
      for (int d = 0; d < HEAD_DIM; ++d) {
        dot += sdpa_ref::half_to_float(q[d]) *
               sdpa_ref::half_to_float(k[static_cast<long long>(j) * HEAD_DIM + d]);
      }
      s = scale * dot;
    }
    scores[j] = s;
    local_max = fmaxf(local_max, s);
  }
  // Key 0 is visible to every row, so the maximum is finite.
  const float row_max = sdpa_ref::block_reduce<true>(local_max, partial);

  float local_sum = 0.f;
  for (int j = threadIdx.x; j < S_kv; j += blockDim.x) {
    const float p = expf(scores[j] - row_max);
    scores[j] = p;
    local_sum += p;
  }
  // The reduction's barrier also publishes every thread's p_j in scores.
  const float row_sum = sdpa_ref::block_reduce<false>(local_sum, partial);

  for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < S_kv; ++j) {
      acc += scores[j] * sdpa_ref::half_to_float(v[static_cast<long long>(j) * HEAD_DIM + d]);
    }
    o[d] = acc / row_sum;
  }
}

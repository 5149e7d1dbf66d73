// FP32 reference for sdpa_fp8: O = softmax(Q K^T / sqrt(D)) V with K = K8 * K_scale[b, h] and
// V = V8 * V_scale[b, h] (and, when Q_FP8, Q = Q8 * Q_scale[b, h]) dequantized from the very
// bytes the candidate reads, one CTA per (query row, head, batch). Deliberately naive (plain
// loops, accurate expf, no tensor cores) so that it is easy to trust; speed does not matter.
// Launch: grid (S_q, H, B), 128 threads, S_kv * 4 bytes of dynamic shared memory. Only the
// problem's defines (HEAD_DIM, IS_CAUSAL, Q_FP8) are set by evo.

#if !defined(HEAD_DIM) || !defined(IS_CAUSAL) || !defined(Q_FP8)
#error "reference.cu needs HEAD_DIM, IS_CAUSAL and Q_FP8 defined"
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

// The low byte of `pair` as e4m3, exactly (every e4m3 value is an fp16 value). Needs sm_89.
__device__ __forceinline__ float e4m3_to_float(unsigned char byte) {
  unsigned halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(halves) : "h"(static_cast<unsigned short>(byte)));
  return half_to_float(static_cast<unsigned short>(halves & 0xffffu));
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

#if Q_FP8
extern "C" __global__ void sdpa_fp8_reference_f32(
    const unsigned char* __restrict__ Q, const float* __restrict__ Q_scale,
    const unsigned char* __restrict__ K8,
#else
extern "C" __global__ void sdpa_fp8_reference_f32(
    const unsigned short* __restrict__ Q, const unsigned char* __restrict__ K8,
#endif
    const unsigned char* __restrict__ V8, const float* __restrict__ K_scale,
    const float* __restrict__ V_scale, float* __restrict__ O, int B, int H, int S_q, int S_kv) {
  extern __shared__ float scores[];  // S_kv entries
  __shared__ float partial[32];

  const int i = blockIdx.x;  // query row
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  if (i >= S_q || h >= H || b >= B) return;
  const long long bh = static_cast<long long>(b) * H + h;
#if Q_FP8
  const unsigned char* q = Q + (bh * S_q + i) * HEAD_DIM;
  const float q_scale = Q_scale[bh];
#else
  const unsigned short* q = Q + (bh * S_q + i) * HEAD_DIM;
#endif
  const unsigned char* k = K8 + bh * S_kv * HEAD_DIM;
  const unsigned char* v = V8 + bh * S_kv * HEAD_DIM;
  const float k_scale = K_scale[bh];
  const float v_scale = V_scale[bh];
  float* o = O + (bh * S_q + i) * HEAD_DIM;
  const float scale = 1.0f / sqrtf(static_cast<float>(HEAD_DIM));
  const float neg_inf = __int_as_float(0xff800000);

  float local_max = neg_inf;
  for (int j = threadIdx.x; j < S_kv; j += blockDim.x) {
    float s = neg_inf;
    if (!IS_CAUSAL || j <= i) {  // causal is top-left aligned, as PyTorch's is_causal
      float dot = 0.f;
      for (int d = 0; d < HEAD_DIM; ++d) {
#if Q_FP8
        const float q_d = sdpa_ref::e4m3_to_float(q[d]) * q_scale;
#else
        const float q_d = sdpa_ref::half_to_float(q[d]);
#endif
        dot +=
            q_d * (sdpa_ref::e4m3_to_float(k[static_cast<long long>(j) * HEAD_DIM + d]) * k_scale);
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
      acc += scores[j] *
             (sdpa_ref::e4m3_to_float(v[static_cast<long long>(j) * HEAD_DIM + d]) * v_scale);
    }
    o[d] = acc / row_sum;
  }
}

// The FP32 reference of attention, shared by every attention template: O = softmax(scale Q K^T) V
// per (batch, query head) with scale = 1/sqrt(D), causal (top-left aligned, as PyTorch's
// is_causal) or not. Deliberately naive (plain loops, accurate expf, no tensor cores) so that it
// is easy to trust; speed does not matter. Launch: grid (S_q, H, B), 128 threads (a multiple of
// 32, at most 1024), no dynamic shared memory (manifests written for the earlier version, which
// kept every score of a row in S_kv * 4 bytes of it, still work where that much can be had).
// Two passes over the keys, so that any S_kv fits: the row's maximum score first, then the
// probabilities of kScoreChunk keys at a time, weighed into the output.
//
// What differs between templates is a parameter:
// - dtypes: the manifest's reference arguments define REF_Q, REF_K, REF_V (and REF_O, which must
//   be f32) as their dtypes (evo/dtype.cuh);
// - dequantization scales: REF_Q_SCALE, REF_K_SCALE, REF_V_SCALE, defined by f32 arguments of
//   one scale per (batch, head) when the template has them; each then follows its tensor in the
//   signature and multiplies its elements;
// - layout: every tensor's element strides of batch, head and row (the head dimension is
//   contiguous), so [B, H, S, D] and [B, S, H, D] alike;
// - grouped heads: query head h reads K and V head h / (H / H_kv).
// HEAD_DIM and IS_CAUSAL are the problem's defines.

#include "evo/core.cuh"
#include "evo/dtype.cuh"

#if !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "attention_reference.cu needs HEAD_DIM and IS_CAUSAL defined"
#endif
#if !defined(REF_Q) || !defined(REF_K) || !defined(REF_V) || !defined(REF_O)
#error \
    "attention_reference.cu needs arguments Q, K, V and O with defines REF_Q, REF_K, REF_V, REF_O"
#endif
static_assert(HEAD_DIM > 0, "HEAD_DIM must be positive");
static_assert(IS_CAUSAL == 0 || IS_CAUSAL == 1, "IS_CAUSAL must be 0 or 1");
static_assert(REF_O == EVO_DTYPE_F32, "the reference writes an f32 output");

namespace attention_reference {

// Keys whose probabilities are in shared memory at once.
constexpr int kScoreChunk = 2048;

typedef evo::Dtype<REF_Q> QType;
typedef evo::Dtype<REF_K> KType;
typedef evo::Dtype<REF_V> VType;

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

}  // namespace attention_reference

extern "C" __global__ void attention_reference_f32(
    const attention_reference::QType::Storage* __restrict__ Q,
#ifdef REF_Q_SCALE
    const float* __restrict__ Q_scale,
#endif
    const attention_reference::KType::Storage* __restrict__ K,
#ifdef REF_K_SCALE
    const float* __restrict__ K_scale,
#endif
    const attention_reference::VType::Storage* __restrict__ V,
#ifdef REF_V_SCALE
    const float* __restrict__ V_scale,
#endif
    float* __restrict__ O, int B, int H, int H_kv, int S_q, int S_kv, long long q_stride_b,
    long long q_stride_h, long long q_stride_s, long long k_stride_b, long long k_stride_h,
    long long k_stride_s, long long v_stride_b, long long v_stride_h, long long v_stride_s,
    long long o_stride_b, long long o_stride_h, long long o_stride_s) {
  using attention_reference::KType;
  using attention_reference::QType;
  using attention_reference::VType;
  __shared__ float scores[attention_reference::kScoreChunk];
  __shared__ float partial[32];

  const int i = blockIdx.x;  // query row
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  if (i >= S_q || h >= H || b >= B || H_kv < 1 || H % H_kv != 0) return;
  const int h_kv = h / (H / H_kv);
  const QType::Storage* q = Q + b * q_stride_b + h * q_stride_h + i * q_stride_s;
  const KType::Storage* k = K + b * k_stride_b + h_kv * k_stride_h;
  const VType::Storage* v = V + b * v_stride_b + h_kv * v_stride_h;
  float* o = O + b * o_stride_b + h * o_stride_h + i * o_stride_s;
#ifdef REF_Q_SCALE
  const float q_scale = Q_scale[b * H + h];
#else
  const float q_scale = 1.f;
#endif
#ifdef REF_K_SCALE
  const float k_scale = K_scale[b * H_kv + h_kv];
#else
  const float k_scale = 1.f;
#endif
#ifdef REF_V_SCALE
  const float v_scale = V_scale[b * H_kv + h_kv];
#else
  const float v_scale = 1.f;
#endif
  const float scale = 1.0f / sqrtf(static_cast<float>(HEAD_DIM));

  // The scaled score of key j, -inf where the causal mask hides it.
  auto score = [&](int j) {
    if (IS_CAUSAL && j > i) return evo::neg_inf();
    float dot = 0.f;
    for (int d = 0; d < HEAD_DIM; ++d) {
      dot += (QType::to_float(q[d]) * q_scale) * (KType::to_float(k[j * k_stride_s + d]) * k_scale);
    }
    return scale * dot;
  };

  float local_max = evo::neg_inf();
  for (int j = threadIdx.x; j < S_kv; j += blockDim.x) local_max = fmaxf(local_max, score(j));
  // Key 0 is visible to every row, so the maximum is finite.
  const float row_max = attention_reference::block_reduce<true>(local_max, partial);

  // Thread t accumulates the output columns t, t + blockDim.x, ... (blockDim.x >= 32).
  constexpr int kColumnsPerThread = (HEAD_DIM + 31) / 32;
  float acc[kColumnsPerThread];
  for (int c = 0; c < kColumnsPerThread; ++c) acc[c] = 0.f;
  float local_sum = 0.f;
  for (int chunk = 0; chunk < S_kv; chunk += attention_reference::kScoreChunk) {
    const int keys = min(attention_reference::kScoreChunk, S_kv - chunk);
    for (int j = threadIdx.x; j < keys; j += blockDim.x) {
      const float p = expf(score(chunk + j) - row_max);
      scores[j] = p;
      local_sum += p;
    }
    __syncthreads();  // every p_j of the chunk is in scores
    for (int d = threadIdx.x, c = 0; d < HEAD_DIM; d += blockDim.x, ++c) {
      for (int j = 0; j < keys; ++j) {
        acc[c] += scores[j] * (VType::to_float(v[(chunk + j) * v_stride_s + d]) * v_scale);
      }
    }
    __syncthreads();  // the chunk is read before the next one overwrites it
  }
  const float row_sum = attention_reference::block_reduce<false>(local_sum, partial);
  for (int d = threadIdx.x, c = 0; d < HEAD_DIM; d += blockDim.x, ++c) o[d] = acc[c] / row_sum;
}

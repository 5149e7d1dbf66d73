// Issue 16: how close split-KV decode can come to the HBM rate at 1,32:8,1,32768,128. A kernel
// that only streams that shape's K and V (134 MB, bulk copies into a ring of 32 KB stages, no
// math) sets the floor per call in a CUDA graph of 20 calls; then the same stream followed by a
// combine kernel shaped like evo's (in stream order, and launched programmatically once every
// CTA has issued its last copy), with the combine done inside clusters of CTAs over
// distributed shared memory, and by the CTA of a KV head that arrives last (three ways of
// publishing the partials, and the partials' loads one after another or all at once), and by a
// designated CTA per KV head that merges the others' partials while it still streams. Build from
// the repository root: nvcc -O3 -std=c++17 -arch=sm_90a -I kernel_templates/include
// scripts/probes/decode_stream_ceiling.cu; PROBE_ALL=1 runs every case, PROBE_PDL=1 only the
// streams and combines launched programmatically (each call's stream too, its prologue under the
// previous call's combine), otherwise the 16-split references and the designated combiner.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

// evo's device library (kernel_templates/include): shared-memory addresses and mbarriers.
#include "evo/core.cuh"
#include "evo/mbarrier.cuh"
#include "evo/tma.cuh"

using evo::fence_mbarrier_init;
using evo::mbar_arrive_expect_tx;
using evo::mbar_init;
using evo::mbar_wait;
using evo::smem_u32;

constexpr int kHeads = 8, kKeys = 32768, kRowBytes = 256, kChunkKeys = 64;
constexpr int kChunkBytes = kChunkKeys * kRowBytes;  // 16 KB of K, 16 KB of V per stage

// A bulk copy of contiguous bytes (no tensor map), completing on `bar` by its byte count.
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes,
                                          unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}

// The stream of one CTA, split `split` of KV head `head`: its keys in chunks of 64, K and V of a
// chunk in one stage, thread 0 issuing and waiting; with pdl_at_end, the dependent grid may
// launch once the last copy is issued. Returns a value read from every chunk (thread 0).
__device__ float stream_range(const char* __restrict__ k, const char* __restrict__ v, int head,
                              int first, int last, int stages, int pdl_at_end) {
  extern __shared__ __align__(128) char smem[];
  __shared__ __align__(8) unsigned long long bars[8];
  float acc = 0;
  if (threadIdx.x != 0) return acc;
  for (int s = 0; s < stages; ++s) mbar_init(smem_u32(&bars[s]), 1);
  fence_mbarrier_init();
  // pdl_at_end bit 1: launched programmatically after the kernel before it, so the prologue above
  // ran under that kernel's tail; the loads wait for it to complete.
  if (pdl_at_end & 2) asm volatile("griddepcontrol.wait;" ::: "memory");
  const long head_off = static_cast<long>(head) * kKeys * kRowBytes;
  auto issue = [&](int c, int s) {
    const unsigned bar = smem_u32(&bars[s]);
    mbar_arrive_expect_tx(bar, 2 * kChunkBytes);
    const long off = head_off + static_cast<long>(c) * kChunkBytes;
    bulk_load(smem_u32(smem + s * 2 * kChunkBytes), k + off, kChunkBytes, bar);
    bulk_load(smem_u32(smem + s * 2 * kChunkBytes + kChunkBytes), v + off, kChunkBytes, bar);
  };
  for (int c = first; c < min(last, first + stages); ++c) issue(c, c - first);
  for (int c = first; c < last; ++c) {
    const int i = c - first, s = i % stages;
    mbar_wait(smem_u32(&bars[s]), (i / stages) & 1);
    acc += reinterpret_cast<const float*>(smem + s * 2 * kChunkBytes)[i & 63];
    if (c + stages < last) issue(c + stages, s);
    if ((pdl_at_end & 1) && c + stages == last)
      asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  if ((pdl_at_end & 1) && last - first <= stages)
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  return acc;
}

__device__ float stream_split(const char* __restrict__ k, const char* __restrict__ v, int head,
                              int split, int splits, int stages, int pdl_at_end) {
  const int chunks_total = kKeys / kChunkKeys;
  const int per = (chunks_total + splits - 1) / splits;
  const int first = split * per, last = min(chunks_total, first + per);
  return stream_range(k, v, head, first, last, stages, pdl_at_end);
}

// One CTA per (head, split).
__global__ void stream_kernel(const char* __restrict__ k, const char* __restrict__ v, float* out,
                              int splits, int stages, int pdl_at_end) {
  const float acc =
      stream_split(k, v, blockIdx.x / splits, blockIdx.x % splits, splits, stages, pdl_at_end);
  if (acc == 1234.5f) out[blockIdx.x] = acc;  // keeps the reads
}

__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ float ld_dsmem(unsigned local_addr, unsigned rank) {
  unsigned remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local_addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote));
  return v;
}
// The stream of stream_kernel by a cluster of `splits` CTAs (one KV head), then the combine of 4
// rows x 128 columns over distributed shared memory, each CTA combining 512 / splits of them.
__global__ void stream_cluster_kernel(const char* __restrict__ k, const char* __restrict__ v,
                                      float* out, int splits, int stages) {
  __shared__ float partial[4 * 128 + 4];
  const int head = blockIdx.x / splits;
  const float acc = stream_split(k, v, head, blockIdx.x % splits, splits, stages, 0);
  __syncthreads();
  for (int i = threadIdx.x; i < 4 * 128 + 4; i += blockDim.x) partial[i] = acc + i;
  cluster_sync_all();
  const unsigned rank = cluster_rank();
  const int columns = 512 / splits;  // this CTA's share of the 4 x 128 outputs
  if (threadIdx.x < columns) {
    const int e = rank * columns + threadIdx.x;
    const unsigned base = smem_u32(partial);
    float lse[16], o[16];
#pragma unroll
    for (int s = 0; s < 16; ++s) {
      if (s < splits) {
        lse[s] = ld_dsmem(base + 4 * (512 + e / 128), s);
        o[s] = ld_dsmem(base + 4 * e, s);
      }
    }
    float m = -1e30f;
#pragma unroll
    for (int s = 0; s < 16; ++s)
      if (s < splits) m = fmaxf(m, lse[s]);
    float acc_o = 0, wsum = 0;
#pragma unroll
    for (int s = 0; s < 16; ++s) {
      if (s < splits) {
        const float w = exp2f(lse[s] - m);
        wsum += w;
        acc_o = fmaf(w, o[s], acc_o);
      }
    }
    out[head * 512 + e] = acc_o / wsum;
  }
  cluster_sync_all();
}

// The stream of stream_kernel, then split-KV partials (4 rows x 128 floats and 4 LSEs per CTA)
// and a combine by the CTA of a KV head that arrives last, counted on a self-resetting counter.
// protocol 0 is evo's before this probe (every thread fences, the last CTA fences again);
// protocol 1 fences once per CTA, in thread 0 after the barrier, as cooperative groups' grid
// sync does; protocol 2 uses one acquire-release atomic instead of fence + atomic.
__global__ void stream_last_cta_kernel(const char* __restrict__ k, const char* __restrict__ v,
                                       float* partial, float* lse, int* counters,
                                       float* __restrict__ result, int splits, int stages,
                                       int protocol, int parallel_loads) {
  __shared__ int last_shared;
  const int head = blockIdx.x / splits, split = blockIdx.x % splits;
  const float acc = stream_split(k, v, head, split, splits, stages, 0);
  __syncthreads();
  const int tid = threadIdx.x;
  float* mine = partial + (static_cast<long>(split) * kHeads + head) * 512;
  reinterpret_cast<float4*>(mine)[tid] = make_float4(acc + tid, acc, acc, acc);
  if (tid < 4) lse[(split * kHeads + head) * 4 + tid] = acc + split;
  bool last = false;
  if (protocol == 0) {
    __threadfence();
    __syncthreads();
    if (tid == 0) last_shared = atomicAdd(&counters[head], 1) == splits - 1;
    __syncthreads();
    last = last_shared;
    if (last) {
      __threadfence();
      if (tid == 0) atomicExch(&counters[head], 0);
    }
  } else {
    __syncthreads();
    if (tid == 0) {
      int previous;
      if (protocol == 1) {
        __threadfence();
        previous = atomicAdd(&counters[head], 1);
        if (previous == splits - 1) __threadfence();
      } else {
        asm volatile("atom.add.acq_rel.gpu.s32 %0, [%1], 1;"
                     : "=r"(previous)
                     : "l"(&counters[head])
                     : "memory");
      }
      last_shared = previous == splits - 1;
      if (last_shared) atomicExch(&counters[head], 0);
    }
    __syncthreads();
    last = last_shared;
  }
  if (!last) return;
  const int row = tid / 32, lane = tid % 32;  // 4 warps, one row each
  const float l = lane < splits ? __ldcg(lse + (lane * kHeads + head) * 4 + row) : -1e30f;
  float m = l;
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float w = lane < splits ? exp2f(l - m) : 0.f;
  float wsum = w;
  for (int o = 16; o > 0; o /= 2) wsum += __shfl_xor_sync(0xffffffffu, wsum, o);
  float4 o4 = make_float4(0.f, 0.f, 0.f, 0.f);
  if (parallel_loads) {
    // Every split's partial in flight at once: a dependent chain of 16 or 32 L2 round trips is
    // what a combine loop costs otherwise.
    float4 x[32];
#pragma unroll
    for (int s = 0; s < 32; ++s)
      if (s < splits)
        x[s] = __ldcg(reinterpret_cast<const float4*>(
                          partial + (static_cast<long>(s) * kHeads + head) * 512 + row * 128) +
                      lane);
#pragma unroll
    for (int s = 0; s < 32; ++s) {
      if (s < splits) {
        const float ws = __shfl_sync(0xffffffffu, w, s);
        o4.x = fmaf(ws, x[s].x, o4.x);
        o4.y = fmaf(ws, x[s].y, o4.y);
        o4.z = fmaf(ws, x[s].z, o4.z);
        o4.w = fmaf(ws, x[s].w, o4.w);
      }
    }
  } else {
    for (int s = 0; s < splits; ++s) {
      const float ws = __shfl_sync(0xffffffffu, w, s);
      const float4 x =
          __ldcg(reinterpret_cast<const float4*>(
                     partial + (static_cast<long>(s) * kHeads + head) * 512 + row * 128) +
                 lane);
      o4.x = fmaf(ws, x.x, o4.x);
      o4.y = fmaf(ws, x.y, o4.y);
      o4.z = fmaf(ws, x.z, o4.z);
      o4.w = fmaf(ws, x.w, o4.w);
    }
  }
  const float inv = 1.f / wsum;
  reinterpret_cast<float4*>(result + head * 512 + row * 128)[lane] =
      make_float4(o4.x * inv, o4.y * inv, o4.z * inv, o4.w * inv);
}

// The chunks of split `split` when split 0 of each KV head, the combiner, takes (1 + extra)
// times a fair share so that it is likely the last to finish.
__device__ void designated_range(int split, int splits, float extra, int* first, int* last) {
  const int total = kKeys / kChunkKeys;
  const int mine0 = min(total, __float2int_rn(total * (1.f + extra) / (splits + extra)));
  if (split == 0) {
    *first = 0;
    *last = mine0;
    return;
  }
  const int rest = total - mine0, others = splits - 1, i = split - 1;
  const int base = rest / others, more = rest % others;
  *first = mine0 + i * base + min(i, more);
  *last = *first + base + (i < more ? 1 : 0);
}

// Split-KV with a designated combiner per KV head (split 0, given `extra` more keys): every
// other split writes its partial (4 rows x 128 floats, 4 LSEs) and raises a flag with release
// semantics; while split 0's thread 0 still streams, its warps 1 to 3 wait for those flags and
// merge the other partials into shared memory, so that once its own stream ends only the merge
// of two partials and the store of O remain. The combiner lowers the flags for the next call.
// poll 0 waits with acquire loads, 2 with relaxed ones and longer sleeps, 1 merges only after
// the combiner's own stream, and 3 merges nothing (the others still publish): what publishing
// alone costs.
__global__ void stream_designated_kernel(const char* __restrict__ k, const char* __restrict__ v,
                                         float* partial, float* lse, int* flags,
                                         float* __restrict__ result, int splits, int stages,
                                         float extra, int poll) {
  __shared__ float others_o[512];
  __shared__ float others_l[4];
  const int head = blockIdx.x / splits, split = blockIdx.x % splits;
  const int tid = threadIdx.x;
  int first, last;
  designated_range(split, splits, extra, &first, &last);
  if (split != 0) {
    const float acc = stream_range(k, v, head, first, last, stages, 0);
    __syncthreads();
    float* mine = partial + (static_cast<long>(split) * kHeads + head) * 512;
    reinterpret_cast<float4*>(mine)[tid] = make_float4(acc + tid, acc, acc, acc);
    if (tid < 4) lse[(split * kHeads + head) * 4 + tid] = acc + split;
    __syncthreads();
    if (tid == 0) {
      __threadfence();
      asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(flags + head * 64 + split), "r"(1)
                   : "memory");
    }
    return;
  }
  float acc = 0;
  if (poll == 3) {  // no combine at all: what publishing costs
    acc = stream_range(k, v, head, first, last, stages, 0);
    if (tid == 0) result[head] = acc;
    if (tid > 0 && tid < splits) flags[head * 64 + tid] = 0;
    return;
  }
  if (poll == 1) {  // the combine after the stream, by all threads
    acc = stream_range(k, v, head, first, last, stages, 0);
    __syncthreads();
  }
  if (tid < 32 && poll != 1) {
    acc = stream_range(k, v, head, first, last, stages, 0);
  } else if (tid >= 32) {
    // Warps 1 to 3: wait for every other split, then merge their partials.
    const int t = tid - 32;
    for (int s = 1 + t; s < splits; s += 96) {
      int f;
      do {
        if (poll == 2)
          asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];"
                       : "=r"(f)
                       : "l"(flags + head * 64 + s)
                       : "memory");
        else
          asm volatile("ld.acquire.gpu.global.s32 %0, [%1];"
                       : "=r"(f)
                       : "l"(flags + head * 64 + s)
                       : "memory");
        if (!f) __nanosleep(poll == 2 ? 500 : 64);
      } while (!f);
    }
    asm volatile("bar.sync 1, 96;" ::: "memory");
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    for (int q = t; q < 128; q += 96) {  // float4 q: row q / 32, columns 4 (q % 32) ..
      const int row = q / 32;
      float m = -1e30f;
      for (int s = 1; s < splits; ++s) m = fmaxf(m, __ldcg(lse + (s * kHeads + head) * 4 + row));
      float wsum = 0;
      float4 o4 = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int s = 1; s < splits; ++s) {
        const float w = exp2f(__ldcg(lse + (s * kHeads + head) * 4 + row) - m);
        const float4 x = __ldcg(reinterpret_cast<const float4*>(
                                    partial + (static_cast<long>(s) * kHeads + head) * 512) +
                                q);
        wsum += w;
        o4.x = fmaf(w, x.x, o4.x);
        o4.y = fmaf(w, x.y, o4.y);
        o4.z = fmaf(w, x.z, o4.z);
        o4.w = fmaf(w, x.w, o4.w);
      }
      reinterpret_cast<float4*>(others_o)[q] =
          make_float4(o4.x / wsum, o4.y / wsum, o4.z / wsum, o4.w / wsum);
      if (q % 32 == 0) others_l[row] = m + __log2f(wsum);
    }
    for (int s = 1 + t; s < splits; s += 96) flags[head * 64 + s] = 0;
  }
  __syncthreads();
  // Own partial (acc of thread 0 stands for it) merged with the others' merge.
  __shared__ float own_shared;
  if (tid == 0) own_shared = acc;
  __syncthreads();
  const float own = own_shared;
  const int row = tid / 32;
  const float l_own = own, l_oth = others_l[row];
  const float m = fmaxf(l_own, l_oth);
  const float w_own = exp2f(l_own - m), w_oth = exp2f(l_oth - m);
  const float4 x = reinterpret_cast<const float4*>(others_o)[tid];
  const float inv = 1.f / (w_own + w_oth);
  reinterpret_cast<float4*>(result + head * 512)[tid] =
      make_float4((w_own * (own + tid) + w_oth * x.x) * inv, (w_own * own + w_oth * x.y) * inv,
                  (w_own * own + w_oth * x.z) * inv, (w_own * own + w_oth * x.w) * inv);
}

// As a split-KV combine: one warp per output row (32 rows), `splits` partial rows of 128 floats.
__global__ void combine_kernel(const float* __restrict__ partial, float* __restrict__ result,
                               int splits, int wait) {
  // wait bit 1: the next call's stream may launch now, its prologue under this combine.
  if (wait & 2) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (wait & 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s = 0; s < splits; ++s) {
    const float4 x = __ldcg(
        reinterpret_cast<const float4*>(partial + (static_cast<long>(s) * 32 + row) * 128) + lane);
    acc.x += x.x;
    acc.y += x.y;
    acc.z += x.z;
    acc.w += x.w;
  }
  reinterpret_cast<float4*>(result + row * 128)[lane] = acc;
}

int main() {
  const long bytes = static_cast<long>(kHeads) * kKeys * kRowBytes;
  char *k, *v;
  float *partial, *result, *out;
  cudaMalloc(&k, bytes);
  cudaMalloc(&v, bytes);
  cudaMemset(k, 0, bytes);
  cudaMemset(v, 0, bytes);
  cudaMalloc(&partial, 64 * 32 * 128 * 4);
  cudaMemset(partial, 0, 64 * 32 * 128 * 4);
  cudaMalloc(&result, 32 * 128 * 4);
  cudaMalloc(&out, 4096 * 4);
  float* lse;
  int* counters;
  cudaMalloc(&lse, 64 * 32 * 4);
  cudaMalloc(&counters, kHeads * 4);
  cudaMemset(counters, 0, kHeads * 4);
  float* result_last;
  cudaMalloc(&result_last, kHeads * 512 * 4);
  cudaFuncSetAttribute(stream_last_cta_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       200 * 1024);
  cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  cudaFuncSetAttribute(stream_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       200 * 1024);
  cudaFuncSetAttribute(stream_cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int cs : {8, 16})
    for (int smem_kb : {64, 128})
      for (int threads : {128}) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(kHeads * cs);
        cfg.blockDim = dim3(threads);
        cfg.dynamicSmemBytes = smem_kb * 1024;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = cs;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int n = -1;
        cudaError_t e = cudaOccupancyMaxActiveClusters(&n, stream_cluster_kernel, &cfg);
        printf("cluster %2d, %3d KB smem, %3d threads: at most %d clusters at once (%s)\n", cs,
               smem_kb, threads, n, cudaGetErrorString(e));
      }
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  int* flags;
  cudaMalloc(&flags, kHeads * 64 * 4);
  cudaMemset(flags, 0, kHeads * 64 * 4);
  cudaFuncSetAttribute(stream_designated_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       200 * 1024);
  struct Case {
    int splits, stages, threads, mode;
    float extra;
    int poll;
  };  // mode 0 alone, 1 + combine, 2 + combine by PDL, 3 cluster, 4..7 last CTA (protocol 0..2,
      // loads at once), 8 a designated combiner with `extra` more keys, 9 alone with every call's
      // stream launched programmatically, 10 + combine with both kernels launched so
  std::vector<Case> cases;
  const bool all = getenv("PROBE_ALL") != nullptr;
  for (int splits : {8, 16, 32, 64})
    if (all || splits == 16) cases.push_back({splits, 4, 128, 0, 0.f, 0});
  cases.push_back({16, 2, 128, 0, 0.f, 0});
  for (int splits : {16, 32})
    for (int mode : {1, 2})
      if (all || splits == 16) cases.push_back({splits, 4, 128, mode, 0.f, 0});
  if (all) {
    cases.push_back({8, 4, 128, 3, 0.f, 0});
    for (int stages : {2, 4}) cases.push_back({16, stages, 128, 3, 0.f, 0});
  }
  for (int splits : {8, 16, 32})
    for (int mode : {4, 5, 6, 7})
      if (all || (splits == 16 && mode == 6)) cases.push_back({splits, 4, 128, mode, 0.f, 0});
  if (getenv("PROBE_PDL") != nullptr) {
    cases.clear();
    for (int splits : {16, 32})
      for (int mode : {0, 9, 1, 2, 10}) cases.push_back({splits, 4, 128, mode, 0.f, 0});
    for (int mode : {0, 9, 2, 10}) cases.push_back({16, 2, 128, mode, 0.f, 0});
  }
  for (int poll : {3, 0, 1, 2})
    for (int splits : {8, 16})
      if (getenv("PROBE_PDL") == nullptr)
        for (float extra : {0.f, 0.06f, 0.12f}) cases.push_back({splits, 4, 128, 8, extra, poll});
  for (const Case& c : cases) {
    const int smem = c.stages * 2 * kChunkBytes;
    auto call = [&] {
      // Every mode's first kernel: one CTA per KV head and split.
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(kHeads * c.splits);
      cfg.blockDim = dim3(c.threads);
      cfg.dynamicSmemBytes = smem;
      cfg.stream = st;
      if (c.mode == 8) {
        cudaLaunchKernelEx(&cfg, stream_designated_kernel, (const char*)k, (const char*)v, partial,
                           lse, flags, result_last, c.splits, c.stages, c.extra, c.poll);
        return;
      }
      if (c.mode >= 4) {
        cudaLaunchKernelEx(&cfg, stream_last_cta_kernel, (const char*)k, (const char*)v, partial,
                           lse, counters, result_last, c.splits, c.stages,
                           c.mode == 7 ? 1 : c.mode - 4, (int)(c.mode == 7));
        return;
      }
      if (c.mode == 3) {
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = c.splits;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, stream_cluster_kernel, (const char*)k, (const char*)v, out,
                           c.splits, c.stages);
        return;
      }
      cudaLaunchAttribute pdl[1];
      pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      pdl[0].val.programmaticStreamSerializationAllowed = 1;
      if (c.mode >= 9) {
        cfg.attrs = pdl;
        cfg.numAttrs = 1;
      }
      cudaLaunchKernelEx(&cfg, stream_kernel, (const char*)k, (const char*)v, out, c.splits,
                         c.stages, c.mode >= 9 ? 3 : (int)(c.mode == 2));
      if (c.mode == 0 || c.mode == 9) return;
      cudaLaunchConfig_t cc = {};
      cc.gridDim = dim3(8);
      cc.blockDim = dim3(128);
      cc.stream = st;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cc.attrs = attr;
      cc.numAttrs = c.mode == 2 || c.mode == 10 ? 1 : 0;
      cudaLaunchKernelEx(&cc, combine_kernel, (const float*)partial, result, c.splits,
                         c.mode == 10 ? 3 : (int)(c.mode == 2));
    };
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < 20; ++i) call();
    cudaStreamEndCapture(st, &graph);
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
      printf("instantiate failed: %s\n", cudaGetErrorString(cudaGetLastError()));
      continue;
    }
    for (int w = 0; w < 10; ++w) cudaGraphLaunch(exec, st);
    std::vector<float> times;
    for (int r = 0; r < 31; ++r) {
      cudaEventRecord(a, st);
      cudaGraphLaunch(exec, st);
      cudaEventRecord(b, st);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      times.push_back(ms * 1000 / 20);
    }
    std::sort(times.begin(), times.end());
    char designated[64];
    snprintf(designated, sizeof designated, "designated %d, %.2f more", c.poll, c.extra);
    printf("splits %2d (%3d CTAs) stages %d %-27s %7.2f us  %.3f TB/s  %s\n", c.splits,
           kHeads * c.splits, c.stages,
           c.mode == 8    ? designated
           : c.mode == 0  ? "stream alone"
           : c.mode == 1  ? "+ combine, stream order"
           : c.mode == 2  ? "+ combine, PDL at end"
           : c.mode == 3  ? "cluster combine"
           : c.mode == 9  ? "stream alone, PDL chain"
           : c.mode == 10 ? "+ combine, PDL both ways"
           : c.mode == 4  ? "last CTA, fence per thread"
           : c.mode == 5  ? "last CTA, fence per CTA"
           : c.mode == 6  ? "last CTA, acq_rel atomic"
                          : "last CTA, loads at once",
           times[15], 2.0 * bytes / times[15] / 1e6, cudaGetErrorString(cudaGetLastError()));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  return 0;
}

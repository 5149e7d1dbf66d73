// The Hopper tensor memory accelerator (sm_90): tensor maps as kernel parameters, bulk tensor
// copies from global to shared memory that complete on an mbarrier with a transaction count,
// and the mbarrier operations that count bytes.
#pragma once

namespace evo {

// A tensor map as the kernel receives it: a manifest argument of kind tensor_map, declared as a
// `const __grid_constant__ evo::TensorMap` parameter (128 bytes, passed by value).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// Fetches the descriptor into the accelerator's cache ahead of the first copy that uses it.
__device__ __forceinline__ void prefetch_tensor_map(const TensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(&map) : "memory");
}

// Makes an mbarrier's initialization visible to the accelerator (the async proxy) before a copy
// completes on it.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives on `bar` and adds `bytes` to the transactions its current phase waits for: the phase
// completes once every arrival is in and the copies have delivered that many bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

// Copies the box of `map` at element coordinates (innermost first) into shared memory at `dst`
// (1024-byte aligned for the 128-byte swizzle); its bytes count toward `bar`'s transactions.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap& map, int c0, int c1,
                                            unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(&map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tma_load_4d(unsigned dst, const TensorMap& map, int c0, int c1,
                                            int c2, int c3, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// Copies shared memory at `src` (laid out as the map's box, swizzled as the map says) to the box
// of `map` at element coordinates (innermost first); parts of the box outside the tensor are not
// written. The copy joins the issuing thread's current bulk group.
__device__ __forceinline__ void tma_store_4d(const TensorMap& map, unsigned src, int c0, int c1,
                                             int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
          &map),
      "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
      : "memory");
}

// Closes the issuing thread's current bulk group of stores.
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until at most `Pending` of the issuing thread's bulk groups are still reading their
// shared memory (which may then be overwritten).
template <int Pending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}

// Waits until at most `Pending` of the issuing thread's bulk groups are still in flight.
template <int Pending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// Orders this thread's earlier writes to shared memory (generic proxy) before later reads of it
// by the tensor memory accelerator (async proxy), such as a bulk store.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Byte offset of 16-byte chunk c of row r in a tile the accelerator wrote with the 128-byte
// swizzle: rows of 128 bytes, chunk c at c ^ (r & 7).
__device__ __forceinline__ unsigned swizzle_128b(int r, int c) {
  return static_cast<unsigned>(r * 128 + ((c ^ (r & 7)) << 4));
}

}  // namespace evo

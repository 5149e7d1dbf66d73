// Thread-block clusters (sm_90): the CTAs of a cluster run at once on one GPC and can reach each
// other's shared memory. A kernel that uses them is launched with a cluster extent (the
// manifest's "cluster").
#pragma once

#include "evo/tma.cuh"

namespace evo {

// This CTA's index within its cluster.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every CTA of the cluster meets here. Writes before it (an mbarrier's
// initialization, arrivals on another CTA's barriers) are visible to all of them after it. Not
// .aligned: threads of one warp may arrive from different branches.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release;\n"
      "barrier.cluster.wait.acquire;\n" ::
          : "memory");
}

// Arrives on the mbarrier at shared address `bar` of the cluster's CTA `rank` (this CTA's own
// included): the same offset in that CTA's shared memory.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile(
      "{\n .reg .b32 remote;\n mapa.shared::cluster.u32 remote, %0, %1;\n"
      " mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank)
      : "memory");
}

// Copies the box of `map` at element coordinates (innermost first) into shared memory at `dst`
// of every CTA in `cta_mask` (bit r: the cluster's CTA r), at the same offset in each; the bytes
// count toward the mbarrier at `bar`'s offset in each of those CTAs.
__device__ __forceinline__ void tma_load_4d_multicast(unsigned dst, const TensorMap& map, int c0,
                                                      int c1, int c2, int c3, unsigned bar,
                                                      unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::"
      "cluster [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "h"(cta_mask)
      : "memory");
}

}  // namespace evo

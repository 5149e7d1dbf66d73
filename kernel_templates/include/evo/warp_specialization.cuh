// What warp-specialized kernels on Hopper (sm_90a) are made of besides their copies and MMAs:
// named barriers that order warpgroups without stopping the whole CTA, the register hand-over
// between warpgroups (setmaxnreg), and an mbarrier wait that lets the warp sleep.
#pragma once

namespace evo {

// Named barrier `id` (1..15; 0 is __syncthreads) completes once Threads threads have reached it,
// those that wait (sync) and those that only signal (arrive) alike.
template <int Threads>
__device__ __forceinline__ void named_barrier_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(Threads) : "memory");
}

template <int Threads>
__device__ __forceinline__ void named_barrier_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(Threads) : "memory");
}

// Sets this warpgroup's registers per thread to Count (a multiple of 8 in [24, 256]); every warp
// of the warpgroup executes it. Lowering returns registers to the CTA's pool; raising takes them
// from it and waits until enough are there, so the CTA's warpgroups must fit its allocation at
// launch (its threads times the kernel's register count).
template <int Count>
__device__ __forceinline__ void registers_decrease() {
  static_assert(Count % 8 == 0 && Count >= 24 && Count <= 256, "setmaxnreg takes 24..256 by 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Count));
}

template <int Count>
__device__ __forceinline__ void registers_increase() {
  static_assert(Count % 8 == 0 && Count >= 24 && Count <= 256, "setmaxnreg takes 24..256 by 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Count));
}

// Waits until the phase of parity `parity` of mbarrier `bar` has completed. try_wait suspends
// the warp for a while in hardware instead of spinning on test_wait. A barrier that has not
// completed any phase yet counts its phase "before the first" (parity 1) as complete, so a
// producer waits on parity 1 for the first use of a free buffer.
__device__ __forceinline__ void mbar_wait_sleep(unsigned bar, int parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

}  // namespace evo

// Asynchronous copies from global to shared memory (cp.async, sm_80+), and a tile loader on
// top of them.
#pragma once

namespace evo {

// src_bytes = 0 zero-fills the 16 destination bytes without reading src.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int Groups>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Groups) : "memory");
}

// Arrives on an mbarrier once this thread's earlier cp.async copies have landed; the arrival is
// counted in the barrier's init count (noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Copies rows [row0, row0 + Rows) of a row-major matrix of RowElements elements of type T per
// row into a shared-memory tile, 16 bytes per cp.async, spread over Loaders threads (tid in
// [0, Loaders)): 16-byte chunk c of tile row r lands at smem_tile + offset(r, c), so the caller
// chooses the layout (swizzle). Rows past num_rows are zero-filled from a clamped (valid)
// address.
template <int Rows, int RowElements, int Loaders, class T, class Offset>
__device__ __forceinline__ void load_rows_async(unsigned smem_tile, const T* __restrict__ src,
                                                int row0, int num_rows, int tid, Offset offset) {
  constexpr int kChunkElements = 16 / static_cast<int>(sizeof(T));
  static_assert(RowElements % kChunkElements == 0, "rows are copied in 16-byte chunks");
  constexpr int kChunksPerRow = RowElements / kChunkElements;
  constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + Loaders - 1) / Loaders; ++i) {
    const int idx = i * Loaders + tid;
    if (kChunks % Loaders == 0 || idx < kChunks) {
      const int r = idx / kChunksPerRow;
      const int c = idx % kChunksPerRow;
      const int row = row0 + r;
      const bool valid = row < num_rows;
      const T* p = src + static_cast<long long>(valid ? row : 0) * RowElements + c * kChunkElements;
      cp_async_16(smem_tile + offset(r, c), p, valid ? 16 : 0);
    }
  }
}

// load_rows_async for rows that are not evenly spaced in memory (query rows of several heads
// packed into one tile): row_src(r) is the address of tile row r's first element, or nullptr for
// a row to zero-fill, whose copy then names `fallback` (any valid address) and reads nothing.
template <int Rows, int RowElements, int Loaders, class T, class RowSource, class Offset>
__device__ __forceinline__ void load_rows_async_gather(unsigned smem_tile, RowSource row_src,
                                                       const T* fallback, int tid, Offset offset) {
  constexpr int kChunkElements = 16 / static_cast<int>(sizeof(T));
  static_assert(RowElements % kChunkElements == 0, "rows are copied in 16-byte chunks");
  constexpr int kChunksPerRow = RowElements / kChunkElements;
  constexpr int kChunks = Rows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + Loaders - 1) / Loaders; ++i) {
    const int idx = i * Loaders + tid;
    if (kChunks % Loaders == 0 || idx < kChunks) {
      const int r = idx / kChunksPerRow;
      const int c = idx % kChunksPerRow;
      const T* row = row_src(r);
      const T* p = row != nullptr ? row + c * kChunkElements : fallback;
      cp_async_16(smem_tile + offset(r, c), p, row != nullptr ? 16 : 0);
    }
  }
}

// A ring of Stages shared-memory buffers that cp.async fills with consecutive tiles of a loop,
// tile j in buffer j % Stages; load(tile, buffer) issues one tile's copies. Every step commits
// one group, empty ones too, so that waiting for all but Stages - 2 groups always means "tile j
// has landed" (for this thread's copies: a barrier publishes them to the others).
template <int Stages>
struct CpAsyncRing {
  static_assert(Stages >= 1 && Stages <= 8, "STAGES must be in [1, 8]");

  // Before the loop: first() issues what must land before tile 0 (Q), which rides in tile 0's
  // group (in one of its own when Stages is 1, or when FirstAlone: to be waited for alone), then
  // tiles 0 .. Stages - 2 in flight (those that exist).
  template <bool FirstAlone = false, class First, class Load>
  static __device__ __forceinline__ void prologue(int num_tiles, First first, Load load) {
    first();
    if constexpr (Stages == 1 || FirstAlone) cp_async_commit();
#pragma unroll
    for (int s = 0; s < Stages - 1; ++s) {
      if (s < num_tiles) load(s, s);
      cp_async_commit();
    }
  }

  // Iteration j, before tile j is read. With one buffer, tile j is loaded now and waited for:
  // the caller makes sure that no thread still reads tile j - 1 (release, or a barrier of its
  // own after the last read).
  template <class Load>
  static __device__ __forceinline__ void wait(int j, Load load) {
    if constexpr (Stages == 1) {
      load(j, 0);
      cp_async_commit();
      cp_async_wait<0>();
    } else {
      cp_async_wait<Stages - 2>();
    }
  }

  // After the last read of a tile's buffer where it follows the loop body's last barrier: with
  // one buffer the next wait loads the next tile into it at once, so every thread must be done
  // with it. With more buffers the next prefetch already follows a barrier. Every template that
  // reads the stage itself (not a copy made between barriers) calls it; sdpa_fp8 once did not,
  // and raced.
  static __device__ __forceinline__ void release() {
    if constexpr (Stages == 1) __syncthreads();
  }

  // Iteration j, once no thread reads tile j - 1 any more: tile j + Stages - 1 into the buffer
  // tile j - 1 leaves, (j + Stages - 1) mod Stages, or buffer(tile) where the caller keeps count
  // of it. (The buffer is computed from the very `next` that is loaded, inside the branch:
  // written as a separate expression, it changed the PTX's arithmetic and with it ptxas's
  // schedule, 85 -> 91 us for sdpa_fp16_wgmma at 2,8,2048,128 on the H100.)
  template <class Load>
  static __device__ __forceinline__ void prefetch(int j, int num_tiles, Load load) {
    prefetch(j, num_tiles, load, [](int next) { return next % Stages; });
  }
  template <class Load, class Buffer>
  static __device__ __forceinline__ void prefetch(int j, int num_tiles, Load load, Buffer buffer) {
    if constexpr (Stages > 1) {
      const int next = j + Stages - 1;
      if (next < num_tiles) load(next, buffer(next));
      cp_async_commit();
    }
  }
};

}  // namespace evo

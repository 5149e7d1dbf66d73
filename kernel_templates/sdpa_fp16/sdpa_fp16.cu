// Flash-attention-2 style forward pass: O = softmax(Q K^T / sqrt(D)) V per (batch, head).
// fp16 Q, K, V, O in contiguous [B, H, S, D]; fp32 accumulation on tensor cores
// (mma.sync m16n8k16 fed by ldmatrix); online softmax with P kept in registers.
//
// WARP_SPECIALIZED adds one producer warp that issues every cp.async (Q and the K/V stages) and
// hands tiles over through mbarriers, so the NUM_WARPS consumer warps only compute and never
// meet at a CTA-wide barrier.
//
// Knobs (BLOCK_M, BLOCK_N, NUM_WARPS, STAGES, FAST_EXP, WARP_SPECIALIZED, PERSISTENT,
// LAZY_RESCALE) and problem
// defines (HEAD_DIM, IS_CAUSAL) are prepended by evo. The source must stay NVRTC-clean: no
// #include, fp16 lives in unsigned short and every conversion is inline PTX.

#if !defined(BLOCK_M) || !defined(BLOCK_N) || !defined(NUM_WARPS) || !defined(STAGES)
#error "sdpa_fp16.cu needs BLOCK_M, BLOCK_N, NUM_WARPS and STAGES defined"
#endif
#if !defined(FAST_EXP) || !defined(WARP_SPECIALIZED) || !defined(PERSISTENT)
#error "sdpa_fp16.cu needs FAST_EXP, WARP_SPECIALIZED and PERSISTENT defined"
#endif
#if !defined(LAZY_RESCALE)
#error "sdpa_fp16.cu needs LAZY_RESCALE defined"
#endif
#if !defined(HEAD_DIM) || !defined(IS_CAUSAL)
#error "sdpa_fp16.cu needs HEAD_DIM and IS_CAUSAL defined"
#endif

static_assert(NUM_WARPS >= 1 && NUM_WARPS <= 32, "NUM_WARPS must be in [1, 32]");
static_assert(BLOCK_M > 0 && BLOCK_M % (16 * NUM_WARPS) == 0,
              "BLOCK_M / NUM_WARPS (query rows per warp) must be a positive multiple of 16");
static_assert(BLOCK_N > 0 && BLOCK_N % 16 == 0, "BLOCK_N must be a positive multiple of 16");
static_assert(STAGES >= 1 && STAGES <= 8, "STAGES must be in [1, 8]");
static_assert(HEAD_DIM > 0 && HEAD_DIM % 64 == 0 && HEAD_DIM <= 256,
              "HEAD_DIM must be 64, 128, 192 or 256 (the XOR swizzle needs rows of 8k 16-byte "
              "chunks)");
static_assert(FAST_EXP == 0 || FAST_EXP == 1, "FAST_EXP must be 0 or 1");
static_assert(PERSISTENT == 0 || PERSISTENT == 1, "PERSISTENT must be 0 or 1");
static_assert(LAZY_RESCALE == 0 || LAZY_RESCALE == 1, "LAZY_RESCALE must be 0 or 1");
static_assert(IS_CAUSAL == 0 || IS_CAUSAL == 1, "IS_CAUSAL must be 0 or 1");
static_assert(WARP_SPECIALIZED == 0 || WARP_SPECIALIZED == 1, "WARP_SPECIALIZED must be 0 or 1");
static_assert(WARP_SPECIALIZED == 0 || STAGES >= 2,
              "a producer warp needs at least two stages to load ahead of the consumers");

namespace sdpa {

// An enum rather than constexpr variables: NVRTC would emit those as unused .global symbols.
enum : int {
  kThreads = NUM_WARPS * 32,  // the computing (consumer) threads; the producer warp comes after
  kWarpRows = BLOCK_M / NUM_WARPS,
  kMFrags = kWarpRows / 16,      // m16 tiles per warp
  kNFrags = BLOCK_N / 8,         // n8 tiles of S per KV tile
  kDFrags = HEAD_DIM / 8,        // n8 tiles of O
  kChunksPerRow = HEAD_DIM / 8,  // 16-byte chunks per smem row
  kQTileBytes = BLOCK_M * HEAD_DIM * 2,
  kKVTileBytes = BLOCK_N * HEAD_DIM * 2,
};

__host__ __device__ constexpr double const_sqrt(double x) {
  double r = x;
  for (int i = 0; i < 64; ++i) r = 0.5 * (r + x / r);
  return r;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// ---- PTX wrappers (all memory traffic and fp16 conversions of the kernel go through these) ----

// Volatile, so nothing derived from the thread index is hoisted out of the persistent tile loop:
// kept live across tiles, those addresses cost up to ~70 registers (spills at D = 128). Not
// __noinline__ instead, because ptxas -v would then report the spills under a second function.
__device__ __forceinline__ int thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// src_bytes = 0 zero-fills the 16 destination bytes without reading src.
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// d += a * b with a 16x16 (row), b 16x8 (col), d 16x8 fp32.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                          unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The first source operand of cvt.f16x2 lands in the upper half, so hi goes first.
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void st_shared_b32(unsigned addr, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ void ld_shared_v4(unsigned (&v)[4], unsigned addr) {
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void st_global_v4(void* p, const unsigned (&v)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v[0]), "r"(v[1]),
               "r"(v[2]), "r"(v[3])
               : "memory");
}

// mbarriers (sm_80+): the producer's cp.async completions fill a stage, the consumers' arrivals
// empty it. A barrier's k-th use completes its phase k, waited for with parity k & 1.
__device__ __forceinline__ void mbar_init(unsigned bar, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
}

// Arrives once this thread's earlier cp.async copies have landed; counted in the init count.
__device__ __forceinline__ void cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, int parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}

// ---- end of PTX wrappers ----

// Byte offset of 16-byte chunk c of row r in a [rows][HEAD_DIM] fp16 tile. XOR-ing the chunk with
// (r & 7) puts the 8 rows read by one ldmatrix 8x8 matrix on 8 distinct bank groups.
__device__ __forceinline__ unsigned swizzle(int r, int c) {
  return static_cast<unsigned>((r * HEAD_DIM + ((c ^ (r & 7)) << 3)) * 2);
}

// Copies rows [row0, row0 + ROWS) of a [num_rows][HEAD_DIM] matrix into a swizzled smem tile;
// rows past num_rows are zero-filled from a clamped (valid) address.
template <int ROWS, int LOADERS = kThreads>
__device__ __forceinline__ void load_tile_async(unsigned smem_tile,
                                                const unsigned short* __restrict__ src, int row0,
                                                int num_rows, int tid) {
  constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + LOADERS - 1) / LOADERS; ++i) {
    const int idx = i * LOADERS + tid;
    if (kChunks % LOADERS == 0 || idx < kChunks) {
      const int r = idx / kChunksPerRow;
      const int c = idx % kChunksPerRow;
      const int row = row0 + r;
      const bool valid = row < num_rows;
      const unsigned short* p = src + static_cast<long long>(valid ? row : 0) * HEAD_DIM + c * 8;
      cp_async_16(smem_tile + swizzle(r, c), p, valid ? 16 : 0);
    }
  }
}

// KV tiles an m-tile reads. Causal (top-left): the last valid row of the m-tile sees keys
// [0, last_row]; later KV tiles are skipped entirely.
__device__ __forceinline__ int kv_tile_count(int m_tile, int S_q, int S_kv) {
  const int m_start = m_tile * BLOCK_M;
  const int kv_end = IS_CAUSAL ? imin(S_kv, imin(m_start + BLOCK_M, S_q)) : S_kv;
  return (kv_end + BLOCK_N - 1) / BLOCK_N;
}

// The warp-specialized hand-over: where its mbarriers are and how many work items and KV tiles
// this CTA has passed through (phases run on across the work items of a persistent CTA).
struct Handover {
  unsigned bars;  // q_full, q_empty, full[STAGES], empty[STAGES], 8 bytes each
  int item;
  int kv_base;
  __device__ unsigned q_full() const { return bars; }
  __device__ unsigned q_empty() const { return bars + 8; }
  __device__ unsigned full(int stage) const { return bars + 16 + 8 * stage; }
  __device__ unsigned empty(int stage) const { return bars + 16 + 8 * (STAGES + stage); }
};
enum : int { kHandoverBarriers = 2 + 2 * STAGES };

__device__ __forceinline__ void init_handover(unsigned bars) {
  mbar_init(bars, 32);             // q_full: the producer's 32 lanes, through cp.async
  mbar_init(bars + 8, NUM_WARPS);  // q_empty: one arrival per consumer warp
  for (int s = 0; s < STAGES; ++s) {
    mbar_init(bars + 16 + 8 * s, 32);
    mbar_init(bars + 16 + 8 * (STAGES + s), NUM_WARPS);
  }
}

// The producer warp's share of one work item: Q once the consumers are done with the previous
// item's Q tile (their output staging area), then every KV tile into the stage the consumers
// have released.
__device__ __forceinline__ void produce_tile(const unsigned short* __restrict__ Q,
                                             const unsigned short* __restrict__ K,
                                             const unsigned short* __restrict__ V, int bh,
                                             int m_tile, int S_q, int S_kv, unsigned smem_base,
                                             const Handover& handover, int lane) {
  const unsigned short* q_head = Q + static_cast<long long>(bh) * S_q * HEAD_DIM;
  const unsigned short* k_head = K + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned short* v_head = V + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned q_smem = smem_base;
  const unsigned k_smem = smem_base + kQTileBytes;
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;
  if (handover.item > 0) mbar_wait(handover.q_empty(), (handover.item - 1) & 1);
  load_tile_async<BLOCK_M, 32>(q_smem, q_head, m_tile * BLOCK_M, S_q, lane);
  cp_async_mbar_arrive(handover.q_full());
  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);
  for (int j = 0; j < num_kv_tiles; ++j) {
    const int use = handover.kv_base + j;
    const int stage = use % STAGES;
    if (use >= STAGES) mbar_wait(handover.empty(stage), (use / STAGES - 1) & 1);
    load_tile_async<BLOCK_N, 32>(k_smem + stage * kKVTileBytes, k_head, j * BLOCK_N, S_kv, lane);
    load_tile_async<BLOCK_N, 32>(v_smem + stage * kKVTileBytes, v_head, j * BLOCK_N, S_kv, lane);
    cp_async_mbar_arrive(handover.full(stage));
  }
}

// One (batch * head, m-tile) work item: BLOCK_M query rows against all visible keys.
__device__ __forceinline__ void attention_tile(const unsigned short* __restrict__ Q,
                                               const unsigned short* __restrict__ K,
                                               const unsigned short* __restrict__ V,
                                               unsigned short* __restrict__ O, int bh, int m_tile,
                                               int S_q, int S_kv, unsigned smem_base,
                                               const Handover& handover) {
#if FAST_EXP
  // exp(x / sqrt(D)) = exp2(x * log2(e) / sqrt(D)).
  constexpr float kScaleLog2 = static_cast<float>(1.4426950408889634 / const_sqrt(HEAD_DIM));
#else
  constexpr float kScale = static_cast<float>(1.0 / const_sqrt(HEAD_DIM));
#endif
  const int tid = thread_index();
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int group = lane >> 2;  // mma fragment row within an 8-row half
  const int quad = lane & 3;    // mma fragment column pair

  const unsigned short* q_head = Q + static_cast<long long>(bh) * S_q * HEAD_DIM;
  const unsigned short* k_head = K + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  const unsigned short* v_head = V + static_cast<long long>(bh) * S_kv * HEAD_DIM;
  unsigned short* o_head = O + static_cast<long long>(bh) * S_q * HEAD_DIM;

  const unsigned q_smem = smem_base;
  const unsigned k_smem = smem_base + kQTileBytes;
  const unsigned v_smem = k_smem + STAGES * kKVTileBytes;

  const int m_start = m_tile * BLOCK_M;
  const int warp_row0 = warp * kWarpRows;  // within the m-tile
  const int warp_last_row = m_start + warp_row0 + kWarpRows - 1;

  const int num_kv_tiles = kv_tile_count(m_tile, S_q, S_kv);

  // Per-lane row / chunk selectors for the three ldmatrix.x4 patterns; lane l addresses a row of
  // matrix l / 8.
  // Q (A operand): matrices {rows 0-7, k 0-7}, {rows 8-15, k 0-7}, {rows 0-7, k 8-15},
  // {rows 8-15, k 8-15} = a0..a3.
  const int qa_row = lane & 15;
  const int qa_chunk = lane >> 4;
  // K (B operand of Q K^T, K rows are B columns): {keys 0-7, d 0-7}, {keys 0-7, d 8-15},
  // {keys 8-15, d 0-7}, {keys 8-15, d 8-15} = b0, b1 of n8 tile 0, b0, b1 of n8 tile 1.
  const int kb_row = (lane & 7) + ((lane >> 4) << 3);
  const int kb_chunk = (lane >> 3) & 1;
  // V (B operand of P V, transposed on load): {keys 0-7, d 0-7}, {keys 8-15, d 0-7},
  // {keys 0-7, d 8-15}, {keys 8-15, d 8-15} = b0, b1 of d tile 0, b0, b1 of d tile 1.
  const int vb_row = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int vb_chunk = lane >> 4;
  // Rows 16-aligned keep (r & 7), so chunk 2k + b of row r sits at swizzle(r, b) ^ (k << 5): one
  // lane offset per pattern, XOR-ed with a constant per k16 step. Writing every step's address
  // as swizzle(...) instead lets ptxas keep one register per (pattern, step), which spills the
  // D = 128 tiles.
  unsigned q_lane[kMFrags];
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) q_lane[mf] = swizzle(warp_row0 + mf * 16 + qa_row, qa_chunk);
  const unsigned k_lane = swizzle(kb_row, kb_chunk);
  const unsigned v_lane = swizzle(vb_row, vb_chunk);

  float acc[kMFrags][kDFrags][4];
  float row_max[kMFrags][2];
  float row_sum[kMFrags][2];  // per-thread partial over its columns; quad-reduced at the end
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
    for (int df = 0; df < kDFrags; ++df) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mf][df][e] = 0.f;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[mf][h] = neg_inf();
      row_sum[mf][h] = 0.f;
    }
  }

#if WARP_SPECIALIZED
  mbar_wait(handover.q_full(), handover.item & 1);
#else
  // Pipeline prologue. Q rides in the first commit group; with STAGES >= 2, groups are committed
  // even when empty so that wait_group STAGES-2 always means "tile j has landed".
  load_tile_async<BLOCK_M>(q_smem, q_head, m_start, S_q, tid);
  if constexpr (STAGES == 1) cp_async_commit();
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_kv_tiles) {
      load_tile_async<BLOCK_N>(k_smem + s * kKVTileBytes, k_head, s * BLOCK_N, S_kv, tid);
      load_tile_async<BLOCK_N>(v_smem + s * kKVTileBytes, v_head, s * BLOCK_N, S_kv, tid);
    }
    cp_async_commit();
  }
#endif

  int read_stage = 0;
  for (int j = 0; j < num_kv_tiles; ++j) {
#if WARP_SPECIALIZED
    read_stage = (handover.kv_base + j) % STAGES;
    mbar_wait(handover.full(read_stage), ((handover.kv_base + j) / STAGES) & 1);
#else
    if constexpr (STAGES == 1) {
      load_tile_async<BLOCK_N>(k_smem, k_head, j * BLOCK_N, S_kv, tid);
      load_tile_async<BLOCK_N>(v_smem, v_head, j * BLOCK_N, S_kv, tid);
      cp_async_commit();
      cp_async_wait<0>();
      __syncthreads();
    } else {
      cp_async_wait<STAGES - 2>();
      // Makes tile j visible to all warps and guarantees every warp is done with tile j-1,
      // whose stage the prefetch below overwrites.
      __syncthreads();
      const int jn = j + STAGES - 1;
      if (jn < num_kv_tiles) {
        const int write_stage = read_stage == 0 ? STAGES - 1 : read_stage - 1;
        load_tile_async<BLOCK_N>(k_smem + write_stage * kKVTileBytes, k_head, jn * BLOCK_N, S_kv,
                                 tid);
        load_tile_async<BLOCK_N>(v_smem + write_stage * kKVTileBytes, v_head, jn * BLOCK_N, S_kv,
                                 tid);
      }
      cp_async_commit();
    }
#endif

    const int n_start = j * BLOCK_N;
    // Warp-uniform: under causal masking a warp whose rows all precede this tile has nothing to
    // add (ldmatrix / mma need the whole warp, which this branch keeps together).
    if (!IS_CAUSAL || n_start <= warp_last_row) {
      const unsigned k_tile = k_smem + read_stage * kKVTileBytes;
      const unsigned v_tile = v_smem + read_stage * kKVTileBytes;

      // S = Q K^T for this warp's rows.
      float s[kMFrags][kNFrags][4];
#pragma unroll
      for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
        for (int nf = 0; nf < kNFrags; ++nf) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mf][nf][e] = 0.f;
        }
      }
#pragma unroll
      for (int kd = 0; kd < HEAD_DIM / 16; ++kd) {
        unsigned qa[kMFrags][4];
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
          ldmatrix_x4(qa[mf], q_smem + (q_lane[mf] ^ (kd << 5)));
        }
#pragma unroll
        for (int np = 0; np < BLOCK_N / 16; ++np) {
          unsigned kb[4];
          ldmatrix_x4(kb, k_tile + np * 16 * HEAD_DIM * 2 + (k_lane ^ (kd << 5)));
#pragma unroll
          for (int mf = 0; mf < kMFrags; ++mf) {
            mma_16816(s[mf][2 * np], qa[mf], kb[0], kb[1]);
            mma_16816(s[mf][2 * np + 1], qa[mf], kb[2], kb[3]);
          }
        }
      }

      // Only tiles that reach past S_kv or cross the diagonal need the element mask.
      if (n_start + BLOCK_N > S_kv || (IS_CAUSAL && n_start + BLOCK_N - 1 > m_start)) {
        // Element (mf, nf, e) sits at row m_start + warp_row0 + group + mf * 16 + 8 * (e >> 1) and
        // column n_start + quad * 2 + nf * 8 + (e & 1): two per-thread bounds against
        // compile-time offsets, instead of a row and a column per element.
        const int cols_left = S_kv - n_start - quad * 2;
        const int diagonal = m_start + warp_row0 + group - n_start - quad * 2;
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
          for (int nf = 0; nf < kNFrags; ++nf) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int col_offset = nf * 8 + (e & 1);
              const int row_offset = mf * 16 + ((e >> 1) << 3);
              if (col_offset >= cols_left || (IS_CAUSAL && col_offset - row_offset > diagonal)) {
                s[mf][nf][e] = neg_inf();
              }
            }
          }
        }
      }

      // Online softmax. Element e of a fragment belongs to row half h = e / 2; the four lanes of
      // a quad share a row, so row statistics are reduced over lanes xor 1 and xor 2.
      // The accumulator fragments of n8 tiles 2kk and 2kk+1 are exactly the A fragment (rows
      // g / g+8, k pairs 2q and 2q+8) of k16 step kk, so P never leaves registers.
      // LAZY_RESCALE keeps every row's alpha until a warp vote after the softmax, and pays for
      // those registers by packing each pair of probabilities to fp16 as soon as it exists (the
      // fp32 scores die during the softmax: at D = 128, BLOCK_N = 64 with two m16 tiles per warp
      // this is the difference between spilling and not). Without it the scores are packed just
      // before P V, which leaves ptxas more freedom to schedule (faster on most D = 64 tiles).
      unsigned p_frag[kMFrags][BLOCK_N / 16][4];
#if LAZY_RESCALE
      float alpha[kMFrags][2];
      bool max_moved = false;
#endif
#pragma unroll
      for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // Pairwise trees, not a running max or sum: a serial chain of 2 * kNFrags dependent
          // FMNMX / FADD stalls the warp on each result (ncu: fixed-latency waits dominated).
          float tree[kNFrags];
#pragma unroll
          for (int nf = 0; nf < kNFrags; ++nf) {
            tree[nf] = fmaxf(s[mf][nf][2 * h], s[mf][nf][2 * h + 1]);
          }
#pragma unroll
          for (int stride = 1; stride < kNFrags; stride *= 2) {
#pragma unroll
            for (int nf = 0; nf + stride < kNFrags; nf += 2 * stride) {
              tree[nf] = fmaxf(tree[nf], tree[nf + stride]);
            }
          }
          float mx = fmaxf(row_max[mf][h], tree[0]);
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // A row with every score so far masked keeps max = -inf; using 0 as the reference
          // avoids (-inf) - (-inf) = NaN and still maps masked scores to exp(-inf) = 0.
          const float m_ref = mx == neg_inf() ? 0.f : mx;
#if FAST_EXP
          const float neg_m_scaled = -m_ref * kScaleLog2;
          const float row_alpha = exp2_approx(fmaf(row_max[mf][h], kScaleLog2, neg_m_scaled));
#else
          const float row_alpha = expf((row_max[mf][h] - m_ref) * kScale);
#endif
#if LAZY_RESCALE
          alpha[mf][h] = row_alpha;
          max_moved |= mx != row_max[mf][h];
#endif
          row_max[mf][h] = mx;
#pragma unroll
          for (int nf = 0; nf < kNFrags; ++nf) {
            float p[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
#if FAST_EXP
              p[i] = exp2_approx(fmaf(s[mf][nf][2 * h + i], kScaleLog2, neg_m_scaled));
#else
              p[i] = expf((s[mf][nf][2 * h + i] - m_ref) * kScale);
#endif
            }
            tree[nf] = p[0] + p[1];
#if LAZY_RESCALE
            p_frag[mf][nf / 2][(nf & 1) * 2 + h] = pack_half2(p[0], p[1]);
#else
            s[mf][nf][2 * h] = p[0];
            s[mf][nf][2 * h + 1] = p[1];
#endif
          }
#pragma unroll
          for (int stride = 1; stride < kNFrags; stride *= 2) {
#pragma unroll
            for (int nf = 0; nf + stride < kNFrags; nf += 2 * stride) {
              tree[nf] += tree[nf + stride];
            }
          }
          row_sum[mf][h] = row_sum[mf][h] * row_alpha + tree[0];
#if !LAZY_RESCALE
#pragma unroll
          for (int df = 0; df < kDFrags; ++df) {
            acc[mf][df][2 * h] *= row_alpha;
            acc[mf][df][2 * h + 1] *= row_alpha;
          }
#endif
        }
      }
#if LAZY_RESCALE
      // Once the row maxima settle (most KV tiles of a long sequence) every alpha is exactly 1:
      // the warp skips the rescale of its O accumulators, the same result without the multiplies.
      if (__any_sync(0xffffffffu, max_moved)) {
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
          for (int df = 0; df < kDFrags; ++df) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mf][df][e] *= alpha[mf][e >> 1];
          }
        }
      }
#endif

      // O += P V.
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
#if !LAZY_RESCALE
#pragma unroll
        for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const float(&f)[4] = s[mf][2 * kk + half];
            p_frag[mf][kk][2 * half] = pack_half2(f[0], f[1]);
            p_frag[mf][kk][2 * half + 1] = pack_half2(f[2], f[3]);
          }
        }
#endif
#pragma unroll
        for (int dp = 0; dp < HEAD_DIM / 16; ++dp) {
          unsigned vb[4];
          ldmatrix_x4_trans(vb, v_tile + kk * 16 * HEAD_DIM * 2 + (v_lane ^ (dp << 5)));
#pragma unroll
          for (int mf = 0; mf < kMFrags; ++mf) {
            mma_16816(acc[mf][2 * dp], p_frag[mf][kk], vb[0], vb[1]);
            mma_16816(acc[mf][2 * dp + 1], p_frag[mf][kk], vb[2], vb[3]);
          }
        }
      }
    }

#if WARP_SPECIALIZED
    // Every warp waits for the stage before releasing it, skipped or not, so no warp can arrive
    // for the stage's next use while this one is still open.
    __syncwarp();
    if (lane == 0) mbar_arrive(handover.empty(read_stage));
#else
    if constexpr (STAGES == 1) {
      __syncthreads();  // the next iteration's load overwrites the only stage
    }
    read_stage = read_stage == STAGES - 1 ? 0 : read_stage + 1;
#endif
  }

#if !WARP_SPECIALIZED
  // Only empty commit groups can still be pending; drain them so the CTA may reuse smem.
  cp_async_wait<0>();
#endif

  // Epilogue: normalize, stage this warp's rows in its own slice of the Q tile (read by no other
  // warp), then write whole 16-byte chunks to global memory.
  float inv_sum[kMFrags][2];
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mf][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv_sum[mf][h] = l > 0.f ? 1.f / l : 0.f;
    }
  }
  __syncwarp();
#pragma unroll
  for (int mf = 0; mf < kMFrags; ++mf) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp_row0 + mf * 16 + group + h * 8;
#pragma unroll
      for (int df = 0; df < kDFrags; ++df) {
        const unsigned v = pack_half2(acc[mf][df][2 * h] * inv_sum[mf][h],
                                      acc[mf][df][2 * h + 1] * inv_sum[mf][h]);
        st_shared_b32(q_smem + swizzle(r, df) + quad * 4, v);
      }
    }
  }
  __syncwarp();
  constexpr int kWarpChunks = kWarpRows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kWarpChunks / 32; ++i) {
    const int idx = i * 32 + lane;
    const int r = warp_row0 + idx / kChunksPerRow;
    const int c = idx % kChunksPerRow;
    const int row = m_start + r;
    if (row < S_q) {
      unsigned v[4];
      ld_shared_v4(v, q_smem + swizzle(r, c));
      st_global_v4(o_head + static_cast<long long>(row) * HEAD_DIM + c * 8, v);
    }
  }
#if WARP_SPECIALIZED
  __syncwarp();  // the warp's rows of the Q tile are free for the next item's Q
  if (lane == 0) mbar_arrive(handover.q_empty());
#endif
}

}  // namespace sdpa

extern "C" __global__ void __launch_bounds__((NUM_WARPS + WARP_SPECIALIZED) * 32)
    sdpa_fp16_fwd(const unsigned short* __restrict__ Q, const unsigned short* __restrict__ K,
                  const unsigned short* __restrict__ V, unsigned short* __restrict__ O, int B,
                  int H, int S_q, int S_kv) {
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned smem_base = sdpa::smem_u32(smem);
  const int num_m_tiles = (S_q + BLOCK_M - 1) / BLOCK_M;
  sdpa::Handover handover{0, 0, 0};
#if WARP_SPECIALIZED
  __shared__ __align__(8) unsigned long long barriers[sdpa::kHandoverBarriers];
  handover.bars = sdpa::smem_u32(barriers);
  if (threadIdx.x == 0) sdpa::init_handover(handover.bars);
  __syncthreads();  // the only CTA-wide barrier: the roles never meet again
  const bool producer = threadIdx.x >= sdpa::kThreads;
#endif
#if PERSISTENT
  const int num_bh = B * H;
  const int num_tiles = num_bh * num_m_tiles;
  for (int tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
    // Last m-tiles first (the most keys under causal masking), heads fastest, so the expensive
    // work starts early and the tail is made of cheap tiles.
    const int m_tile = num_m_tiles - 1 - tile / num_bh;
    const int bh = tile % num_bh;
#if WARP_SPECIALIZED
    if (producer) {
      sdpa::produce_tile(Q, K, V, bh, m_tile, S_q, S_kv, smem_base, handover,
                         threadIdx.x - sdpa::kThreads);
    } else {
      sdpa::attention_tile(Q, K, V, O, bh, m_tile, S_q, S_kv, smem_base, handover);
    }
    handover.kv_base += sdpa::kv_tile_count(m_tile, S_q, S_kv);
    ++handover.item;
#else
    sdpa::attention_tile(Q, K, V, O, bh, m_tile, S_q, S_kv, smem_base, handover);
    __syncthreads();  // the next tile's loads overwrite smem other warps may still read
#endif
  }
#else
  // Under causal masking, launch the heavy (late) m-tiles first.
  const int m_tile =
      IS_CAUSAL ? num_m_tiles - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  if (m_tile < 0 || m_tile >= num_m_tiles) return;
  const int bh = blockIdx.z * H + blockIdx.y;
#if WARP_SPECIALIZED
  if (producer) {
    sdpa::produce_tile(Q, K, V, bh, m_tile, S_q, S_kv, smem_base, handover,
                       threadIdx.x - sdpa::kThreads);
    sdpa::cp_async_wait<0>();  // the producer leaves no copy in flight behind it
    return;
  }
#endif
  sdpa::attention_tile(Q, K, V, O, bh, m_tile, S_q, S_kv, smem_base, handover);
#endif
#if WARP_SPECIALIZED && PERSISTENT
  if (producer) sdpa::cp_async_wait<0>();
#endif
}

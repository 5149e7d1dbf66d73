// V consecutive 16-bit floating-point elements (fp16 or bf16) of a row, moved between global
// memory and registers as one access of 2 * V bytes (the address must be aligned to that), for
// bandwidth-bound row kernels. The elements stay packed two per register until they are read as
// floats, so a row kept in registers costs half a register per element.
#pragma once

#include "evo/core.cuh"
#include "evo/dtype.cuh"

namespace evo {

template <int V>
struct HalfVector {
  static_assert(V == 1 || V == 2 || V == 4 || V == 8, "V must be 1, 2, 4 or 8 (16 bytes)");
  enum : int { kWords = (V + 1) / 2 };
  unsigned w[kWords];  // element i in the lower (even i) or upper (odd i) half of w[i / 2]

  // kStreaming: the cache-streaming load (ld.global.cs, evict first), for data read once.
  template <bool kStreaming>
  __device__ __forceinline__ void load(const unsigned short* p) {
    if constexpr (V == 8) {
      const uint4* q = reinterpret_cast<const uint4*>(p);
      const uint4 t = kStreaming ? __ldcs(q) : *q;
      w[0] = t.x;
      w[1] = t.y;
      w[2] = t.z;
      w[3] = t.w;
    } else if constexpr (V == 4) {
      const uint2* q = reinterpret_cast<const uint2*>(p);
      const uint2 t = kStreaming ? __ldcs(q) : *q;
      w[0] = t.x;
      w[1] = t.y;
    } else if constexpr (V == 2) {
      const unsigned* q = reinterpret_cast<const unsigned*>(p);
      w[0] = kStreaming ? __ldcs(q) : *q;
    } else {
      w[0] = kStreaming ? __ldcs(p) : *p;
    }
  }

  // kStreaming: the cache-streaming store (st.global.cs), for output nobody reads back soon.
  template <bool kStreaming>
  __device__ __forceinline__ void store(unsigned short* p) const {
    if constexpr (V == 8) {
      const uint4 t = make_uint4(w[0], w[1], w[2], w[3]);
      uint4* q = reinterpret_cast<uint4*>(p);
      if (kStreaming) {
        __stcs(q, t);
      } else {
        *q = t;
      }
    } else if constexpr (V == 4) {
      const uint2 t = make_uint2(w[0], w[1]);
      uint2* q = reinterpret_cast<uint2*>(p);
      if (kStreaming) {
        __stcs(q, t);
      } else {
        *q = t;
      }
    } else if constexpr (V == 2) {
      unsigned* q = reinterpret_cast<unsigned*>(p);
      if (kStreaming) {
        __stcs(q, w[0]);
      } else {
        *q = w[0];
      }
    } else {
      const unsigned short h = static_cast<unsigned short>(w[0]);
      if (kStreaming) {
        __stcs(p, h);
      } else {
        *p = h;
      }
    }
  }

  __device__ __forceinline__ unsigned short bits(int i) const {
    return static_cast<unsigned short>(w[i / 2] >> (16 * (i % 2)));
  }

  // Element i as a float; DtypeCode is EVO_DTYPE_F16 or EVO_DTYPE_BF16 (evo/dtype.cuh).
  template <int DtypeCode>
  __device__ __forceinline__ float get(int i) const {
    return Dtype<DtypeCode>::to_float(bits(i));
  }

  // Elements i and i + 1 (i even) rounded from floats by Elem (evo/half_types.cuh: Fp16, Bf16);
  // with V = 1 only `lo` is kept.
  template <class Elem>
  __device__ __forceinline__ void set_pair(int i, float lo, float hi) {
    w[i / 2] = Elem::pack2(lo, hi);
  }
};

}  // namespace evo

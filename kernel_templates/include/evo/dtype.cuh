// Element types by code, for kernels whose tensors' dtypes come from the manifest: an argument
// with a "define" gets that macro set to one of these codes (`#define REF_Q EVO_DTYPE_F16`).
// Dtype<code> names the storage type and reads an element as float.
#pragma once

#include "evo/core.cuh"
#include "evo/fp8.cuh"

#define EVO_DTYPE_F16 1
#define EVO_DTYPE_BF16 2
#define EVO_DTYPE_F32 3
#define EVO_DTYPE_FP8E4M3 4
#define EVO_DTYPE_FP8E5M2 5

namespace evo {

template <int Code>
struct Dtype;

template <>
struct Dtype<EVO_DTYPE_F16> {
  typedef unsigned short Storage;
  static __device__ __forceinline__ float to_float(Storage x) { return half_to_float(x); }
};

template <>
struct Dtype<EVO_DTYPE_BF16> {
  typedef unsigned short Storage;
  // bf16 is the upper half of an fp32.
  static __device__ __forceinline__ float to_float(Storage x) {
    return __uint_as_float(static_cast<unsigned>(x) << 16);
  }
};

template <>
struct Dtype<EVO_DTYPE_F32> {
  typedef float Storage;
  static __device__ __forceinline__ float to_float(Storage x) { return x; }
};

// The fp8 conversions need sm_89; they are compiled only where a kernel reads fp8.
template <>
struct Dtype<EVO_DTYPE_FP8E4M3> {
  typedef unsigned char Storage;
  static __device__ __forceinline__ float to_float(Storage x) {
    return half_to_float(static_cast<unsigned short>(e4m3x2_to_half2(x) & 0xffffu));
  }
};

template <>
struct Dtype<EVO_DTYPE_FP8E5M2> {
  typedef unsigned char Storage;
  static __device__ __forceinline__ float to_float(Storage x) {
    return half_to_float(static_cast<unsigned short>(e5m2x2_to_half2(x) & 0xffffu));
  }
};

}  // namespace evo

#include "evaluator/device_kernels.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "common/error.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/fp8_e4m3.h"

namespace evo {
namespace {

constexpr unsigned kThreads = 256;

const char* const kSource = R"cuda(
// Counter-based generator: element i of a seed is the same value on any GPU and any grid.
__device__ __forceinline__ unsigned long long evo_mix(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float evo_normal(unsigned long long seed, unsigned long long i) {
  const unsigned long long bits = evo_mix(seed ^ evo_mix(i));
  // Two 24-bit uniforms in (0, 1] and [0, 1); Box-Muller.
  const float u1 = ((bits >> 40) + 1.0f) * (1.0f / 16777216.0f);
  const float u2 = ((bits >> 16) & 0xffffffull) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

extern "C" __global__ void evo_fill_normal_f16(unsigned short* out, unsigned long long n,
                                               unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(evo_normal(seed, i)));
    out[i] = h;
  }
}

extern "C" __global__ void evo_fill_normal_f32(float* out, unsigned long long n,
                                               unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = evo_normal(seed, i);
  }
}

// N(0,1) rounded to FP8 E4M3 (evo_f32_to_e4m3, shared with the host tests).
extern "C" __global__ void evo_fill_normal_fp8e4m3(unsigned char* out, unsigned long long n,
                                                   unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = evo_f32_to_e4m3(evo_normal(seed, i));
  }
}

// Uniform in [lo, hi): for inputs such as scales that must stay positive.
extern "C" __global__ void evo_fill_uniform_f32(float* out, unsigned long long n,
                                                unsigned long long seed, float lo, float hi) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const unsigned long long bits = evo_mix(seed ^ evo_mix(i));
    out[i] = lo + (hi - lo) * ((bits >> 40) * (1.0f / 16777216.0f));
  }
}

struct EvoCompareStats {
  double sum_abs_error;
  unsigned long long over;
  unsigned long long non_finite;
  unsigned max_abs_error_bits;  // non-negative floats order like their bit patterns
  unsigned max_abs_reference_bits;
};

__device__ __forceinline__ float evo_load(const unsigned short* p, unsigned long long i) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[i]));
  return f;
}
__device__ __forceinline__ float evo_load(const float* p, unsigned long long i) { return p[i]; }

template <typename T>
__device__ void evo_compare(const T* out, const float* ref, unsigned long long n, float atol,
                            float rtol, EvoCompareStats* stats) {
  double sum = 0;
  unsigned long long over = 0, non_finite = 0;
  float max_err = 0, max_ref = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const float o = evo_load(out, i);
    const float r = ref[i];
    const float err = fabsf(o - r);
    if (!isfinite(o)) {
      ++non_finite;
      max_err = __int_as_float(0x7f800000);
    } else {
      sum += err;
      max_err = fmaxf(max_err, err);
    }
    // Written so that a NaN anywhere counts as over.
    if (!(err <= atol + rtol * fabsf(r))) ++over;
    max_ref = fmaxf(max_ref, fabsf(r));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    over += __shfl_xor_sync(0xffffffffu, over, offset);
    non_finite += __shfl_xor_sync(0xffffffffu, non_finite, offset);
    max_err = fmaxf(max_err, __shfl_xor_sync(0xffffffffu, max_err, offset));
    max_ref = fmaxf(max_ref, __shfl_xor_sync(0xffffffffu, max_ref, offset));
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&stats->sum_abs_error, sum);
    atomicAdd(&stats->over, over);
    atomicAdd(&stats->non_finite, non_finite);
    atomicMax(&stats->max_abs_error_bits, __float_as_uint(max_err));
    atomicMax(&stats->max_abs_reference_bits, __float_as_uint(max_ref));
  }
}

extern "C" __global__ void evo_compare_f16(const unsigned short* out, const float* ref,
                                           unsigned long long n, float atol, float rtol,
                                           EvoCompareStats* stats) {
  evo_compare(out, ref, n, atol, rtol, stats);
}

extern "C" __global__ void evo_compare_f32(const float* out, const float* ref,
                                           unsigned long long n, float atol, float rtol,
                                           EvoCompareStats* stats) {
  evo_compare(out, ref, n, atol, rtol, stats);
}
)cuda";

// Host mirror of EvoCompareStats.
struct CompareStatsBuffer {
  double sum_abs_error;
  unsigned long long over;
  unsigned long long non_finite;
  unsigned max_abs_error_bits;
  unsigned max_abs_reference_bits;
};

unsigned GridFor(int64_t elements) {
  const int64_t blocks = (elements + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 4096));
}

// Launches a fill kernel of the signature (out, n, seed, extra...) over `elements` values.
void LaunchFill(CUfunction fill, const DeviceBuffer& buffer, int64_t elements, uint64_t seed,
                const std::vector<void*>& extra, const Stream& stream) {
  CUdeviceptr pointer = buffer.get();
  auto count = static_cast<unsigned long long>(elements);
  unsigned long long seed_value = seed;
  std::vector<void*> args = {&pointer, &count, &seed_value};
  args.insert(args.end(), extra.begin(), extra.end());
  LaunchShape shape;
  shape.grid[0] = GridFor(elements);
  shape.block[0] = kThreads;
  Launch(fill, shape, stream, args);
}

void CheckDtype(const std::string& dtype, bool fp8_allowed = false) {
  if (dtype != "f16" && dtype != "f32" && !(fp8_allowed && dtype == "fp8e4m3")) {
    throw Error("the gates cannot yet generate or compare dtype " + dtype);
  }
}

}  // namespace

const std::string& DeviceKernelsSource() {
  static const std::string source = E4M3DeviceSource() + kSource;
  return source;
}

DeviceKernels::DeviceKernels(Compiler& compiler, const std::string& arch) {
  const CompileResult compiled =
      compiler.Compile({DeviceKernelsSource(), "evo_gates.cu", arch, {}, {}});
  if (!compiled.ok) throw Error("evo's gate kernels do not compile:\n" + compiled.log);
  module_ = std::make_unique<Module>(compiled.cubin);
  fill_normal_f16_ = module_->Function("evo_fill_normal_f16");
  fill_normal_f32_ = module_->Function("evo_fill_normal_f32");
  fill_normal_fp8e4m3_ = module_->Function("evo_fill_normal_fp8e4m3");
  fill_uniform_f32_ = module_->Function("evo_fill_uniform_f32");
  compare_f16_ = module_->Function("evo_compare_f16");
  compare_f32_ = module_->Function("evo_compare_f32");
}

void DeviceKernels::FillNormal(const DeviceBuffer& buffer, const std::string& dtype,
                               int64_t elements, uint64_t seed, const Stream& stream) const {
  CheckDtype(dtype, true);
  const CUfunction fill = dtype == "f16"   ? fill_normal_f16_
                          : dtype == "f32" ? fill_normal_f32_
                                           : fill_normal_fp8e4m3_;
  LaunchFill(fill, buffer, elements, seed, {}, stream);
}

void DeviceKernels::FillInput(const DeviceTensor& tensor, uint64_t seed,
                              const Stream& stream) const {
  if (!tensor.uniform) {
    FillNormal(tensor.buffer, tensor.dtype, tensor.elements, seed, stream);
    return;
  }
  if (tensor.dtype != "f32") {
    throw Error("input " + tensor.name + ": a uniform fill needs dtype f32, not " + tensor.dtype);
  }
  auto lo = static_cast<float>(tensor.uniform->first);
  auto hi = static_cast<float>(tensor.uniform->second);
  LaunchFill(fill_uniform_f32_, tensor.buffer, tensor.elements, seed, {&lo, &hi}, stream);
}

void DeviceKernels::PoisonWithNaN(const DeviceBuffer& buffer, const std::string& dtype,
                                  int64_t elements, const Stream& stream) const {
  CheckDtype(dtype, true);
  const DriverApi& api = Driver();
  if (dtype == "fp8e4m3") {
    CheckCuda(api.MemsetD8Async(buffer.get(), 0x7f, static_cast<size_t>(elements), stream.get()),
              "cuMemsetD8Async");
  } else if (dtype == "f16") {
    // Two quiet fp16 NaNs per 32-bit word, and a last one for an odd count.
    const auto words = static_cast<size_t>(elements / 2);
    if (words > 0) {
      CheckCuda(api.MemsetD32Async(buffer.get(), 0x7e007e00u, words, stream.get()),
                "cuMemsetD32Async");
    }
    if (elements % 2 != 0) {
      const CUdeviceptr last = buffer.get() + static_cast<CUdeviceptr>(words * 4);
      CheckCuda(api.MemsetD8Async(last, 0x00, 1, stream.get()), "cuMemsetD8Async");
      CheckCuda(api.MemsetD8Async(last + 1, 0x7e, 1, stream.get()), "cuMemsetD8Async");
    }
  } else {
    CheckCuda(
        api.MemsetD32Async(buffer.get(), 0x7fc00000u, static_cast<size_t>(elements), stream.get()),
        "cuMemsetD32Async");
  }
}

ComparisonStats DeviceKernels::Compare(const DeviceBuffer& output, const std::string& dtype,
                                       const DeviceBuffer& reference, int64_t elements, double atol,
                                       double rtol, const Stream& stream) const {
  CheckDtype(dtype);
  DeviceBuffer stats_buffer(sizeof(CompareStatsBuffer));
  CompareStatsBuffer stats{};
  stats_buffer.Upload(&stats, sizeof(stats));
  CUdeviceptr out = output.get();
  CUdeviceptr ref = reference.get();
  CUdeviceptr stats_pointer = stats_buffer.get();
  auto count = static_cast<unsigned long long>(elements);
  auto atol_value = static_cast<float>(atol);
  auto rtol_value = static_cast<float>(rtol);
  std::vector<void*> args = {&out, &ref, &count, &atol_value, &rtol_value, &stats_pointer};
  LaunchShape shape;
  shape.grid[0] = GridFor(elements);
  shape.block[0] = kThreads;
  Launch(dtype == "f16" ? compare_f16_ : compare_f32_, shape, stream, args);
  stream.Synchronize();
  stats_buffer.Download(&stats, sizeof(stats));

  ComparisonStats result;
  result.elements = elements;
  result.over_tolerance = static_cast<int64_t>(stats.over);
  result.non_finite = static_cast<int64_t>(stats.non_finite);
  result.fraction_over_tolerance =
      elements > 0 ? static_cast<double>(stats.over) / static_cast<double>(elements) : 0;
  result.max_abs_error = std::bit_cast<float>(stats.max_abs_error_bits);
  result.max_abs_reference = std::bit_cast<float>(stats.max_abs_reference_bits);
  const int64_t finite = elements - result.non_finite;
  result.mean_abs_error = finite > 0 ? stats.sum_abs_error / static_cast<double>(finite) : 0;
  return result;
}

}  // namespace evo

#include "evaluator/device_kernels.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "common/error.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/fp8_e4m3.h"
#include "evaluator/percentile.h"

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

// 1, or `scale` for the rows (of `row_elements` each) a draw of 1 in `every` picks; every = 0
// picks none. The pick uses other bits of the seed than the values do.
__device__ __forceinline__ float evo_row_scale(unsigned long long seed, unsigned long long i,
                                               unsigned long long row_elements,
                                               unsigned long long every, float scale) {
  if (every == 0) return 1.0f;
  const unsigned long long row = i / row_elements;
  return evo_mix(~seed ^ evo_mix(row + 0x632be59bd9b4e019ull)) % every == 0 ? scale : 1.0f;
}

// The N(0,1) fills take (row_elements, every, scale): evo_row_scale's outlier rows.
#define EVO_FILL_NORMAL_ARGS                                                        \
  unsigned long long n, unsigned long long seed, unsigned long long row_elements, \
      unsigned long long every, float scale
#define EVO_NORMAL_DRAW (evo_normal(seed, i) * evo_row_scale(seed, i, row_elements, every, scale))

extern "C" __global__ void evo_fill_normal_f16(unsigned short* out, EVO_FILL_NORMAL_ARGS) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(EVO_NORMAL_DRAW));
    out[i] = h;
  }
}

// Round to nearest even into bf16 (the upper half of an fp32).
extern "C" __global__ void evo_fill_normal_bf16(unsigned short* out, EVO_FILL_NORMAL_ARGS) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const unsigned bits = __float_as_uint(EVO_NORMAL_DRAW);
    out[i] = (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
}

extern "C" __global__ void evo_fill_normal_f32(float* out, EVO_FILL_NORMAL_ARGS) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = EVO_NORMAL_DRAW;
  }
}

// N(0,1) rounded to FP8 E4M3 (evo_f32_to_e4m3, shared with the host tests).
extern "C" __global__ void evo_fill_normal_fp8e4m3(unsigned char* out, EVO_FILL_NORMAL_ARGS) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = evo_f32_to_e4m3(EVO_NORMAL_DRAW);
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

// Guard zones: byte i of a guard holds a byte of evo_mix(salt + i), which no kernel writes by
// accident; the check counts the bytes that differ.
__device__ __forceinline__ unsigned char evo_guard_byte(unsigned long long salt,
                                                        unsigned long long i) {
  return (unsigned char)(evo_mix(salt + i) >> 24);
}

extern "C" __global__ void evo_fill_guard(unsigned char* guard, unsigned long long n,
                                          unsigned long long salt) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    guard[i] = evo_guard_byte(salt, i);
  }
}

__device__ __forceinline__ void evo_add_warp(unsigned long long value, unsigned long long* total) {
  for (int offset = 16; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  if (threadIdx.x % 32 == 0 && value != 0) atomicAdd(total, value);
}

extern "C" __global__ void evo_check_guard(const unsigned char* guard, unsigned long long n,
                                           unsigned long long salt, unsigned long long* changed) {
  unsigned long long count = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    count += guard[i] != evo_guard_byte(salt, i);
  }
  evo_add_warp(count, changed);
}

// A checksum of a tensor's bytes: the sum (mod 2^64) of a mix of each 8-byte word with its
// position, so that any change to any byte changes it but for a 2^-64 chance. `data` is 8-byte
// aligned; the bytes past the last whole word are mixed one by one.
extern "C" __global__ void evo_checksum(const unsigned char* data, unsigned long long bytes,
                                        unsigned long long* sum) {
  const unsigned long long words = bytes / 8;
  const unsigned long long* w = (const unsigned long long*)data;
  unsigned long long total = 0;
  const unsigned long long start = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = start; i < words; i += step) total += evo_mix(w[i] ^ evo_mix(i));
  for (unsigned long long i = words * 8 + start; i < bytes; i += step) {
    total += evo_mix(data[i] ^ evo_mix(~i));
  }
  evo_add_warp(total, sum);
}

// Elements of 2 or 4 bytes whose bits are not all zero: scratch that every call must leave
// zeroed (self-resetting counters), where any non-zero bit pattern is left over.
extern "C" __global__ void evo_count_nonzero(const unsigned char* data, unsigned long long n,
                                             unsigned element_bytes, unsigned long long* count) {
  unsigned long long found = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    found += element_bytes == 4 ? ((const unsigned*)data)[i] != 0u
                                : ((const unsigned short*)data)[i] != 0u;
  }
  evo_add_warp(found, count);
}

// The SM clock in kHz over about `spin_ns`: SM cycles against the global timer (ns). Launched
// right after timed launches, it reads the clock the GPU ran them at.
extern "C" __global__ void evo_clock_probe(unsigned long long spin_ns, double* khz) {
  unsigned long long t0, t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  } while (t1 - t0 < spin_ns);
  const long long c1 = clock64();
  if (threadIdx.x == 0) *khz = (double)(c1 - c0) / (double)(t1 - t0) * 1e6;
}

// One stamp per SM: its cycle counter and the global timer (ns), from whichever of the CTAs
// there reads them (CTAs sharing an SM read them within a microsecond of each other). Two stamps
// around timed launches give the SM clock averaged over them, as the launches ran.
extern "C" __global__ void evo_cycle_stamp(unsigned long long* stamps, unsigned slots) {
  if (threadIdx.x != 0) return;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  const unsigned long long cycles = clock64();
  if (sm >= slots) return;
  stamps[2 * sm] = cycles;
  stamps[2 * sm + 1] = ns;
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
struct EvoBf16 {
  unsigned short bits;
};
__device__ __forceinline__ float evo_load(const EvoBf16* p, unsigned long long i) {
  return __uint_as_float((unsigned)p[i].bits << 16);
}

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

extern "C" __global__ void evo_compare_bf16(const EvoBf16* out, const float* ref,
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

// Launches a kernel of the signature (memory, n, seed, extra...) over `elements` values.
void LaunchFill(CUfunction fill, const DeviceSpan& memory, int64_t elements, uint64_t seed,
                const std::vector<void*>& extra, const Stream& stream) {
  CUdeviceptr pointer = memory.pointer;
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
  if (dtype != "f16" && dtype != "bf16" && dtype != "f32" && !(fp8_allowed && dtype == "fp8e4m3")) {
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
  fill_normal_bf16_ = module_->Function("evo_fill_normal_bf16");
  fill_normal_f32_ = module_->Function("evo_fill_normal_f32");
  fill_normal_fp8e4m3_ = module_->Function("evo_fill_normal_fp8e4m3");
  fill_uniform_f32_ = module_->Function("evo_fill_uniform_f32");
  compare_f16_ = module_->Function("evo_compare_f16");
  compare_bf16_ = module_->Function("evo_compare_bf16");
  compare_f32_ = module_->Function("evo_compare_f32");
  fill_guard_ = module_->Function("evo_fill_guard");
  check_guard_ = module_->Function("evo_check_guard");
  checksum_ = module_->Function("evo_checksum");
  count_nonzero_ = module_->Function("evo_count_nonzero");
  clock_probe_ = module_->Function("evo_clock_probe");
  cycle_stamp_ = module_->Function("evo_cycle_stamp");
}

void DeviceKernels::FillNormal(const DeviceSpan& memory, const std::string& dtype, int64_t elements,
                               uint64_t seed, const Stream& stream, const OutlierRows* outliers,
                               int64_t row_elements) const {
  CheckDtype(dtype, true);
  if (outliers != nullptr && (outliers->every < 2 || row_elements < 1)) {
    throw Error("outlier rows need every >= 2 and rows of at least one element");
  }
  const CUfunction fill = dtype == "f16"    ? fill_normal_f16_
                          : dtype == "bf16" ? fill_normal_bf16_
                          : dtype == "f32"  ? fill_normal_f32_
                                            : fill_normal_fp8e4m3_;
  auto row = static_cast<unsigned long long>(row_elements);
  auto every = static_cast<unsigned long long>(outliers != nullptr ? outliers->every : 0);
  auto scale = static_cast<float>(outliers != nullptr ? outliers->scale : 1.0);
  LaunchFill(fill, memory, elements, seed, {&row, &every, &scale}, stream);
}

void DeviceKernels::FillInput(const DeviceTensor& tensor, uint64_t seed, const Stream& stream,
                              bool with_outliers) const {
  if (!tensor.uniform) {
    const OutlierRows* outliers =
        with_outliers && tensor.outlier_rows ? &*tensor.outlier_rows : nullptr;
    FillNormal(tensor.data(), tensor.dtype, tensor.elements, seed, stream, outliers,
               tensor.row_elements);
    return;
  }
  if (tensor.dtype != "f32") {
    throw Error("input " + tensor.name + ": a uniform fill needs dtype f32, not " + tensor.dtype);
  }
  auto lo = static_cast<float>(tensor.uniform->first);
  auto hi = static_cast<float>(tensor.uniform->second);
  LaunchFill(fill_uniform_f32_, tensor.data(), tensor.elements, seed, {&lo, &hi}, stream);
}

void DeviceKernels::PoisonWithNaN(const DeviceSpan& memory, const std::string& dtype,
                                  int64_t elements, const Stream& stream) const {
  CheckDtype(dtype, true);
  const DriverApi& api = Driver();
  const CUdeviceptr start = memory.pointer;
  if (dtype == "fp8e4m3") {
    CheckCuda(api.MemsetD8Async(start, 0x7f, static_cast<size_t>(elements), stream.get()),
              "cuMemsetD8Async");
  } else if (dtype == "f16" || dtype == "bf16") {
    // Two quiet NaNs per 32-bit word, and a last one for an odd count (little-endian halves).
    const unsigned short nan = dtype == "f16" ? 0x7e00u : 0x7fc0u;
    const auto words = static_cast<size_t>(elements / 2);
    if (words > 0) {
      CheckCuda(api.MemsetD32Async(start, (unsigned{nan} << 16) | nan, words, stream.get()),
                "cuMemsetD32Async");
    }
    if (elements % 2 != 0) {
      const CUdeviceptr last = start + static_cast<CUdeviceptr>(words * 4);
      CheckCuda(api.MemsetD8Async(last, nan & 0xffu, 1, stream.get()), "cuMemsetD8Async");
      CheckCuda(api.MemsetD8Async(last + 1, nan >> 8, 1, stream.get()), "cuMemsetD8Async");
    }
  } else {
    CheckCuda(api.MemsetD32Async(start, 0x7fc00000u, static_cast<size_t>(elements), stream.get()),
              "cuMemsetD32Async");
  }
}

ComparisonStats DeviceKernels::Compare(const DeviceSpan& output, const std::string& dtype,
                                       const DeviceSpan& reference, int64_t elements, double atol,
                                       double rtol, const Stream& stream) const {
  CheckDtype(dtype);
  DeviceBuffer stats_buffer(sizeof(CompareStatsBuffer));
  CompareStatsBuffer stats{};
  stats_buffer.Upload(&stats, sizeof(stats));
  CUdeviceptr out = output.pointer;
  CUdeviceptr ref = reference.pointer;
  CUdeviceptr stats_pointer = stats_buffer.get();
  auto count = static_cast<unsigned long long>(elements);
  auto atol_value = static_cast<float>(atol);
  auto rtol_value = static_cast<float>(rtol);
  std::vector<void*> args = {&out, &ref, &count, &atol_value, &rtol_value, &stats_pointer};
  LaunchShape shape;
  shape.grid[0] = GridFor(elements);
  shape.block[0] = kThreads;
  const CUfunction compare = dtype == "f16"    ? compare_f16_
                             : dtype == "bf16" ? compare_bf16_
                                               : compare_f32_;
  Launch(compare, shape, stream, args);
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

namespace {

// Distinct patterns before and after a tensor, so that a guard copied onto the other fails.
uint64_t GuardSalt(GuardSide side) {
  return side == GuardSide::kBefore ? 0x6775617264ull : 0x7461696cull;
}

// Launches `function` (memory, n, salt or nothing, counter) over `memory`'s bytes.
void LaunchOverBytes(CUfunction function, const DeviceSpan& memory, std::vector<void*> extra,
                     const Stream& stream) {
  CUdeviceptr pointer = memory.pointer;
  auto count = static_cast<unsigned long long>(memory.bytes);
  std::vector<void*> args = {&pointer, &count};
  args.insert(args.end(), extra.begin(), extra.end());
  LaunchShape shape;
  shape.grid[0] = GridFor(static_cast<int64_t>(std::max<size_t>(memory.bytes / 8, 1)));
  shape.block[0] = kThreads;
  Launch(function, shape, stream, args);
}

// Counters on the device, zeroed, read back after a stream's work with one copy.
class DeviceCounters {
 public:
  DeviceCounters(size_t count, const Stream& stream)
      : buffer_(std::max<size_t>(count, 1) * 8), count_(count) {
    CheckCuda(
        Driver().MemsetD32Async(buffer_.get(), 0, std::max<size_t>(count, 1) * 2, stream.get()),
        "cuMemsetD32Async");
  }
  CUdeviceptr at(size_t i) const { return buffer_.get() + i * 8; }
  std::vector<uint64_t> Read(const Stream& stream) const {
    stream.Synchronize();
    std::vector<uint64_t> values(count_);
    if (count_ > 0) buffer_.Download(values.data(), count_ * 8);
    return values;
  }

 private:
  DeviceBuffer buffer_;
  size_t count_;
};

}  // namespace

void DeviceKernels::FillGuards(const std::vector<DeviceTensor*>& tensors,
                               const Stream& stream) const {
  for (const DeviceTensor* tensor : tensors) {
    for (GuardSide side : {GuardSide::kBefore, GuardSide::kAfter}) {
      unsigned long long salt = GuardSalt(side);
      LaunchOverBytes(fill_guard_, tensor->guard(side), {&salt}, stream);
    }
  }
}

std::vector<std::pair<uint64_t, uint64_t>> DeviceKernels::ChangedGuardBytes(
    const std::vector<DeviceTensor*>& tensors, const Stream& stream) const {
  const DeviceCounters counters(tensors.size() * 2, stream);
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (GuardSide side : {GuardSide::kBefore, GuardSide::kAfter}) {
      unsigned long long salt = GuardSalt(side);
      CUdeviceptr counter = counters.at(2 * t + (side == GuardSide::kAfter ? 1 : 0));
      LaunchOverBytes(check_guard_, tensors[t]->guard(side), {&salt, &counter}, stream);
    }
  }
  const std::vector<uint64_t> counts = counters.Read(stream);
  std::vector<std::pair<uint64_t, uint64_t>> changed;
  for (size_t t = 0; t < tensors.size(); ++t)
    changed.emplace_back(counts[2 * t], counts[2 * t + 1]);
  return changed;
}

std::vector<uint64_t> DeviceKernels::Checksums(const std::vector<DeviceTensor*>& tensors,
                                               const Stream& stream) const {
  const DeviceCounters sums(tensors.size(), stream);
  for (size_t t = 0; t < tensors.size(); ++t) {
    CUdeviceptr sum = sums.at(t);
    LaunchOverBytes(checksum_, tensors[t]->data(), {&sum}, stream);
  }
  return sums.Read(stream);
}

std::vector<uint64_t> DeviceKernels::NonZeroElements(const std::vector<DeviceTensor*>& tensors,
                                                     const Stream& stream) const {
  const DeviceCounters counts(tensors.size(), stream);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const DeviceTensor& tensor = *tensors[t];
    auto element_bytes = static_cast<unsigned>(DtypeBytes(tensor.dtype));
    if (element_bytes != 2 && element_bytes != 4) {
      throw Error("the gates cannot yet count the non-zero elements of " + tensor.name +
                  " (dtype " + tensor.dtype + ")");
    }
    CUdeviceptr pointer = tensor.data().pointer;
    auto elements = static_cast<unsigned long long>(tensor.elements);
    CUdeviceptr count = counts.at(t);
    std::vector<void*> args = {&pointer, &elements, &element_bytes, &count};
    LaunchShape shape;
    shape.grid[0] = GridFor(tensor.elements);
    shape.block[0] = kThreads;
    Launch(count_nonzero_, shape, stream, args);
  }
  return counts.Read(stream);
}

void DeviceKernels::EnqueueClockProbe(const DeviceBuffer& result, double spin_us,
                                      const Stream& stream) const {
  CUdeviceptr pointer = result.get();
  auto spin_ns = static_cast<unsigned long long>(spin_us * 1000);
  std::vector<void*> args = {&spin_ns, &pointer};
  LaunchShape shape;
  shape.block[0] = 32;
  Launch(clock_probe_, shape, stream, args);
}

double DeviceKernels::ReadClockMhz(const DeviceBuffer& result) {
  double khz = 0;
  result.Download(&khz, sizeof(khz));
  return khz / 1000;
}

CycleStamps::CycleStamps() : buffer_(kSlots * 2 * sizeof(uint64_t)) {}

void CycleStamps::Clear(const Stream& stream) const {
  CheckCuda(Driver().MemsetD8Async(buffer_.get(), 0, buffer_.bytes(), stream.get()),
            "cuMemsetD8Async");
}

std::vector<uint64_t> CycleStamps::Read() const {
  std::vector<uint64_t> stamps(kSlots * 2);
  buffer_.Download(stamps.data(), stamps.size() * sizeof(uint64_t));
  return stamps;
}

void DeviceKernels::EnqueueCycleStamp(const CycleStamps& stamps, int sm_count,
                                      const Stream& stream) const {
  CUdeviceptr pointer = stamps.buffer().get();
  auto slots = static_cast<unsigned>(CycleStamps::kSlots);
  std::vector<void*> args = {&pointer, &slots};
  LaunchShape shape;
  // A few CTAs per SM, so that every SM gets one whatever the block scheduler does.
  shape.grid[0] = static_cast<unsigned>(std::max(sm_count, 1) * 4);
  shape.block[0] = 32;
  Launch(cycle_stamp_, shape, stream, args);
}

double MeanClockMhz(const std::vector<uint64_t>& before, const std::vector<uint64_t>& after) {
  std::vector<double> mhz;
  for (size_t sm = 0; sm + 1 < std::min(before.size(), after.size()); sm += 2) {
    const uint64_t c0 = before[sm], t0 = before[sm + 1], c1 = after[sm], t1 = after[sm + 1];
    // An SM no CTA reached keeps its zeros; a counter that did not advance is no figure.
    if (t0 == 0 || t1 == 0 || t1 <= t0 || c1 <= c0) continue;
    mhz.push_back(static_cast<double>(c1 - c0) / static_cast<double>(t1 - t0) * 1000.0);
  }
  if (mhz.empty()) return 0;
  std::sort(mhz.begin(), mhz.end());
  return Percentile(mhz, 0.5);
}

}  // namespace evo

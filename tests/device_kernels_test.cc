#include "evaluator/device_kernels.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "common/half.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/fp8_e4m3.h"
#include "evaluator/nvrtc_compiler.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("the gates' own kernels compile for every target", "[nvrtc]") {
  NvrtcCompiler compiler;
  for (const char* arch : {"sm_80", "sm_89", "sm_90"}) {
    const CompileResult compiled =
        compiler.Compile({DeviceKernelsSource(), "evo_gates.cu", arch, {}, {}});
    INFO(compiled.log);
    REQUIRE(compiled.ok);
    for (const char* entry :
         {"evo_fill_normal_f16", "evo_fill_normal_f32", "evo_fill_normal_fp8e4m3",
          "evo_fill_uniform_f32", "evo_compare_f16", "evo_compare_f32", "evo_cycle_stamp"}) {
      CHECK(FindKernel(compiled.kernels, entry) != nullptr);
    }
  }
}

// GPU 0 with the gate kernels compiled for it, for the tests that run them.
struct GateKernelsOnGpu {
  Context context{0};
  NvrtcCompiler compiler;
  DeviceKernels kernels{compiler, QueryDevices().at(0).arch()};
  Stream stream;
};

TEST_CASE("gate kernels: normal inputs, NaN poison and the comparison", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const GateKernelsOnGpu gpu;
  const DeviceKernels& kernels = gpu.kernels;
  const Stream& stream = gpu.stream;
  const int64_t n = 1 << 20;

  DeviceBuffer f16(n * 2);
  kernels.FillNormal(f16.span(), "f16", n, 42, stream);
  stream.Synchronize();
  std::vector<uint16_t> halves(n);
  f16.Download(halves.data(), f16.bytes());
  double sum = 0;
  double sum_sq = 0;
  for (uint16_t h : halves) {
    const double x = HalfToFloat(h);
    sum += x;
    sum_sq += x * x;
  }
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(std::abs(sum_sq / n - 1.0) < 0.01);

  DeviceBuffer again(n * 2);
  kernels.FillNormal(again.span(), "f16", n, 42, stream);
  stream.Synchronize();
  std::vector<uint16_t> repeated(n);
  again.Download(repeated.data(), again.bytes());
  CHECK(repeated == halves);

  // A float copy of the f16 tensor is an exact reference for it.
  std::vector<float> floats(n);
  for (int64_t i = 0; i < n; ++i) floats[i] = HalfToFloat(halves[i]);
  DeviceBuffer reference(n * 4);
  reference.Upload(floats.data(), reference.bytes());
  const ComparisonStats same =
      kernels.Compare(f16.span(), "f16", reference.span(), n, 0, 0, stream);
  CHECK(same.passed());
  CHECK(same.max_abs_error == 0);
  CHECK(same.max_abs_reference > 3.0);

  // Perturb exactly 3 elements beyond atol.
  for (int64_t i : {int64_t{0}, n / 2, n - 1}) floats[i] += 0.5f;
  reference.Upload(floats.data(), reference.bytes());
  const ComparisonStats off =
      kernels.Compare(f16.span(), "f16", reference.span(), n, 0.1, 0, stream);
  CHECK_FALSE(off.passed());
  CHECK(off.over_tolerance == 3);
  CHECK(off.max_abs_error == Approx(0.5).margin(1e-3));
  CHECK(off.non_finite == 0);

  // An odd count leaves the last half poisoned too.
  kernels.PoisonWithNaN(f16.span(), "f16", n - 1, stream);
  const ComparisonStats poisoned =
      kernels.Compare(f16.span(), "f16", reference.span(), n, 1e9, 1e9, stream);
  CHECK(poisoned.non_finite == n - 1);
  CHECK(poisoned.over_tolerance == n - 1);
  CHECK(std::isinf(poisoned.max_abs_error));
  CHECK_FALSE(poisoned.passed());
}

TEST_CASE("gate kernels: fp8 inputs are the host's rounding of the f32 draws; uniform fills",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const GateKernelsOnGpu gpu;
  const DeviceKernels& kernels = gpu.kernels;
  const Stream& stream = gpu.stream;
  const int64_t n = 1 << 20;
  DeviceBuffer f32(n * 4);
  DeviceBuffer fp8(n);
  kernels.FillNormal(f32.span(), "f32", n, 7, stream);
  kernels.FillNormal(fp8.span(), "fp8e4m3", n, 7, stream);
  stream.Synchronize();
  std::vector<float> floats(n);
  std::vector<uint8_t> bytes(n);
  f32.Download(floats.data(), f32.bytes());
  fp8.Download(bytes.data(), fp8.bytes());
  int64_t differing = 0;
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    differing += bytes[i] != FloatToE4M3(floats[i]) ? 1 : 0;
    sum_sq += static_cast<double>(E4M3ToFloat(bytes[i])) * E4M3ToFloat(bytes[i]);
  }
  CHECK(differing == 0);
  CHECK(std::abs(sum_sq / n - 1.0) < 0.02);

  DeviceTensor scales;
  scales.name = "scales";
  scales.dtype = "f32";
  scales.elements = n;
  scales.uniform = std::make_pair(0.5, 2.0);
  scales.allocation = DeviceBuffer(kGuardBytes + n * 4 + kGuardBytes);
  kernels.FillInput(scales, 3, stream);
  stream.Synchronize();
  scales.data().Download(floats.data(), scales.bytes());
  const auto [lowest, highest] = std::minmax_element(floats.begin(), floats.end());
  CHECK(*lowest >= 0.5f);
  CHECK(*lowest < 0.51f);
  CHECK(*highest < 2.0f);
  CHECK(*highest > 1.99f);
}

TEST_CASE("gate kernels: outlier rows are whole rows of the plain draws times the scale", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const GateKernelsOnGpu gpu;
  const DeviceKernels& kernels = gpu.kernels;
  const Stream& stream = gpu.stream;
  const int64_t row = 96;  // not a power of two: a row boundary is not a word boundary
  const int64_t rows = 20000;
  const int64_t n = row * rows;
  DeviceTensor keys;
  keys.name = "K";
  keys.dtype = "f32";
  keys.elements = n;
  keys.row_elements = row;
  keys.outlier_rows = OutlierRows{32, 12.0};
  keys.allocation = DeviceBuffer(kGuardBytes + n * 4 + kGuardBytes);
  std::vector<float> plain(n);
  std::vector<float> outlying(n);
  kernels.FillInput(keys, 11, stream);  // without outliers: the timed seed's fill
  stream.Synchronize();
  keys.data().Download(plain.data(), keys.bytes());
  kernels.FillInput(keys, 11, stream, true);
  stream.Synchronize();
  keys.data().Download(outlying.data(), keys.bytes());
  int64_t scaled_rows = 0;
  int64_t mixed_rows = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t same = 0;
    int64_t scaled = 0;
    for (int64_t i = r * row; i < (r + 1) * row; ++i) {
      same += outlying[i] == plain[i] ? 1 : 0;
      scaled += outlying[i] == plain[i] * 12.0f ? 1 : 0;
    }
    scaled_rows += scaled == row ? 1 : 0;
    mixed_rows += (same == row || scaled == row) ? 0 : 1;
  }
  CHECK(mixed_rows == 0);
  // 1 in 32 of 20000 rows: 625 expected, sd 25.
  CHECK(scaled_rows > 500);
  CHECK(scaled_rows < 750);

  // Another seed picks other rows; the f16 fill rounds the scaled draw once, as the host does.
  const OutlierRows outliers{32, 12.0};
  DeviceBuffer halves(n * 2);
  kernels.FillNormal(halves.span(), "f16", n, 12, stream, &outliers, row);
  DeviceBuffer floats(n * 4);
  kernels.FillNormal(floats.span(), "f32", n, 12, stream, &outliers, row);
  DeviceBuffer unscaled(n * 4);
  kernels.FillNormal(unscaled.span(), "f32", n, 12, stream);
  stream.Synchronize();
  std::vector<uint16_t> half_bits(n);
  std::vector<float> other(n);
  std::vector<float> other_plain(n);
  halves.Download(half_bits.data(), halves.bytes());
  floats.Download(other.data(), floats.bytes());
  unscaled.Download(other_plain.data(), unscaled.bytes());
  int64_t rounding_misses = 0;
  for (int64_t i = 0; i < n; ++i) {
    rounding_misses += half_bits[i] != FloatToHalf(other[i]) ? 1 : 0;
  }
  CHECK(rounding_misses == 0);
  int64_t rows_in_both = 0;
  int64_t rows_in_other = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = r * row;
    const bool here = outlying[i] != plain[i];
    const bool there = other[i] != other_plain[i];
    rows_in_other += there ? 1 : 0;
    rows_in_both += here && there ? 1 : 0;
  }
  CHECK(rows_in_other > 500);
  CHECK(rows_in_both < 60);  // independent picks: about 20 rows
}

TEST_CASE("gate kernels: guard zones count the bytes that changed on each side; checksums move",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  Context context(0);
  const DeviceInfo device = QueryDevices().at(0);
  NvrtcCompiler compiler;
  const DeviceKernels kernels(compiler, device.arch());
  Stream stream;
  DeviceTensor tensor;
  tensor.name = "T";
  tensor.dtype = "f16";
  tensor.elements = 1001;  // an odd number of halves: the guard after starts mid-word
  tensor.allocation = DeviceBuffer(kGuardBytes + 2016 + kGuardBytes);
  std::vector<DeviceTensor*> tensors = {&tensor};
  kernels.FillGuards(tensors, stream);
  kernels.FillNormal(tensor.data(), tensor.dtype, tensor.elements, 5, stream);
  CHECK(kernels.ChangedGuardBytes(tensors, stream) ==
        std::vector<std::pair<uint64_t, uint64_t>>{{0, 0}});
  const std::vector<uint64_t> sums = kernels.Checksums(tensors, stream);
  CHECK(kernels.Checksums(tensors, stream) == sums);

  // One byte right after the tensor, three right before it.
  unsigned char after;
  const DeviceSpan first_after{tensor.data().pointer + tensor.bytes(), 1};
  first_after.Download(&after, 1);
  after ^= 0x5a;
  first_after.Upload(&after, 1);
  unsigned char before[3];
  DeviceSpan{tensor.data().pointer - 3, 3}.Download(before, 3);
  for (unsigned char& byte : before) byte ^= 0xff;
  DeviceSpan{tensor.data().pointer - 3, 3}.Upload(before, 3);
  const auto changed = kernels.ChangedGuardBytes(tensors, stream);
  CHECK(changed[0].first == 3);
  CHECK(changed[0].second == 1);
  kernels.FillGuards(tensors, stream);
  CHECK(kernels.ChangedGuardBytes(tensors, stream)[0] == std::pair<uint64_t, uint64_t>{0, 0});

  // One bit of the last (odd) half, then back.
  unsigned char last;
  const DeviceSpan last_byte{tensor.data().pointer + tensor.bytes() - 1, 1};
  last_byte.Download(&last, 1);
  last ^= 0x01;
  last_byte.Upload(&last, 1);
  CHECK(kernels.Checksums(tensors, stream) != sums);
  last ^= 0x01;
  last_byte.Upload(&last, 1);
  CHECK(kernels.Checksums(tensors, stream) == sums);
}

}  // namespace
}  // namespace evo

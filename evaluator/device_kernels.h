#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "evaluator/compiler.h"
#include "evaluator/cuda_objects.h"
#include "evaluator/kernel_arguments.h"

namespace evo {

// What the correctness gate measures of one output against its reference.
struct ComparisonStats {
  double max_abs_error = 0;  // +inf when any element is not finite
  double mean_abs_error = 0;
  double fraction_over_tolerance = 0;  // elements with !(|out - ref| <= atol + rtol * |ref|)
  int64_t elements = 0;
  int64_t over_tolerance = 0;
  int64_t non_finite = 0;  // NaN or Inf in the output (unwritten poisoned elements among them)
  double max_abs_reference = 0;

  bool passed() const { return elements > 0 && over_tolerance == 0 && non_finite == 0; }
};

// Where evo_cycle_stamp writes: each SM's cycle counter and the global timer, one pair per SM.
class CycleStamps {
 public:
  static constexpr size_t kSlots = 1024;  // past any SM id a GPU has
  CycleStamps();
  // Zeroes the stamps in stream order, so that an SM no CTA reaches reads as absent.
  void Clear(const Stream& stream) const;
  // Every slot's (cycles, ns) pair, flattened; read once the stream has passed the stamp.
  std::vector<uint64_t> Read() const;
  const DeviceBuffer& buffer() const { return buffer_; }

 private:
  DeviceBuffer buffer_;
};

// The SM clock in MHz averaged between two stamps (CycleStamps::Read of each): the median over
// the SMs stamped in both of their cycles over the global timer's ns. 0 when no SM was stamped
// in both, or no time passed between them.
double MeanClockMhz(const std::vector<uint64_t>& before, const std::vector<uint64_t>& after);

// evo's own GPU helpers for the gates: N(0,1) (or uniform) inputs from a counter-based generator
// (the same seed gives the same tensor on any GPU), and the output comparison, reduced on the GPU
// so that large outputs never cross PCIe. Compiled once per worker for the device's arch.
class DeviceKernels {
 public:
  DeviceKernels(Compiler& compiler, const std::string& arch);

  // Fills `elements` values of dtype "f16", "bf16", "f32" or "fp8e4m3" at `memory` with N(0,1)
  // draws (rounded to nearest even in the dtype). With `outliers`, the draws of one row (of
  // `row_elements` values) in outliers->every, picked by the seed, are multiplied by
  // outliers->scale before rounding.
  void FillNormal(const DeviceSpan& memory, const std::string& dtype, int64_t elements,
                  uint64_t seed, const Stream& stream, const OutlierRows* outliers = nullptr,
                  int64_t row_elements = 1) const;
  // An input as its manifest asks: N(0,1), or uniform in [lo, hi) where it says "uniform";
  // with its outlier rows scaled when `with_outliers` (the correctness gate's seeds but the last).
  void FillInput(const DeviceTensor& tensor, uint64_t seed, const Stream& stream,
                 bool with_outliers = false) const;
  // Writes NaN into every element, so that an element the kernel never writes fails the gate.
  void PoisonWithNaN(const DeviceSpan& memory, const std::string& dtype, int64_t elements,
                     const Stream& stream) const;
  // Compares `output` (dtype "f16" or "f32") with an f32 reference.
  ComparisonStats Compare(const DeviceSpan& output, const std::string& dtype,
                          const DeviceSpan& reference, int64_t elements, double atol, double rtol,
                          const Stream& stream) const;

  // Writes the guard pattern around each tensor (kernel_arguments.h: kGuardBytes each side).
  void FillGuards(const std::vector<DeviceTensor*>& tensors, const Stream& stream) const;
  // For each tensor, the bytes of its guards that no longer hold the pattern: before, after.
  std::vector<std::pair<uint64_t, uint64_t>> ChangedGuardBytes(
      const std::vector<DeviceTensor*>& tensors, const Stream& stream) const;
  // A checksum of each tensor's bytes (equal checksums: unchanged, but for a 2^-64 chance).
  std::vector<uint64_t> Checksums(const std::vector<DeviceTensor*>& tensors,
                                  const Stream& stream) const;
  // For each tensor (of a 2- or 4-byte dtype), its elements whose bits are not all zero.
  std::vector<uint64_t> NonZeroElements(const std::vector<DeviceTensor*>& tensors,
                                        const Stream& stream) const;

  // Enqueues a kernel that measures the SM clock for about `spin_us` into `result` (8 bytes);
  // ReadClockMhz reads it once the stream has passed it.
  void EnqueueClockProbe(const DeviceBuffer& result, double spin_us, const Stream& stream) const;
  static double ReadClockMhz(const DeviceBuffer& result);
  // Enqueues a stamp of every SM's cycle counter and the global timer into `stamps`; a stamp
  // before timed launches and one after them give the clock they ran at (MeanClockMhz).
  void EnqueueCycleStamp(const CycleStamps& stamps, int sm_count, const Stream& stream) const;

 private:
  std::unique_ptr<Module> module_;
  CUfunction fill_normal_f16_ = nullptr;
  CUfunction fill_normal_bf16_ = nullptr;
  CUfunction fill_normal_f32_ = nullptr;
  CUfunction fill_normal_fp8e4m3_ = nullptr;
  CUfunction fill_uniform_f32_ = nullptr;
  CUfunction compare_f16_ = nullptr;
  CUfunction compare_bf16_ = nullptr;
  CUfunction compare_f32_ = nullptr;
  CUfunction fill_guard_ = nullptr;
  CUfunction check_guard_ = nullptr;
  CUfunction checksum_ = nullptr;
  CUfunction count_nonzero_ = nullptr;
  CUfunction clock_probe_ = nullptr;
  CUfunction cycle_stamp_ = nullptr;
};

// The CUDA source of the helpers, for tests that compile it on machines without a GPU.
const std::string& DeviceKernelsSource();

}  // namespace evo

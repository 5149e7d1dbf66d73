#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "evaluator/cuda_objects.h"
#include "kernel_templates/manifest.h"
#include "kernel_templates/tensor_map.h"

namespace evo {

int64_t DtypeBytes(const std::string& dtype);

// Bytes on each side of every tensor the gates allocate, filled with a pattern no kernel writes
// and checked after launches: a write just outside a tensor lands there, not in a neighbour or
// in unchecked padding.
inline constexpr size_t kGuardBytes = 4096;

enum class GuardSide { kBefore, kAfter };

struct DeviceTensor {
  std::string name;
  std::string dtype;
  int64_t elements = 0;
  KernelArgSpec::Kind kind = KernelArgSpec::Kind::kInput;
  std::optional<std::pair<double, double>> uniform;  // the manifest's fill, when not N(0,1)
  std::optional<OutlierRows> outlier_rows;           // rows the correctness gate scales up
  int64_t row_elements = 1;                          // the innermost extent: a row's elements
  ScratchZero zero = ScratchZero::kNever;            // scratch only
  // [guard before][the tensor's bytes, rounded up to 16][guard after]
  DeviceBuffer allocation;

  size_t bytes() const { return static_cast<size_t>(elements * DtypeBytes(dtype)); }
  DeviceSpan data() const { return {allocation.get() + kGuardBytes, bytes()}; }
  DeviceSpan guard(GuardSide side) const;
};

// The extents of tensor `arg` (outermost first) for these bindings (knobs, problem, arch) on a
// device of `sm_count` multiprocessors: a scratch shape may use NUM_SMS, bound here to
// `sm_count`, the figure ResolveLaunch gives the grid. Throws evo::Error where an extent cannot
// be evaluated, or needs NUM_SMS and `sm_count` is not positive (no device to ask).
std::vector<int64_t> TensorShape(const KernelArgSpec& arg, const Bindings& bindings, int sm_count);

// The kernels of a candidate's call for these bindings (knobs and problem), in launch order: the
// first always, the others where their `when` holds.
std::vector<const KernelSpec*> LaunchedKernels(const Manifest& manifest, const Bindings& bindings);

// The device tensors and scalar values of one call's arguments on one problem, ready for
// cuLaunchKernel: a tensor (input, output or scratch) of one name is one allocation that every
// kernel of the call gets; scalars and tensor maps belong to their kernel. Inputs can be shared
// with another call's arguments by name, so the candidate and its reference read the very same
// bytes. Tensors are sized by TensorShape on a device of `sm_count` multiprocessors (the one
// the call is launched on).
class KernelArguments {
 public:
  // `kernels` are launched in this order; `share_inputs_with` must hold every input they read.
  KernelArguments(const std::vector<const KernelSpec*>& kernels, const Bindings& bindings,
                  int sm_count, const KernelArguments* share_inputs_with = nullptr);
  // A call of one kernel (the reference).
  KernelArguments(const KernelSpec& spec, const Bindings& bindings, int sm_count,
                  const KernelArguments* share_inputs_with = nullptr)
      : KernelArguments(std::vector<const KernelSpec*>{&spec}, bindings, sm_count,
                        share_inputs_with) {}
  KernelArguments(const KernelArguments&) = delete;
  KernelArguments& operator=(const KernelArguments&) = delete;

  size_t kernel_count() const { return pointers_.size(); }
  // The arguments of the call's kernel `kernel`, in its manifest order.
  std::vector<void*>& pointers(size_t kernel = 0) { return pointers_.at(kernel); }
  // The call's tensors, each once, in the order the kernels first name them (shared ones
  // included): those read, written, used as scratch, and all of them.
  std::vector<DeviceTensor*> Inputs() const;
  std::vector<DeviceTensor*> Outputs() const;
  std::vector<DeviceTensor*> Scratch() const;
  std::vector<DeviceTensor*> Tensors() const;
  DeviceTensor& Tensor(const std::string& name) const;
  // A tensor that outlives these arguments (the reference outputs the gates keep).
  std::shared_ptr<DeviceTensor> Shared(const std::string& name) const;

 private:
  std::vector<DeviceTensor*> OfKind(KernelArgSpec::Kind kind) const;

  std::vector<std::shared_ptr<DeviceTensor>> tensors_;  // each once, in order of first use
  // Each tensor's address, in a slot that stays put for the launches (parallel to tensors_).
  std::vector<std::unique_ptr<CUdeviceptr>> pointer_slots_;
  // Scalars are kept in 8-byte slots whose addresses stay put for the launches.
  std::vector<std::unique_ptr<uint64_t>> scalar_slots_;
  std::vector<std::unique_ptr<CUtensorMap>> map_slots_;
  std::vector<std::vector<void*>> pointers_;  // per kernel
};

// Encodes `map` for the tensor at `address` (cuTensorMapEncodeTiled). Throws CudaError when the
// driver refuses it.
void EncodeTensorMap(const TensorMapDescription& map, CUdeviceptr address, CUtensorMap* out);

// CUDA's limits on a launch, per axis x, y, z: the compile gate checks a configuration's launch
// against them before compiling, and ResolveLaunch again with the device's figures bound.
inline constexpr std::array<int64_t, 3> kMaxBlockDim = {1024, 1024, 64};
inline constexpr std::array<int64_t, 3> kMaxGridDim = {2147483647, 65535, 65535};
// CTAs per thread-block cluster that every sm_90 part runs (more needs a non-portable opt-in).
inline constexpr int64_t kMaxClusterCtas = 8;

// Grid, block and dynamic shared memory of `spec` for these bindings; NUM_SMS and CTAS_PER_SM
// are bound here from the device and the compiled function's occupancy.
LaunchShape ResolveLaunch(const KernelSpec& spec, Bindings bindings, CUfunction function,
                          int sm_count);

}  // namespace evo

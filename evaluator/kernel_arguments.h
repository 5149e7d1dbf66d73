#pragma once

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
  // [guard before][the tensor's bytes, rounded up to 16][guard after]
  DeviceBuffer allocation;

  size_t bytes() const { return static_cast<size_t>(elements * DtypeBytes(dtype)); }
  DeviceSpan data() const { return {allocation.get() + kGuardBytes, bytes()}; }
  DeviceSpan guard(GuardSide side) const;
};

// The device tensors and scalar values of one kernel's arguments on one problem, in the
// manifest's order, ready for cuLaunchKernel. Inputs can be shared with another kernel's
// arguments by name, so the candidate and its reference read the very same bytes.
class KernelArguments {
 public:
  KernelArguments(const KernelSpec& spec, const Bindings& bindings,
                  const KernelArguments* share_inputs_with = nullptr);
  KernelArguments(const KernelArguments&) = delete;
  KernelArguments& operator=(const KernelArguments&) = delete;

  std::vector<void*>& pointers() { return pointers_; }
  // Tensors this kernel reads (shared ones included) and writes.
  std::vector<DeviceTensor*> Inputs() const;
  std::vector<DeviceTensor*> Outputs() const;
  DeviceTensor& Tensor(const std::string& name) const;
  // Every tensor of the arguments, its own and shared ones.
  std::vector<DeviceTensor*> Tensors() const;
  // A tensor that outlives these arguments (the reference outputs the gates keep).
  std::shared_ptr<DeviceTensor> Shared(const std::string& name) const;

 private:
  std::vector<std::shared_ptr<DeviceTensor>> tensors_;  // argument order; null for scalars
  // Scalars are kept in 8-byte slots whose addresses stay put for the launch.
  std::vector<std::unique_ptr<uint64_t>> scalar_slots_;
  std::vector<std::unique_ptr<CUdeviceptr>> pointer_slots_;
  std::vector<std::unique_ptr<CUtensorMap>> map_slots_;
  std::vector<void*> pointers_;
};

// Encodes `map` for the tensor at `address` (cuTensorMapEncodeTiled). Throws CudaError when the
// driver refuses it.
void EncodeTensorMap(const TensorMapDescription& map, CUdeviceptr address, CUtensorMap* out);

// Grid, block and dynamic shared memory of `spec` for these bindings; NUM_SMS and CTAS_PER_SM
// are bound here from the device and the compiled function's occupancy.
LaunchShape ResolveLaunch(const KernelSpec& spec, Bindings bindings, CUfunction function,
                          int sm_count);

}  // namespace evo

#include "evaluator/kernel_arguments.h"

#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "common/error.h"
#include "evaluator/cuda_driver.h"

namespace evo {

int64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "i64") return 8;
  if (dtype == "fp8e4m3" || dtype == "fp8e5m2") return 1;
  throw Error("unknown dtype " + dtype);
}

namespace {

// The tensor's bytes rounded up to 16, so that the guard after it starts aligned.
size_t GuardedBytes(size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

DeviceSpan DeviceTensor::guard(GuardSide side) const {
  if (side == GuardSide::kBefore) return {allocation.get(), kGuardBytes};
  // The padding that rounds the tensor up to 16 bytes belongs to the guard after it.
  return {allocation.get() + kGuardBytes + bytes(), kGuardBytes + GuardedBytes(bytes()) - bytes()};
}

void EncodeTensorMap(const TensorMapDescription& map, CUdeviceptr address, CUtensorMap* out) {
  const auto data_type = map.dtype == "f16"    ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                         : map.dtype == "bf16" ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                         : map.dtype == "f32"  ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                               : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const auto swizzle = map.swizzle == "32B"    ? CU_TENSOR_MAP_SWIZZLE_32B
                       : map.swizzle == "64B"  ? CU_TENSOR_MAP_SWIZZLE_64B
                       : map.swizzle == "128B" ? CU_TENSOR_MAP_SWIZZLE_128B
                                               : CU_TENSOR_MAP_SWIZZLE_NONE;
  const auto interleave = map.interleave == "16B"   ? CU_TENSOR_MAP_INTERLEAVE_16B
                          : map.interleave == "32B" ? CU_TENSOR_MAP_INTERLEAVE_32B
                                                    : CU_TENSOR_MAP_INTERLEAVE_NONE;
  const auto l2 = map.l2_promotion == "64B"    ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                  : map.l2_promotion == "128B" ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                  : map.l2_promotion == "256B" ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                               : CU_TENSOR_MAP_L2_PROMOTION_NONE;
  const auto fill = map.fill == "nan" ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                      : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  std::vector<cuuint64_t> dims(map.dims.begin(), map.dims.end());
  std::vector<cuuint64_t> strides(map.strides.begin(), map.strides.end());
  std::vector<cuuint32_t> box(map.box.begin(), map.box.end());
  std::vector<cuuint32_t> element_strides(map.element_strides.begin(), map.element_strides.end());
  CheckCuda(Driver().TensorMapEncodeTiled(out, data_type, static_cast<cuuint32_t>(dims.size()),
                                          reinterpret_cast<void*>(address), dims.data(),
                                          strides.data(), box.data(), element_strides.data(),
                                          interleave, swizzle, l2, fill),
            ("cuTensorMapEncodeTiled(" + map.name + ")").c_str());
}

std::vector<int64_t> TensorShape(const KernelArgSpec& arg, const Bindings& bindings, int sm_count) {
  std::vector<int64_t> shape;
  if (arg.kind != KernelArgSpec::Kind::kScratch) {
    for (const Expression& dim : arg.shape) shape.push_back(dim.Evaluate(bindings));
    return shape;
  }
  Bindings device = bindings;
  if (sm_count > 0) device["NUM_SMS"] = sm_count;
  for (const Expression& dim : arg.shape) {
    // Without a device, an extent that reads the count (in the branch its knobs take) is refused
    // by name rather than guessed.
    if (sm_count < 1 && Expression::Parse(dim.Fold(bindings)).Identifiers().contains("NUM_SMS")) {
      throw Error("scratch " + arg.name + " is sized by NUM_SMS ('" + dim.text() +
                  "'), and no device's multiprocessor count was given");
    }
    shape.push_back(dim.Evaluate(device));
  }
  return shape;
}

std::vector<const KernelSpec*> LaunchedKernels(const Manifest& manifest, const Bindings& bindings) {
  std::vector<const KernelSpec*> launched;
  for (const KernelSpec& kernel : manifest.kernels) {
    if (kernel.LaunchedFor(bindings)) launched.push_back(&kernel);
  }
  return launched;
}

namespace {

void StoreScalar(const KernelArgSpec& arg, int64_t value, uint64_t* slot) {
  if (arg.dtype == "i32") {
    if (value < std::numeric_limits<int32_t>::min() ||
        value > std::numeric_limits<int32_t>::max()) {
      throw Error("argument " + arg.name + " = " + std::to_string(value) + " does not fit an i32");
    }
    const auto narrow = static_cast<int32_t>(value);
    std::memcpy(slot, &narrow, sizeof(narrow));
  } else if (arg.dtype == "f32") {
    const auto real = static_cast<float>(value);
    std::memcpy(slot, &real, sizeof(real));
  } else {
    std::memcpy(slot, &value, sizeof(value));
  }
}

}  // namespace

KernelArguments::KernelArguments(const std::vector<const KernelSpec*>& kernels,
                                 const Bindings& bindings, int sm_count,
                                 const KernelArguments* share_inputs_with) {
  if (kernels.empty()) throw Error("a call launches at least one kernel");
  // Tensor maps are encoded once every tensor exists, whatever the order of the arguments.
  struct PendingMap {
    const KernelArgSpec* arg;
    const KernelSpec* kernel;
    CUtensorMap* slot;
  };
  std::vector<PendingMap> maps;
  std::map<std::string, const KernelSpec*> first_user;  // the kernel that first named a tensor
  for (const KernelSpec* spec : kernels) {
    std::vector<void*>& pointers = pointers_.emplace_back();
    std::set<std::string> present;  // alternatives of one name must exclude each other
    for (const KernelArgSpec& arg : spec->args) {
      if (!arg.PresentFor(bindings)) continue;
      if (!present.insert(arg.name).second) {
        throw Error(spec->entry + ": two arguments named " + arg.name + " apply to one problem");
      }
      if (arg.kind == KernelArgSpec::Kind::kTensorMap) {
        auto slot = std::make_unique<CUtensorMap>();
        maps.push_back({&arg, spec, slot.get()});
        pointers.push_back(slot.get());
        map_slots_.push_back(std::move(slot));
        continue;
      }
      if (arg.kind == KernelArgSpec::Kind::kScalar) {
        auto slot = std::make_unique<uint64_t>(0);
        StoreScalar(arg, arg.value->Evaluate(bindings), slot.get());
        pointers.push_back(slot.get());
        scalar_slots_.push_back(std::move(slot));
        continue;
      }
      int64_t elements = 1;
      const std::vector<int64_t> extents = TensorShape(arg, bindings, sm_count);
      for (int64_t extent : extents) elements *= extent;
      // The same memory in every kernel of the call: an earlier kernel may have it already.
      size_t index = tensors_.size();
      for (size_t t = 0; t < tensors_.size(); ++t) {
        if (tensors_[t]->name == arg.name) index = t;
      }
      if (index < tensors_.size()) {
        const DeviceTensor& tensor = *tensors_[index];
        if (tensor.kind != arg.kind || tensor.dtype != arg.dtype || tensor.elements != elements) {
          throw Error("tensor " + arg.name + " differs between " + first_user.at(arg.name)->entry +
                      " (" + KernelArgSpec::KindName(tensor.kind) + " " + tensor.dtype + " of " +
                      std::to_string(tensor.elements) + " elements) and " + spec->entry + " (" +
                      KernelArgSpec::KindName(arg.kind) + " " + arg.dtype + " of " +
                      std::to_string(elements) + "): one name is one tensor of the call");
        }
        pointers.push_back(pointer_slots_[index].get());
        continue;
      }
      std::shared_ptr<DeviceTensor> tensor;
      if (share_inputs_with != nullptr && arg.kind == KernelArgSpec::Kind::kInput) {
        for (const auto& other : share_inputs_with->tensors_) {
          if (other->name == arg.name && other->kind == KernelArgSpec::Kind::kInput) {
            tensor = other;
          }
        }
        // An input of its own would hold whatever the allocator left: compared against it, a
        // candidate would fail (or pass) by chance.
        if (!tensor) {
          throw Error("input " + arg.name + " of " + spec->entry +
                      " is not an input of the call it is checked against");
        }
        if (tensor->dtype != arg.dtype || tensor->elements != elements) {
          throw Error("input " + arg.name +
                      " differs in dtype or shape between the kernel and its reference");
        }
      }
      if (!tensor) {
        tensor = std::make_shared<DeviceTensor>();
        tensor->name = arg.name;
        tensor->dtype = arg.dtype;
        tensor->elements = elements;
        tensor->kind = arg.kind;
        tensor->uniform = arg.uniform;
        tensor->outlier_rows = arg.outlier_rows;
        tensor->row_elements = extents.back();
        tensor->zero = arg.zero;
        tensor->allocation =
            DeviceBuffer(kGuardBytes + GuardedBytes(tensor->bytes()) + kGuardBytes);
      }
      first_user.emplace(arg.name, spec);
      auto slot = std::make_unique<CUdeviceptr>(tensor->data().pointer);
      pointers.push_back(slot.get());
      pointer_slots_.push_back(std::move(slot));
      tensors_.push_back(std::move(tensor));
    }
  }
  for (const PendingMap& pending : maps) {
    const TensorMapDescription map = DescribeTensorMap(*pending.arg, *pending.kernel, bindings);
    EncodeTensorMap(map, Tensor(map.tensor).data().pointer, pending.slot);
  }
}

std::vector<DeviceTensor*> KernelArguments::OfKind(KernelArgSpec::Kind kind) const {
  std::vector<DeviceTensor*> tensors;
  for (const auto& tensor : tensors_) {
    if (tensor->kind == kind) tensors.push_back(tensor.get());
  }
  return tensors;
}

std::vector<DeviceTensor*> KernelArguments::Inputs() const {
  return OfKind(KernelArgSpec::Kind::kInput);
}

std::vector<DeviceTensor*> KernelArguments::Outputs() const {
  return OfKind(KernelArgSpec::Kind::kOutput);
}

std::vector<DeviceTensor*> KernelArguments::Scratch() const {
  return OfKind(KernelArgSpec::Kind::kScratch);
}

std::vector<DeviceTensor*> KernelArguments::Tensors() const {
  std::vector<DeviceTensor*> tensors;
  for (const auto& tensor : tensors_) tensors.push_back(tensor.get());
  return tensors;
}

DeviceTensor& KernelArguments::Tensor(const std::string& name) const { return *Shared(name); }

std::shared_ptr<DeviceTensor> KernelArguments::Shared(const std::string& name) const {
  for (const auto& tensor : tensors_) {
    if (tensor->name == name) return tensor;
  }
  throw Error("the call has no tensor argument " + name);
}

LaunchShape ResolveLaunch(const KernelSpec& spec, Bindings bindings, CUfunction function,
                          int sm_count) {
  // CUDA's limits per axis: a launch past them fails with an error that names no dimension.
  auto narrow = [](int64_t value, const char* what, int axis, int64_t limit) {
    if (value < 1 || value > limit) {
      throw Error(std::string("launch ") + what + "." + "xyz"[axis] + " of " +
                  std::to_string(value) + " is out of range (1 to " + std::to_string(limit) + ")");
    }
    return static_cast<unsigned>(value);
  };
  LaunchShape shape;
  for (int d = 0; d < 3; ++d) {
    shape.block[d] = narrow(spec.block[d].Evaluate(bindings), "block", d, kMaxBlockDim[d]);
  }
  const int64_t smem = spec.dynamic_smem.Evaluate(bindings);
  if (smem < 0) throw Error("negative dynamic shared memory");
  shape.dynamic_smem = static_cast<unsigned>(smem);
  AllowDynamicSharedMemory(function, shape.dynamic_smem);
  bindings["NUM_SMS"] = sm_count;
  bindings["CTAS_PER_SM"] = MaxActiveBlocksPerSm(
      function, shape.block[0] * shape.block[1] * shape.block[2], shape.dynamic_smem);
  for (int d = 0; d < 3; ++d) {
    shape.grid[d] = narrow(spec.grid[d].Evaluate(bindings), "grid", d, kMaxGridDim[d]);
    shape.cluster[d] = narrow(spec.cluster[d].Evaluate(bindings), "cluster", d, kMaxClusterCtas);
    if (shape.grid[d] % shape.cluster[d] != 0) {
      throw Error(std::string("launch grid.") + "xyz"[d] + " of " + std::to_string(shape.grid[d]) +
                  " is not a multiple of cluster." + "xyz"[d] + " of " +
                  std::to_string(shape.cluster[d]));
    }
  }
  return shape;
}

}  // namespace evo

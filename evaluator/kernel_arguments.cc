#include "evaluator/kernel_arguments.h"

#include <cstring>
#include <limits>
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

KernelArguments::KernelArguments(const KernelSpec& spec, const Bindings& bindings,
                                 const KernelArguments* share_inputs_with) {
  std::set<std::string> present;  // alternatives of one name must exclude each other
  // Tensor maps are encoded once every tensor exists, whatever the order of the arguments.
  std::vector<std::pair<const KernelArgSpec*, CUtensorMap*>> maps;
  for (const KernelArgSpec& arg : spec.args) {
    if (!arg.PresentFor(bindings)) continue;
    if (!present.insert(arg.name).second) {
      throw Error("two arguments named " + arg.name + " apply to one problem");
    }
    if (arg.kind == KernelArgSpec::Kind::kTensorMap) {
      auto slot = std::make_unique<CUtensorMap>();
      maps.emplace_back(&arg, slot.get());
      pointers_.push_back(slot.get());
      map_slots_.push_back(std::move(slot));
      tensors_.push_back(nullptr);
      continue;
    }
    if (arg.kind == KernelArgSpec::Kind::kScalar) {
      const int64_t value = arg.value->Evaluate(bindings);
      auto slot = std::make_unique<uint64_t>(0);
      if (arg.dtype == "i32") {
        if (value < std::numeric_limits<int32_t>::min() ||
            value > std::numeric_limits<int32_t>::max()) {
          throw Error("argument " + arg.name + " = " + std::to_string(value) +
                      " does not fit an i32");
        }
        const auto narrow = static_cast<int32_t>(value);
        std::memcpy(slot.get(), &narrow, sizeof(narrow));
      } else if (arg.dtype == "f32") {
        const auto real = static_cast<float>(value);
        std::memcpy(slot.get(), &real, sizeof(real));
      } else {
        std::memcpy(slot.get(), &value, sizeof(value));
      }
      pointers_.push_back(slot.get());
      scalar_slots_.push_back(std::move(slot));
      tensors_.push_back(nullptr);
      continue;
    }
    std::shared_ptr<DeviceTensor> tensor;
    if (share_inputs_with != nullptr && arg.kind == KernelArgSpec::Kind::kInput) {
      for (const auto& other : share_inputs_with->tensors_) {
        if (other && other->name == arg.name && other->kind == KernelArgSpec::Kind::kInput) {
          tensor = other;
        }
      }
    }
    int64_t elements = 1;
    for (const Expression& dim : arg.shape) elements *= dim.Evaluate(bindings);
    if (tensor && (tensor->dtype != arg.dtype || tensor->elements != elements)) {
      throw Error("input " + arg.name +
                  " differs in dtype or shape between the kernel and its "
                  "reference");
    }
    if (!tensor) {
      tensor = std::make_shared<DeviceTensor>();
      tensor->name = arg.name;
      tensor->dtype = arg.dtype;
      tensor->elements = elements;
      tensor->kind = arg.kind;
      tensor->uniform = arg.uniform;
      tensor->allocation = DeviceBuffer(kGuardBytes + GuardedBytes(tensor->bytes()) + kGuardBytes);
    }
    auto slot = std::make_unique<CUdeviceptr>(tensor->data().pointer);
    pointers_.push_back(slot.get());
    pointer_slots_.push_back(std::move(slot));
    tensors_.push_back(std::move(tensor));
  }
  for (const auto& [arg, slot] : maps) {
    const TensorMapDescription map = DescribeTensorMap(*arg, spec, bindings);
    EncodeTensorMap(map, Tensor(map.tensor).data().pointer, slot);
  }
}

std::vector<DeviceTensor*> KernelArguments::Inputs() const {
  std::vector<DeviceTensor*> inputs;
  for (const auto& tensor : tensors_) {
    if (tensor && tensor->kind == KernelArgSpec::Kind::kInput) inputs.push_back(tensor.get());
  }
  return inputs;
}

std::vector<DeviceTensor*> KernelArguments::Outputs() const {
  std::vector<DeviceTensor*> outputs;
  for (const auto& tensor : tensors_) {
    if (tensor && tensor->kind == KernelArgSpec::Kind::kOutput) outputs.push_back(tensor.get());
  }
  return outputs;
}

std::vector<DeviceTensor*> KernelArguments::Tensors() const {
  std::vector<DeviceTensor*> tensors;
  for (const auto& tensor : tensors_) {
    if (tensor) tensors.push_back(tensor.get());
  }
  return tensors;
}

DeviceTensor& KernelArguments::Tensor(const std::string& name) const { return *Shared(name); }

std::shared_ptr<DeviceTensor> KernelArguments::Shared(const std::string& name) const {
  for (const auto& tensor : tensors_) {
    if (tensor && tensor->name == name) return tensor;
  }
  throw Error("the kernel has no tensor argument " + name);
}

LaunchShape ResolveLaunch(const KernelSpec& spec, Bindings bindings, CUfunction function,
                          int sm_count) {
  auto narrow = [](int64_t value, const char* what) {
    if (value < 1 || value > std::numeric_limits<int32_t>::max()) {
      throw Error(std::string("launch ") + what + " of " + std::to_string(value) +
                  " is out of range");
    }
    return static_cast<unsigned>(value);
  };
  LaunchShape shape;
  for (int d = 0; d < 3; ++d) shape.block[d] = narrow(spec.block[d].Evaluate(bindings), "block");
  const int64_t smem = spec.dynamic_smem.Evaluate(bindings);
  if (smem < 0) throw Error("negative dynamic shared memory");
  shape.dynamic_smem = static_cast<unsigned>(smem);
  AllowDynamicSharedMemory(function, shape.dynamic_smem);
  bindings["NUM_SMS"] = sm_count;
  bindings["CTAS_PER_SM"] = MaxActiveBlocksPerSm(
      function, shape.block[0] * shape.block[1] * shape.block[2], shape.dynamic_smem);
  for (int d = 0; d < 3; ++d) shape.grid[d] = narrow(spec.grid[d].Evaluate(bindings), "grid");
  return shape;
}

}  // namespace evo

#include "kernel_templates/tensor_map.h"

#include "common/error.h"

namespace evo {
namespace {

int64_t ElementBytes(const std::string& dtype) {
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "f32") return 4;
  if (dtype == "fp8e4m3" || dtype == "fp8e5m2") return 1;
  throw Error("the tensor memory accelerator copies no " + dtype + " tensors");
}

int64_t SwizzleSpan(const std::string& swizzle) {
  if (swizzle == "32B") return 32;
  if (swizzle == "64B") return 64;
  if (swizzle == "128B") return 128;
  return 0;  // none
}

}  // namespace

TensorMapDescription DescribeTensorMap(const KernelArgSpec& map_arg, const KernelSpec& kernel,
                                       const Bindings& bindings) {
  if (!map_arg.map) throw Error("argument " + map_arg.name + " is not a tensor map");
  const TensorMapSpec& spec = *map_arg.map;
  const KernelArgSpec* tensor = nullptr;
  for (const KernelArgSpec& arg : kernel.args) {
    if (arg.is_tensor() && arg.name == spec.tensor && arg.PresentFor(bindings)) tensor = &arg;
  }
  const std::string what = "tensor map " + map_arg.name;
  if (tensor == nullptr) throw Error(what + ": its tensor " + spec.tensor + " is not present");
  TensorMapDescription map;
  map.name = map_arg.name;
  map.tensor = tensor->name;
  map.dtype = tensor->dtype;
  map.swizzle = spec.swizzle;
  map.interleave = spec.interleave;
  map.l2_promotion = spec.l2_promotion;
  map.fill = spec.fill;
  const int64_t element = ElementBytes(tensor->dtype);
  const size_t rank = tensor->shape.size();
  uint64_t stride = static_cast<uint64_t>(element);
  for (size_t i = 0; i < rank; ++i) {
    // The manifest's shape is outermost first; the accelerator's dims are innermost first.
    const int64_t extent = tensor->shape[rank - 1 - i].Evaluate(bindings);
    if (extent < 1 || extent > (int64_t{1} << 32)) {
      throw Error(what + ": dimension " + std::to_string(i) + " of " + tensor->name + " is " +
                  std::to_string(extent) + ", outside [1, 2^32]");
    }
    if (i > 0) {
      if (stride % 16 != 0) {
        throw Error(what + ": the stride of dimension " + std::to_string(i) + " is " +
                    std::to_string(stride) + " bytes, not a multiple of 16");
      }
      map.strides.push_back(stride);
    }
    map.dims.push_back(static_cast<uint64_t>(extent));
    stride *= static_cast<uint64_t>(extent);
    const int64_t box = spec.box[i].Evaluate(bindings);
    if (box < 1 || box > 256) {
      throw Error(what + ": box[" + std::to_string(i) + "] is " + std::to_string(box) +
                  ", outside [1, 256]");
    }
    map.box.push_back(static_cast<uint32_t>(box));
    map.element_strides.push_back(1);
  }
  const int64_t inner_bytes = static_cast<int64_t>(map.box[0]) * element;
  if (map.interleave == "none") {
    if (inner_bytes % 16 != 0) {
      throw Error(what + ": the box's inner extent is " + std::to_string(inner_bytes) +
                  " bytes, not a multiple of 16");
    }
    const int64_t span = SwizzleSpan(map.swizzle);
    if (span > 0 && inner_bytes > span) {
      throw Error(what + ": the box's inner extent is " + std::to_string(inner_bytes) +
                  " bytes, over the " + map.swizzle + " swizzle's span");
    }
  } else if (rank < 3) {
    throw Error(what + ": an interleaved map needs at least three dimensions");
  }
  return map;
}

nlohmann::json TensorMapToJson(const TensorMapDescription& map) {
  return {{"name", map.name},
          {"kind", "tensor_map"},
          {"tensor", map.tensor},
          {"dtype", map.dtype},
          {"rank", map.dims.size()},
          {"dims", map.dims},
          {"strides_bytes", map.strides},
          {"box", map.box},
          {"element_strides", map.element_strides},
          {"swizzle", map.swizzle},
          {"interleave", map.interleave},
          {"l2_promotion", map.l2_promotion},
          {"fill", map.fill},
          {"encode",
           "cuTensorMapEncodeTiled(map, dtype, rank, the tensor's address, dims, strides_bytes, "
           "box, element_strides, interleave, swizzle, l2_promotion, fill); pass the 128-byte "
           "map by value"}};
}

}  // namespace evo

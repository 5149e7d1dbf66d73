#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernel_templates/manifest.h"

namespace evo {

// Everything cuTensorMapEncodeTiled takes for one tensor_map argument, for one problem and
// configuration, but the tensor's address: what the worker encodes and launch.json describes.
struct TensorMapDescription {
  std::string name;                       // the argument
  std::string tensor;                     // the tensor argument it describes
  std::string dtype;                      // the tensor's
  std::vector<uint64_t> dims;             // innermost first
  std::vector<uint64_t> strides;          // bytes between consecutive indices of dims 1..rank-1
  std::vector<uint32_t> box;              // innermost first
  std::vector<uint32_t> element_strides;  // all 1: every element of the box is copied
  std::string swizzle;
  std::string interleave;
  std::string l2_promotion;
  std::string fill;
};

// The description of `map_arg` (a tensor_map of `kernel`) under `bindings`. Throws evo::Error
// naming the argument and the rule of cuTensorMapEncodeTiled it would break (a box over 256, an
// inner box wider than its swizzle span or not a multiple of 16 bytes, a stride that is not a
// multiple of 16 bytes, a dtype the accelerator does not copy), so that a configuration is
// refused before any GPU is involved.
TensorMapDescription DescribeTensorMap(const KernelArgSpec& map_arg, const KernelSpec& kernel,
                                       const Bindings& bindings);

nlohmann::json TensorMapToJson(const TensorMapDescription& map);

}  // namespace evo

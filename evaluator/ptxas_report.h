#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

// What ptxas reported for one entry function (`--ptxas-options=-v`).
struct KernelResources {
  std::string function;
  std::string arch;
  int registers = 0;
  int barriers = 0;
  int64_t smem_static = 0;
  int64_t cmem0 = 0;
  int64_t stack_frame = 0;
  int64_t spill_stores = 0;
  int64_t spill_loads = 0;
  int64_t cumulative_stack = 0;

  bool spills() const { return spill_stores > 0 || spill_loads > 0; }
};

// Reads the entry functions out of an NVRTC log. Lines it does not recognize are skipped, so the
// log may also hold warnings and errors.
std::vector<KernelResources> ParsePtxasReport(std::string_view log);

const KernelResources* FindKernel(const std::vector<KernelResources>& kernels,
                                  std::string_view function);

}  // namespace evo

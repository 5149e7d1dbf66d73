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
  // ptxas's "Potential Performance Loss" notes on this function, code first, e.g. "(C7514)
  // wgmma.mma_async instructions are serialized due to ...": the kernel is correct, but the
  // template lost what it was written for (on Hopper, 25 % of a flash-attention kernel).
  std::vector<std::string> performance_losses;

  bool spills() const { return spill_stores > 0 || spill_loads > 0; }
};

// Reads the entry functions out of an NVRTC log. Lines it does not recognize are skipped, so the
// log may also hold warnings and errors.
std::vector<KernelResources> ParsePtxasReport(std::string_view log);

const KernelResources* FindKernel(const std::vector<KernelResources>& kernels,
                                  std::string_view function);

}  // namespace evo

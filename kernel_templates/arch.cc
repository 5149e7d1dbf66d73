#include "kernel_templates/arch.h"

#include <array>

#include "common/error.h"

namespace evo {
namespace {

// Opt-in shared memory per block, from the CUDA programming guide's table of compute capabilities.
const std::array<ArchInfo, 8> kArchs = {{
    {"sm_80", 80, 166912},
    {"sm_86", 86, 101376},
    {"sm_87", 87, 166912},
    {"sm_89", 89, 101376},
    {"sm_90", 90, 232448},
    {"sm_90a", 90, 232448},
    {"sm_100", 100, 232448},
    {"sm_120", 120, 101376},
}};

}  // namespace

const ArchInfo& ArchByName(std::string_view name) {
  for (const ArchInfo& arch : kArchs) {
    if (arch.name == name) return arch;
  }
  std::string known;
  for (const ArchInfo& arch : kArchs) known += (known.empty() ? "" : ", ") + arch.name;
  throw Error("unknown arch '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string> KnownArchNames() {
  std::vector<std::string> names;
  for (const ArchInfo& arch : kArchs) names.push_back(arch.name);
  return names;
}

const ArchInfo& CompileTarget(const ArchInfo& arch, bool arch_specific) {
  if (!arch_specific || arch.name.ends_with('a')) return ArchByName(arch.name);
  return ArchByName(arch.name + "a");
}

std::string ArchNameForComputeCapability(int major, int minor) {
  return "sm_" + std::to_string(major * 10 + minor);
}

}  // namespace evo

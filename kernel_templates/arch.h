#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

// What the compile gate needs to know about a target: its name for NVRTC and its per-block limits.
struct ArchInfo {
  std::string name;  // "sm_90", "sm_90a"
  int sm = 0;        // 90
  int64_t max_smem_per_block_optin = 0;
  int64_t max_static_smem_per_block = 48 * 1024;
  int64_t regs_per_block = 64 * 1024;
  int64_t max_threads_per_block = 1024;
};

// The targets evo knows the limits of; throws evo::Error listing them for any other name.
const ArchInfo& ArchByName(std::string_view name);
std::vector<std::string> KnownArchNames();

// "sm_" + major*10+minor, as NVRTC spells it.
std::string ArchNameForComputeCapability(int major, int minor);

// The target a template is compiled for on this arch: the arch itself, or for a template that
// uses arch-specific instructions (wgmma needs sm_90a) its "a" variant. Throws evo::Error when
// evo knows no such variant.
const ArchInfo& CompileTarget(const ArchInfo& arch, bool arch_specific);

}  // namespace evo

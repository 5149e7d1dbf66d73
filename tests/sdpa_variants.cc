#include "tests/sdpa_variants.h"

#include <stdexcept>

#include "common/files.h"
#include "tests/test_support.h"

namespace evo::test {

const std::vector<SdpaBreakage>& SdpaBreakages() {
  static const std::vector<SdpaBreakage> breakages = {
      {"skips_last_kv_tile", "return (kv_end + BLOCK_N - 1) / BLOCK_N;",
       "return max(1, (kv_end + BLOCK_N - 1) / BLOCK_N - 1);"},
      {"skips_tail_rows", "if (row < S_q) {", "if (row < S_q / BLOCK_M * BLOCK_M) {"},
      {"drops_causal_mask", "(IS_CAUSAL && col_offset - row_offset > diagonal)",
       "(false && col_offset - row_offset > diagonal)"},
      {"wrong_scale", "1.4426950408889634 / const_sqrt(HEAD_DIM)", "1.4426950408889634 / HEAD_DIM"},
      {"writes_out_of_bounds", "st_global_v4(o_head + static_cast<long long>(row) * HEAD_DIM",
       "st_global_v4(o_head + (1ll << 40) + static_cast<long long>(row) * HEAD_DIM"},
      {"never_terminates", "const unsigned smem_base = sdpa::smem_u32(smem);",
       "while (clock64() >= 0) {\n  }\n  const unsigned smem_base = sdpa::smem_u32(smem);"},
  };
  return breakages;
}

const SdpaBreakage& FindSdpaBreakage(const std::string& name) {
  for (const SdpaBreakage& breakage : SdpaBreakages()) {
    if (breakage.name == name) return breakage;
  }
  throw std::invalid_argument("no sdpa breakage " + name);
}

std::string BrokenSdpaName(const SdpaBreakage& breakage) { return "sdpa_fp16_" + breakage.name; }

void WriteBrokenSdpa(const std::filesystem::path& folder, const SdpaBreakage& breakage) {
  const std::filesystem::path original = SourceDir() / "kernel_templates" / "sdpa_fp16";
  std::string source = ReadFile(original / "sdpa_fp16.cu");
  const size_t at = source.find(breakage.find);
  if (at == std::string::npos || source.find(breakage.find, at + 1) != std::string::npos) {
    throw std::runtime_error("breakage " + breakage.name + ": '" + breakage.find +
                             "' does not occur exactly once in sdpa_fp16.cu");
  }
  source.replace(at, breakage.find.size(), breakage.replace);
  WriteFile(folder / "sdpa_fp16.cu", source);
  WriteFile(folder / "reference.cu", ReadFile(original / "reference.cu"));
  std::string manifest = ReadFile(original / "manifest.json");
  const std::string name = "\"name\": \"sdpa_fp16\"";
  const size_t name_at = manifest.find(name);
  if (name_at == std::string::npos) throw std::runtime_error("sdpa_fp16's manifest has no name");
  manifest.replace(name_at, name.size(), "\"name\": \"" + BrokenSdpaName(breakage) + "\"");
  WriteFile(folder / "manifest.json", manifest);
}

}  // namespace evo::test

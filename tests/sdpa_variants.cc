#include "tests/sdpa_variants.h"

#include <algorithm>
#include <stdexcept>

#include "common/files.h"
#include "kernel_templates/template_library.h"
#include "tests/test_support.h"

namespace evo::test {

const std::vector<SdpaBreakage>& SdpaBreakages() {
  // The line of the non-persistent kernel where its work item is known.
  static const std::string kItemLine =
      "                        static_cast<int>(blockIdx.x) % SPLITS};\n";
  static const std::vector<SdpaBreakage> breakages = {
      {"skips_last_kv_tile",
       "return evo::causal_kv_tiles<BLOCK_M, BLOCK_N, IS_CAUSAL>(m_tile, S_q, S_kv);",
       "return max(1, evo::causal_kv_tiles<BLOCK_M, BLOCK_N, IS_CAUSAL>(m_tile, S_q, S_kv) - 1);"},
      {"skips_tail_rows", "S_q, lane, group, quad);",
       "S_q / BLOCK_M * BLOCK_M, lane, group, quad);"},
      {"drops_causal_mask", "evo::OutOfBoundsOrFuture<IS_CAUSAL>{",
       "evo::OutOfBoundsOrFuture<false>{"},
      {"wrong_scale", "evo::softmax_scale<HEAD_DIM, FAST_EXP>()",
       "evo::softmax_scale<HEAD_DIM * HEAD_DIM, FAST_EXP>()"},
      {"writes_out_of_bounds", "(acc, row_sum, 1.f, q_smem, o_head,",
       "(acc, row_sum, 1.f, q_smem, o_head + (1ll << 40),"},
      {"never_terminates", "const unsigned smem_base = evo::smem_u32(smem);",
       "while (clock64() >= 0) {\n  }\n  const unsigned smem_base = evo::smem_u32(smem);"},
      // Tampering the gates catch by the guard zones and the input checksums, not by the output.
      {"writes_past_end_on_partial_tile", kItemLine,
       kItemLine +
           "  if (S_q % BLOCK_M != 0 && m_tile == shape.m_tiles - 1 && item.batch == B - 1 &&\n"
           "      item.group == shape.groups - 1 && threadIdx.x == 0) {\n"
           "    O[static_cast<long long>(B) * H * S_q * HEAD_DIM] = 0x3c00;\n"
           "  }\n"},
      {"writes_before_start", kItemLine,
       kItemLine +
           "  if (m_tile == 0 && item.batch == 0 && item.group == 0 && threadIdx.x == 0) O[-1] = "
           "0x3c00;\n"},
      // One ulp of one key: the output moves far less than the tolerance.
      {"writes_into_k", kItemLine,
       kItemLine +
           "  if (m_tile == 0 && item.batch == 0 && item.group == 0 && threadIdx.x == 0) {\n"
           "    const_cast<unsigned short*>(K)[0] ^= 1;\n"
           "  }\n"},
      {"hangs_when_causal", "const unsigned smem_base = evo::smem_u32(smem);",
       "while (IS_CAUSAL && clock64() >= 0) {\n  }\n  const unsigned smem_base = "
       "evo::smem_u32(smem);"},
      // Split-KV (evo/split_kv.cuh, both ways of combining): the combine leaves out the last
      // split, which alone owns the keys where S_kv has fewer tiles than splits...
      {"combine_drops_last_split",
       "for (int s = 0; s < Splits; ++s) {",
       "for (int s = 0; s < Splits - 1; ++s) {",
       "split_kv.cuh",
       {"SPLITS=4", "SPLITS=4 LAST_CTA_COMBINES=1"}},
      // ...or averages the partial outputs instead of weighing them by their log-sum-exps.
      {"combine_ignores_lse",
       "const float w = __shfl_sync(0xffffffffu, weight, s);",
       "const float w = weight_sum / Splits;",
       "split_kv.cuh",
       {"SPLITS=4", "SPLITS=4 LAST_CTA_COMBINES=1"}},
      // Grouped-query attention: query head h reads KV head h % H_kv instead of h / (H / H_kv),
      // one head per tile...
      {"wrong_kv_head",
       "  return item.group / shape.G;",
       "  return item.group % shape.H_kv;",
       "",
       {"", "SPLITS=2"}},
      // ...and with the query heads of a KV head packed into one tile (the tile of KV head k
      // holds query heads k, k + H_kv, ...: again h % H_kv).
      {"packs_wrong_query_heads",
       "  const int head = item.group * shape.G + p % shape.G;",
       "  const int head = item.group + (p % shape.G) * shape.H_kv;",
       "",
       {"PACK_GQA=1", "PACK_GQA=1 SPLITS=2 LAST_CTA_COMBINES=1"}},
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

namespace {

// `text` with its one occurrence of `find` replaced (nothing to do for an empty `find`); throws,
// naming `name` and `where`, when `find` does not occur exactly once.
std::string ReplaceOnce(std::string text, const std::string& find, const std::string& replace,
                        const std::string& name, const std::string& where) {
  if (find.empty()) return text;
  const size_t at = text.find(find);
  if (at == std::string::npos || text.find(find, at + 1) != std::string::npos) {
    throw std::runtime_error(name + ": '" + find + "' does not occur exactly once in " + where);
  }
  text.replace(at, find.size(), replace);
  return text;
}

}  // namespace

void WriteTemplateVariant(const std::filesystem::path& folder, const std::string& original,
                          const std::string& name, const std::string& find,
                          const std::string& replace) {
  const std::filesystem::path from = SourceDir() / "kernel_templates" / original;
  const std::string source_name = original + ".cu";
  WriteFile(folder / source_name,
            ReplaceOnce(ReadFile(from / source_name), find, replace, name, source_name));
  std::string manifest = ReadFile(from / "manifest.json");
  const std::string name_field = "\"name\": \"" + original + "\"";
  const size_t name_at = manifest.find(name_field);
  if (name_at == std::string::npos) throw std::runtime_error(original + "'s manifest has no name");
  manifest.replace(name_at, name_field.size(), "\"name\": \"" + name + "\"");
  WriteFile(folder / "manifest.json", manifest);
}

void ReplaceInVariant(const std::filesystem::path& file, const std::string& name,
                      const std::string& find, const std::string& replace) {
  WriteFile(file, ReplaceOnce(ReadFile(file), find, replace, name, file.filename().string()));
}

void WriteTemplateVariantWithBrokenHeader(const std::filesystem::path& folder,
                                          const std::string& original, const std::string& name,
                                          const std::string& header, const std::string& find,
                                          const std::string& replace) {
  const std::string library_name = std::string(kDeviceLibraryPrefix) + header;
  WriteTemplateVariant(folder, original, name, "#include \"" + library_name + "\"",
                       "#include \"" + header + "\"");
  const auto& library = DeviceLibrary();
  const auto it = library.find(library_name);
  if (it == library.end()) throw std::runtime_error(name + ": no header " + library_name);
  WriteFile(folder / header, ReplaceOnce(it->second, find, replace, name, library_name));
}

void WriteBrokenSdpa(const std::filesystem::path& folder, const SdpaBreakage& breakage) {
  if (breakage.header.empty()) {
    WriteTemplateVariant(folder, "sdpa_fp16", BrokenSdpaName(breakage), breakage.find,
                         breakage.replace);
  } else {
    WriteTemplateVariantWithBrokenHeader(folder, "sdpa_fp16", BrokenSdpaName(breakage),
                                         breakage.header, breakage.find, breakage.replace);
  }
}

const Manifest& SdpaManifestWithoutSplitKnobs() {
  static const Manifest manifest = [] {
    const auto is_split_knob = [](const std::string& knob) {
      return knob == "SPLITS" || knob == "PACK_GQA" || knob == "LAST_CTA_COMBINES";
    };
    Manifest pinned = TemplateLibrary::Load({}).Find("sdpa_fp16").manifest;
    // Each becomes a problem parameter of one value, its default: the expressions that read it
    // still find it, and genomes, their random draws and the fits over knobs are as they were
    // without it.
    for (const KnobSpec& knob : pinned.knobs) {
      if (!is_split_knob(knob.name)) continue;
      ProblemParamSpec param;
      param.name = knob.name;
      param.values = {knob.default_value};
      param.min = knob.default_value;
      param.default_value = knob.default_value;
      param.doc = knob.doc;
      pinned.problem.push_back(std::move(param));
    }
    std::erase_if(pinned.knobs, [&](const KnobSpec& knob) { return is_split_knob(knob.name); });
    // The starting points that set them (for decoding) are outside this space.
    std::erase_if(pinned.starting_points, [&](const KnobSettings& point) {
      return std::any_of(point.begin(), point.end(),
                         [&](const auto& setting) { return is_split_knob(setting.first); });
    });
    return pinned;
  }();
  return manifest;
}

const SearchSpace& SdpaSpaceWithoutSplitKnobs() {
  static const SearchSpace space(SdpaManifestWithoutSplitKnobs(),
                                 DefaultProblem(SdpaManifestWithoutSplitKnobs()),
                                 ArchByName("sm_90"));
  return space;
}

int64_t SdpaKnobPosition(const std::string& knob, const Genome& genome) {
  const std::vector<int64_t>& values = SdpaManifestWithoutSplitKnobs().FindKnob(knob)->values;
  return std::find(values.begin(), values.end(), genome.at(knob)) - values.begin();
}

}  // namespace evo::test

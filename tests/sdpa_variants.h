#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/search_space.h"
#include "kernel_templates/genome.h"
#include "kernel_templates/manifest.h"

namespace evo::test {

// One textual change to the real sdpa_fp16 source, or to its copy of a device library header,
// that breaks it in a known way.
struct SdpaBreakage {
  SdpaBreakage(std::string name_, std::string find_, std::string replace_, std::string header_ = "",
               std::vector<std::string> settings_ = {})
      : name(std::move(name_)),
        find(std::move(find_)),
        replace(std::move(replace_)),
        header(std::move(header_)),
        settings(std::move(settings_)) {}

  std::string name;
  std::string find;  // must occur exactly once in the source (or the header)
  std::string replace;
  // Empty: the change is to sdpa_fp16.cu. Else a header of the device library ("split_kv.cuh"
  // for "evo/split_kv.cuh"), which the variant includes from its own broken copy.
  std::string header;
  // Knob settings (KNOB=VALUE ...) under which the broken code runs and the gates must reject
  // it, each compiled on any machine; empty: the defaults.
  std::vector<std::string> settings;
};

// The deliberately broken variants the gates must reject.
const std::vector<SdpaBreakage>& SdpaBreakages();
const SdpaBreakage& FindSdpaBreakage(const std::string& name);

// The template name of a broken variant, so that it can sit beside the real one.
std::string BrokenSdpaName(const SdpaBreakage& breakage);

// Writes a copy of the shipped template kernel_templates/<original> (manifest, <original>.cu and
// reference.cu) into `folder`, named `name`, with `find` in its kernel source replaced by
// `replace` (an empty `find` copies the source unchanged); throws when `find` does not occur
// exactly once, so a template change cannot silently turn a broken variant into a good one.
void WriteTemplateVariant(const std::filesystem::path& folder, const std::string& original,
                          const std::string& name, const std::string& find,
                          const std::string& replace);

// Replaces the one occurrence of `find` in `file` (a variant's source written above) by
// `replace`, for a variant that needs a second change; throws, naming `name`, as they do when
// `find` does not occur exactly once.
void ReplaceInVariant(const std::filesystem::path& file, const std::string& name,
                      const std::string& find, const std::string& replace);

// A copy of kernel_templates/<original> named `name` that includes its own copy of the device
// library's `header` ("wgmma_attention.cuh" for "evo/wgmma_attention.cuh"), written beside it
// with `find` replaced by `replace` (which must occur exactly once): a breakage of code that
// templates share.
void WriteTemplateVariantWithBrokenHeader(const std::filesystem::path& folder,
                                          const std::string& original, const std::string& name,
                                          const std::string& header, const std::string& find,
                                          const std::string& replace);

// WriteTemplateVariant (or WriteTemplateVariantWithBrokenHeader, for a header's breakage) of
// sdpa_fp16 with `breakage`, named BrokenSdpaName(breakage).
void WriteBrokenSdpa(const std::filesystem::path& folder, const SdpaBreakage& breakage);

// sdpa_fp16's manifest with its split-KV and grouped-query knobs (SPLITS, PACK_GQA,
// LAST_CTA_COMBINES) fixed at their defaults, as problem parameters of one value, and without
// the starting points that set them: the space of its other knobs (5120 configurations), which
// the engine's tests count and search as they did before those knobs.
const Manifest& SdpaManifestWithoutSplitKnobs();

// The space of SdpaManifestWithoutSplitKnobs() at its default problem on sm_90, which the
// engine's tests search.
const SearchSpace& SdpaSpaceWithoutSplitKnobs();

// Where `genome`'s value of `knob` stands in that manifest's domain (0 for its first value): the
// coordinate of the made-up landscapes the engine's tests search.
int64_t SdpaKnobPosition(const std::string& knob, const Genome& genome);

}  // namespace evo::test

#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kernel_templates/genome.h"
#include "kernel_templates/template_library.h"
#include "population/candidate.h"

namespace evo::cli {

// One shape of a tune set: the sizes it gives (B, H, H_kv, S_q, S_kv, D; the others keep the
// template's defaults, H_kv follows H) and whether it is causal.
struct TuneShape {
  std::map<std::string, int64_t> sizes;
  bool causal = false;

  bool operator==(const TuneShape& other) const = default;
};

// "B,H,S,D" or "B,H,S_q,S_kv,D"; H may be "H:H_kv" (grouped heads) and ",causal" may follow.
// Throws evo::Error naming the text.
TuneShape ParseTuneShape(const std::string& text);

// A file of shapes, one per line as ParseTuneShape reads them; '#' starts a comment.
std::vector<TuneShape> ReadShapesFile(const std::filesystem::path& path);

// A grid of shapes: space-separated NAME=VALUES terms over B, H, H_kv, S (S_q = S_kv), S_q,
// S_kv, D, CAUSAL and BxH (pairs such as 2x8); VALUES is a comma-separated list whose items
// are numbers or ranges LO..HI, the powers of two times LO up to HI (512..16384 is 512, 1024,
// ..., 16384). The product of the terms, D and CAUSAL outermost, then B x H, H_kv, and the
// lengths innermost, each in the order given. Throws evo::Error naming the bad term.
std::vector<TuneShape> ExpandGrid(const std::string& spec);

// One run of a tune set: a template and the problem it is tuned at.
struct TuneTask {
  const KernelTemplate* kernel_template = nullptr;
  Problem problem;
  std::string label;  // "sdpa_hopper 2,8,2048,64 causal BF16=1"
};

struct TunePlan {
  std::vector<TuneTask> tasks;
  // (template, shape) pairs the template cannot take, each with why.
  std::vector<std::string> skipped;
};

// Every shape for every template (shape by shape, templates in the order given), duplicates
// once; `causal` makes every shape causal, `problem_settings` (PARAM=VALUE) apply to all.
// A template lacking a parameter a shape or setting needs (grouped heads, BF16) skips it.
TunePlan PlanTune(const TemplateLibrary& library, const std::vector<std::string>& templates,
                  const std::vector<TuneShape>& shapes, bool causal,
                  const std::vector<std::string>& problem_settings);

// A tuned task that came before: its problem and its elite, best first.
struct TunedBefore {
  Problem problem;
  std::vector<CandidateRecord> elite;
};

// Starting points for a new run of `problem` from the elites of earlier tasks of the same
// template with the same compile-time problem parameters (D, causality, dtypes): their
// configurations ordered by how near their problem is (the fewest half-octaves between S_q,
// S_kv, B*H and H/H_kv, as the dispatch rule measures), then by rank, each once, at most
// `limit`.
std::vector<KnobSettings> SeedStartingPoints(const Manifest& manifest, const Problem& problem,
                                             const std::vector<TunedBefore>& before, size_t limit);

}  // namespace evo::cli

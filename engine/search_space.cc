#include "engine/search_space.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

namespace evo {
namespace {

// Redraws before Sample falls back to repairing: enough that a space with a fair share of
// valid configurations is sampled uniformly, few enough that a nearly empty one stays cheap.
constexpr int kSampleDraws = 64;

size_t DomainIndex(const KnobSpec& knob, int64_t value) {
  return static_cast<size_t>(std::find(knob.values.begin(), knob.values.end(), value) -
                             knob.values.begin());
}

}  // namespace

SearchSpace::SearchSpace(const Manifest& manifest, Problem problem, ArchInfo arch)
    : manifest_(&manifest), problem_(std::move(problem)), arch_(std::move(arch)) {}

std::optional<ConstraintViolation> SearchSpace::Violation(const Genome& genome) const {
  return FirstViolatedConstraint(*manifest_, CompileBindings(*manifest_, genome, problem_, arch_));
}

std::optional<Genome> SearchSpace::Sample(Random& random) const {
  Genome genome;
  for (int draw = 0; draw < kSampleDraws; ++draw) {
    for (const KnobSpec& knob : manifest_->knobs) genome[knob.name] = random.Pick(knob.values);
    if (IsValid(genome)) return genome;
  }
  return Repair(genome, random);
}

std::optional<Genome> SearchSpace::Repair(const Genome& genome, Random& random) const {
  CheckGenome(*manifest_, genome);
  if (IsValid(genome)) return genome;

  const std::vector<KnobSpec>& knobs = manifest_->knobs;
  std::vector<size_t> start(knobs.size());
  for (size_t k = 0; k < knobs.size(); ++k)
    start[k] = DomainIndex(knobs[k], genome.at(knobs[k].name));

  // Breadth-first over the number of changed knobs: every subset of `changes` knobs, every
  // other value of each. Exact, and cheap for the few knobs and short domains templates have;
  // the first size with a valid configuration ends the search.
  for (size_t changes = 1; changes <= knobs.size(); ++changes) {
    std::vector<Genome> nearest;
    int64_t nearest_steps = std::numeric_limits<int64_t>::max();
    std::vector<bool> chosen(knobs.size(), false);
    std::fill(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(changes), true);
    // prev_permutation over a sorted-descending mask visits the subsets in lexicographic order
    // of the knobs they hold, so the candidates (and thus the random pick) are reproducible.
    do {
      std::vector<size_t> subset;
      for (size_t k = 0; k < knobs.size(); ++k) {
        if (chosen[k]) subset.push_back(k);
      }
      bool changeable = true;
      for (size_t k : subset) changeable = changeable && knobs[k].values.size() > 1;
      if (!changeable) continue;

      // Odometer over the other values of the subset's knobs; offsets skip the current value.
      std::vector<size_t> offset(subset.size(), 0);
      for (;;) {
        Genome candidate = genome;
        int64_t steps = 0;
        for (size_t i = 0; i < subset.size(); ++i) {
          const KnobSpec& knob = knobs[subset[i]];
          size_t index = offset[i] < start[subset[i]] ? offset[i] : offset[i] + 1;
          candidate[knob.name] = knob.values[index];
          steps += std::abs(static_cast<int64_t>(index) - static_cast<int64_t>(start[subset[i]]));
        }
        if (steps <= nearest_steps && IsValid(candidate)) {
          if (steps < nearest_steps) nearest.clear();
          nearest_steps = steps;
          nearest.push_back(std::move(candidate));
        }
        size_t i = subset.size();
        while (i > 0 && ++offset[i - 1] == knobs[subset[i - 1]].values.size() - 1) {
          offset[i - 1] = 0;
          --i;
        }
        if (i == 0) break;  // every combination visited
      }
    } while (std::prev_permutation(chosen.begin(), chosen.end()));
    if (!nearest.empty()) return random.Pick(nearest);
  }
  return std::nullopt;
}

std::vector<Genome> SearchSpace::Enumerate() const {
  std::vector<Genome> valid;
  const std::vector<KnobSpec>& knobs = manifest_->knobs;
  for (const KnobSpec& knob : knobs) {
    if (knob.values.empty()) return valid;
  }
  std::vector<size_t> index(knobs.size(), 0);
  Genome genome;
  for (;;) {
    for (size_t k = 0; k < knobs.size(); ++k) genome[knobs[k].name] = knobs[k].values[index[k]];
    if (IsValid(genome)) valid.push_back(genome);
    // The last knob turns fastest, so the first is the slowest.
    size_t k = knobs.size();
    while (k > 0 && ++index[k - 1] == knobs[k - 1].values.size()) {
      index[k - 1] = 0;
      --k;
    }
    if (k == 0) return valid;
  }
}

}  // namespace evo

#include "engine/search_space.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "common/error.h"

namespace evo {
namespace {

// Redraws before Sample falls back to repairing: enough that a space with a fair share of
// valid configurations is sampled uniformly, few enough that a nearly empty one stays cheap.
constexpr int kSampleDraws = 64;

}  // namespace

SearchSpace::SearchSpace(const Manifest& manifest, Problem problem, ArchInfo arch,
                         size_t max_listed)
    : manifest_(&manifest),
      problem_(std::move(problem)),
      arch_(std::move(arch)),
      max_listed_(max_listed) {}

std::optional<ConstraintViolation> SearchSpace::Violation(const Genome& genome) const {
  Bindings bindings;
  try {
    bindings = CompileBindings(*manifest_, genome, problem_, arch_);
  } catch (const Error& error) {
    // A derived value the template cannot evaluate here: the configuration is not in the space.
    return ConstraintViolation{"derived values", "", "", error.what()};
  }
  return FirstViolatedConstraint(*manifest_, bindings);
}

const ValidConfigurations* SearchSpace::Listed() const {
  if (max_listed_ == 0) return nullptr;
  std::call_once(listing_->once, [&] {
    try {
      listing_->valid = ValidConfigurations::List(
          *manifest_, problem_, arch_, [this](const Genome& genome) { return !Violation(genome); },
          max_listed_, kMaxListingVisits);
    } catch (const Error&) {
      // A configuration whose test throws (a template's division by zero, say): tested one at a
      // time, it throws only where a search meets it, as before.
      listing_->valid.reset();
    }
    listing_->made.store(true, std::memory_order_release);
  });
  return listing_->valid ? &*listing_->valid : nullptr;
}

bool SearchSpace::IsValid(const Genome& genome) const {
  // A single test does not make the list (evo compile checks one configuration), but once a
  // search has made it, its tests are lookups.
  if (listing_->made.load(std::memory_order_acquire) && listing_->valid) {
    if (std::optional<std::vector<uint16_t>> indices = DomainIndices(*manifest_, genome))
      return listing_->valid->Contains(*indices);
  }
  return !Violation(genome);
}

std::optional<Genome> SearchSpace::Sample(Random& random) const {
  const ValidConfigurations* listed = Listed();
  Genome genome;
  for (int draw = 0; draw < kSampleDraws; ++draw) {
    for (const KnobSpec& knob : manifest_->knobs) genome[knob.name] = random.Pick(knob.values);
    if (IsValid(genome)) return genome;
  }
  // Repairing the last draw would scan every listed configuration for the nearest (sdpa_hopper:
  // tens of thousands, for a third of the draws of a generation's pool, most of its planning
  // time), and would favour configurations next to invalid ones.
  if (listed != nullptr) {
    if (listed->size() == 0) return std::nullopt;
    return listed->GenomeAt(
        *manifest_, static_cast<size_t>(random.Below(static_cast<int64_t>(listed->size()))));
  }
  return Repair(genome, random);
}

std::optional<Genome> SearchSpace::Repair(const Genome& genome, Random& random) const {
  CheckGenome(*manifest_, genome);
  if (IsValid(genome)) return genome;
  const std::vector<uint16_t> start = *DomainIndices(*manifest_, genome);  // CheckGenome passed
  if (const ValidConfigurations* listed = Listed()) return RepairFromList(*listed, start, random);

  const std::vector<KnobSpec>& knobs = manifest_->knobs;

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

// The same answer as the walk over subsets above: the fewest knobs changed, then the fewest
// steps, and among those the configurations in the order that walk meets them (subsets of
// knobs in its order, earlier knobs first; within one, the changed knobs' values ascending), so
// that `random` picks the same one.
std::optional<Genome> SearchSpace::RepairFromList(const ValidConfigurations& listed,
                                                  const std::vector<uint16_t>& start,
                                                  Random& random) const {
  const size_t width = start.size();
  size_t nearest_changes = std::numeric_limits<size_t>::max();
  int64_t nearest_steps = std::numeric_limits<int64_t>::max();
  std::vector<size_t> nearest;
  for (size_t i = 0; i < listed.size(); ++i) {
    const uint16_t* row = listed.Row(i);
    size_t changes = 0;
    int64_t steps = 0;
    for (size_t k = 0; k < width; ++k) {
      if (row[k] == start[k]) continue;
      ++changes;
      steps += std::abs(static_cast<int64_t>(row[k]) - static_cast<int64_t>(start[k]));
    }
    if (changes > nearest_changes || (changes == nearest_changes && steps > nearest_steps)) {
      continue;
    }
    if (changes < nearest_changes || steps < nearest_steps) nearest.clear();
    nearest_changes = changes;
    nearest_steps = steps;
    nearest.push_back(i);
  }
  if (nearest.empty()) return std::nullopt;
  std::stable_sort(nearest.begin(), nearest.end(), [&](size_t a, size_t b) {
    const uint16_t* ra = listed.Row(a);
    const uint16_t* rb = listed.Row(b);
    for (size_t k = 0; k < width; ++k) {
      const bool changed_a = ra[k] != start[k];
      const bool changed_b = rb[k] != start[k];
      if (changed_a != changed_b) return changed_a;
    }
    return std::lexicographical_compare(ra, ra + width, rb, rb + width);
  });
  std::vector<Genome> candidates;
  candidates.reserve(nearest.size());
  for (size_t i : nearest) candidates.push_back(listed.GenomeAt(*manifest_, i));
  return random.Pick(candidates);
}

namespace {

// The knob combinations of `knobs`, or kMaxEnumerated + 1 where there are more.
uint64_t CombinationsUpToLimit(const std::vector<KnobSpec>& knobs) {
  uint64_t combinations = 1;
  for (const KnobSpec& knob : knobs) {
    const uint64_t size = std::max<uint64_t>(1, knob.values.size());
    combinations = combinations > SearchSpace::kMaxEnumerated / size
                       ? SearchSpace::kMaxEnumerated + 1
                       : combinations * size;
  }
  return combinations;
}

}  // namespace

bool SearchSpace::Enumerable() const {
  return Listed() != nullptr || CombinationsUpToLimit(manifest_->knobs) <= kMaxEnumerated;
}

std::vector<Genome> SearchSpace::Enumerate() const {
  std::vector<Genome> valid;
  if (const ValidConfigurations* listed = Listed()) {
    valid.reserve(listed->size());
    for (size_t i = 0; i < listed->size(); ++i) valid.push_back(listed->GenomeAt(*manifest_, i));
    return valid;
  }
  const std::vector<KnobSpec>& knobs = manifest_->knobs;
  for (const KnobSpec& knob : knobs) {
    if (knob.values.empty()) return valid;
  }
  // Tested one by one, a space this large would keep a sweep (or its --count) busy for hours
  // or forever; a space that large is cut by fixing knobs, not swept.
  if (CombinationsUpToLimit(knobs) > kMaxEnumerated) {
    throw Error("the space of " + manifest_->name + " holds more than " +
                std::to_string(kMaxEnumerated) +
                " knob combinations and too many valid ones to list; fix knobs (evo sweep --fix "
                "KNOB=VALUE) to cut it");
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

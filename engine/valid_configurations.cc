#include "engine/valid_configurations.h"

#include <algorithm>
#include <map>
#include <string>

#include "common/error.h"
#include "kernel_templates/configuration.h"

namespace evo {
namespace {

// The level of what only the problem and the arch decide: known before any knob.
constexpr int kFixed = -1;

// The deepest knob an expression needs, through the derived values it names.
int Level(const Expression& expr, const std::map<std::string, int, std::less<>>& levels) {
  int level = kFixed;
  for (const std::string& name : expr.Identifiers()) {
    const auto it = levels.find(name);
    if (it != levels.end()) level = std::max(level, it->second);
  }
  return level;
}

class Walk {
 public:
  Walk(const Manifest& manifest, const Problem& problem, const ArchInfo& arch,
       const std::function<bool(const Genome&)>& is_valid, size_t max_valid, size_t max_visits)
      : manifest_(manifest),
        is_valid_(is_valid),
        max_valid_(max_valid),
        max_visits_(max_visits),
        bindings_(FixedBindings(problem, arch)),
        indices_(manifest.knobs.size(), 0) {
    std::map<std::string, int, std::less<>> levels;
    for (size_t k = 0; k < manifest.knobs.size(); ++k)
      levels[manifest.knobs[k].name] = static_cast<int>(k);
    for (const DerivedSpec& derived : manifest.derived) {
      derived_levels_.push_back(Level(derived.expr, levels));
      levels[derived.name] = derived_levels_.back();
    }
    for (const ConstraintSpec& constraint : manifest.constraints)
      constraint_levels_.push_back(Level(constraint.expr, levels));
  }

  // False when the walk gave up (too many valid configurations or visits).
  bool Run(std::vector<uint16_t>& rows) {
    bool exact = true;
    if (Settle(kFixed, exact)) Visit(0, exact);
    rows = std::move(rows_);
    return !gave_up_;
  }

 private:
  // Evaluates what becomes known once the knob at `level` is bound, in the manifest's order;
  // false when a constraint fails. An evaluation that throws (a division by zero in a branch
  // the full test would never reach, say) turns `exact` off: below it nothing is dropped early
  // and each configuration meets the full test alone.
  bool Settle(int level, bool& exact) {
    try {
      for (size_t i = 0; i < manifest_.derived.size(); ++i) {
        if (derived_levels_[i] != level) continue;
        const DerivedSpec& derived = manifest_.derived[i];
        bindings_[derived.name] = derived.expr.Evaluate(bindings_);
      }
      for (size_t i = 0; i < manifest_.constraints.size(); ++i) {
        if (constraint_levels_[i] == level &&
            manifest_.constraints[i].expr.Evaluate(bindings_) == 0)
          return false;
      }
    } catch (const Error&) {
      exact = false;
    }
    return true;
  }

  void Visit(size_t knob, bool exact) {
    const std::vector<KnobSpec>& knobs = manifest_.knobs;
    if (knob == knobs.size()) {
      // On an exact path every derived value and constraint was evaluated as the full test
      // evaluates it, and none failed; elsewhere the full test decides.
      if (!exact) {
        Genome genome;
        for (size_t k = 0; k < knobs.size(); ++k)
          genome[knobs[k].name] = knobs[k].values[indices_[k]];
        if (!is_valid_(genome)) return;
      }
      if (rows_.size() / knobs.size() >= max_valid_) {  // List refuses a space without knobs
        gave_up_ = true;
        return;
      }
      rows_.insert(rows_.end(), indices_.begin(), indices_.end());
      return;
    }
    const KnobSpec& spec = knobs[knob];
    for (size_t v = 0; v < spec.values.size() && !gave_up_; ++v) {
      if (++visits_ > max_visits_) {
        gave_up_ = true;
        return;
      }
      indices_[knob] = static_cast<uint16_t>(v);
      bindings_[spec.name] = spec.values[v];
      bool still_exact = exact;
      if (exact && !Settle(static_cast<int>(knob), still_exact)) continue;
      Visit(knob + 1, still_exact);
    }
  }

  const Manifest& manifest_;
  const std::function<bool(const Genome&)>& is_valid_;
  size_t max_valid_;
  size_t max_visits_;
  Bindings bindings_;
  std::vector<int> derived_levels_;
  std::vector<int> constraint_levels_;
  std::vector<uint16_t> indices_;
  std::vector<uint16_t> rows_;
  size_t visits_ = 0;
  bool gave_up_ = false;
};

}  // namespace

std::optional<ValidConfigurations> ValidConfigurations::List(
    const Manifest& manifest, const Problem& problem, const ArchInfo& arch,
    const std::function<bool(const Genome&)>& is_valid, size_t max_valid, size_t max_visits) {
  // A space without knobs has one configuration, nothing worth a list.
  if (manifest.knobs.empty()) return std::nullopt;
  for (const KnobSpec& knob : manifest.knobs) {
    // Indices are 16 bits; an empty domain has no configuration to list.
    if (knob.values.empty() || knob.values.size() > 65535) return std::nullopt;
  }
  ValidConfigurations list;
  list.width_ = manifest.knobs.size();
  Walk walk(manifest, problem, arch, is_valid, max_valid, max_visits);
  if (!walk.Run(list.rows_)) return std::nullopt;
  return list;
}

Genome ValidConfigurations::GenomeAt(const Manifest& manifest, size_t i) const {
  Genome genome;
  const uint16_t* row = Row(i);
  for (size_t k = 0; k < width_; ++k)
    genome[manifest.knobs[k].name] = manifest.knobs[k].values[row[k]];
  return genome;
}

bool ValidConfigurations::Contains(const std::vector<uint16_t>& indices) const {
  if (indices.size() != width_) return false;
  size_t low = 0;
  size_t high = size();
  while (low < high) {
    const size_t middle = low + (high - low) / 2;
    const uint16_t* row = Row(middle);
    if (std::lexicographical_compare(row, row + width_, indices.begin(), indices.end())) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low < size() && std::equal(indices.begin(), indices.end(), Row(low));
}

std::optional<std::vector<uint16_t>> DomainIndices(const Manifest& manifest, const Genome& genome) {
  if (genome.size() != manifest.knobs.size()) return std::nullopt;
  std::vector<uint16_t> indices;
  indices.reserve(manifest.knobs.size());
  for (const KnobSpec& knob : manifest.knobs) {
    const auto it = genome.find(knob.name);
    if (it == genome.end()) return std::nullopt;
    const auto at = std::find(knob.values.begin(), knob.values.end(), it->second);
    if (at == knob.values.end()) return std::nullopt;
    indices.push_back(static_cast<uint16_t>(at - knob.values.begin()));
  }
  return indices;
}

}  // namespace evo

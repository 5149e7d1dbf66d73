#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "kernel_templates/arch.h"
#include "kernel_templates/genome.h"
#include "kernel_templates/manifest.h"

namespace evo {

// Every valid configuration of one space, listed once, as each knob's index into its domain.
//
// A template's knobs multiply into spaces where few configurations are valid (sdpa_hopper at a
// square shape: 1.2 million combinations, 1.9 % valid, the split-KV knobs mostly fixed by the
// problem). Drawing at random until one is valid, and repairing after 64 misses, then cost the
// search seconds per generation while the GPU waited. The walk here binds the knobs in the
// manifest's order and drops a branch as soon as a constraint whose names are all bound fails,
// so it visits little more than the valid configurations themselves.
class ValidConfigurations {
 public:
  // nullopt when the space holds more than `max_valid` valid configurations, or the walk
  // would visit more than `max_visits` partial ones: the caller then keeps testing each
  // configuration on its own. `is_valid` is the exact test: the walk asks it where an early
  // evaluation threw, and otherwise keeps only configurations whose every derived value and
  // constraint it evaluated as the test does, so the list is exactly the valid set. What
  // `is_valid` throws is thrown.
  static std::optional<ValidConfigurations> List(const Manifest& manifest, const Problem& problem,
                                                 const ArchInfo& arch,
                                                 const std::function<bool(const Genome&)>& is_valid,
                                                 size_t max_valid, size_t max_visits);

  size_t size() const { return rows_.size() / width_; }

  // The i-th valid configuration's domain indices, knobs in the manifest's order; the rows are
  // in the order of their index tuples (first knob slowest).
  const uint16_t* Row(size_t i) const { return rows_.data() + i * width_; }
  Genome GenomeAt(const Manifest& manifest, size_t i) const;

  // Whether the indices (one per knob, in the manifest's order) name a valid configuration.
  bool Contains(const std::vector<uint16_t>& indices) const;

 private:
  ValidConfigurations() = default;  // only List makes one, with at least one knob

  size_t width_ = 0;
  std::vector<uint16_t> rows_;  // size() rows of width_ indices, in ascending order
};

// A genome's domain indices in the manifest's order; nullopt when it lacks a knob, holds a name
// that is not a knob, or a value outside a knob's domain.
std::optional<std::vector<uint16_t>> DomainIndices(const Manifest& manifest, const Genome& genome);

}  // namespace evo

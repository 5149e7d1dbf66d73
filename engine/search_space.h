#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/random.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/genome.h"
#include "kernel_templates/template_library.h"

namespace evo {

// The configurations of one task: every knob's domain, restricted by the manifest's named
// constraints for one problem and one arch.
class SearchSpace {
 public:
  SearchSpace(const Manifest& manifest, Problem problem, ArchInfo arch);

  const Manifest& manifest() const { return *manifest_; }
  const Problem& problem() const { return problem_; }
  const ArchInfo& arch() const { return arch_; }

  std::optional<ConstraintViolation> Violation(const Genome& genome) const;
  bool IsValid(const Genome& genome) const { return !Violation(genome); }

  // A valid configuration drawn at random: each knob uniformly from its domain, redrawn while
  // invalid (a bounded number of times, then repaired). nullopt only when nothing is valid.
  std::optional<Genome> Sample(Random& random) const;

  // The valid configuration nearest to `genome`: fewest knobs changed, then the fewest steps
  // along the domains' order; among equally near ones, `random` picks. `genome` itself when
  // valid; nullopt when no configuration is valid.
  std::optional<Genome> Repair(const Genome& genome, Random& random) const;

  // Every valid configuration, in the domains' order (first knob slowest).
  std::vector<Genome> Enumerate() const;

 private:
  const Manifest* manifest_;
  Problem problem_;
  ArchInfo arch_;
};

}  // namespace evo

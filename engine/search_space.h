#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/random.h"
#include "engine/valid_configurations.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/genome.h"
#include "kernel_templates/template_library.h"

namespace evo {

// The configurations of one task: every knob's domain, restricted by the manifest's named
// constraints for one problem and one arch.
class SearchSpace {
 public:
  // Spaces of up to `max_listed` valid configurations are listed once, at the first Sample,
  // Repair or Enumerate, and answered from the list from then on (engine/valid_configurations);
  // 0 tests every configuration on its own. The answers are the same either way.
  static constexpr size_t kMaxListed = size_t{1} << 18;
  // Partial configurations the listing walk may visit before it gives up on a space: about a
  // second, paid once per run.
  static constexpr size_t kMaxListingVisits = size_t{4} << 20;

  SearchSpace(const Manifest& manifest, Problem problem, ArchInfo arch,
              size_t max_listed = kMaxListed);

  const Manifest& manifest() const { return *manifest_; }
  const Problem& problem() const { return problem_; }
  const ArchInfo& arch() const { return arch_; }

  std::optional<ConstraintViolation> Violation(const Genome& genome) const;
  bool IsValid(const Genome& genome) const;

  // A valid configuration drawn at random: each knob uniformly from its domain, redrawn while
  // invalid, a bounded number of times; then, in a listed space, one of the listed valid
  // configurations uniformly (as the redraws would have found), else the last draw repaired.
  // nullopt only when nothing is valid.
  std::optional<Genome> Sample(Random& random) const;

  // The valid configuration nearest to `genome`: fewest knobs changed, then the fewest steps
  // along the domains' order; among equally near ones, `random` picks. `genome` itself when
  // valid; nullopt when no configuration is valid.
  std::optional<Genome> Repair(const Genome& genome, Random& random) const;

  // Every valid configuration, in the domains' order (first knob slowest). A space that cannot
  // be listed and holds more than kMaxEnumerated knob combinations throws evo::Error, naming
  // --fix, rather than test them one by one.
  std::vector<Genome> Enumerate() const;
  static constexpr uint64_t kMaxEnumerated = uint64_t{1} << 24;
  // Whether Enumerate answers (rather than throws): the space is listed or small enough.
  bool Enumerable() const;

 private:
  // The list, made on the first call; nullptr where the space is too large to list.
  const ValidConfigurations* Listed() const;
  // `start`: the configuration to repair, as DomainIndices.
  std::optional<Genome> RepairFromList(const ValidConfigurations& listed,
                                       const std::vector<uint16_t>& start, Random& random) const;

  // Shared by copies of the space, and made once even when lanes ask together.
  struct Listing {
    std::once_flag once;
    std::atomic<bool> made{false};
    std::optional<ValidConfigurations> valid;
  };

  const Manifest* manifest_;
  Problem problem_;
  ArchInfo arch_;
  size_t max_listed_;
  std::shared_ptr<Listing> listing_ = std::make_shared<Listing>();
};

}  // namespace evo

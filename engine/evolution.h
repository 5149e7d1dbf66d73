#pragma once

#include <cstdint>
#include <vector>

#include "engine/insights.h"
#include "engine/search_space.h"
#include "population/candidate.h"

namespace evo {

struct EvolutionOptions {
  double mutation_share = 0.6;     // of the children of generations after the first
  double crossover_share = 0.25;   // the rest is random exploration
  double two_knob_mutation = 0.3;  // chance that a mutation changes two knobs instead of one
};

// The search's operators. Generation 0 is the template's defaults, its manifest's starting
// points, then random valid configurations. Later generations are children of the elite: a parent
// mutated in one or two knobs (biased by the insights), two elites crossed knob by knob, and random
// exploration. Invalid children are repaired; a configuration already in the history or earlier in
// the same generation is never proposed again.
//
// Deterministic: the proposals depend only on (seed, generation, history, elite), so a run
// resumed from its database proposes exactly what the uninterrupted run would have.
class Evolution {
 public:
  Evolution(const SearchSpace& space, uint64_t seed, EvolutionOptions options = {});

  // Up to `count` new valid configurations; fewer only when the space has no more.
  // `history`: every candidate of the run (pending ones too), by id; `elite`: best first.
  std::vector<Proposal> Propose(int generation, int count,
                                const std::vector<CandidateRecord>& history,
                                const std::vector<CandidateRecord>& elite);

  // The insights the last Propose acted on (for progress output).
  const Insights& last_insights() const { return last_insights_; }

 private:
  const SearchSpace& space_;
  uint64_t seed_;
  EvolutionOptions options_;
  Insights last_insights_;
};

}  // namespace evo

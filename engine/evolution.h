#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "engine/cost_model.h"
#include "engine/search_space.h"
#include "population/candidate.h"

namespace evo {

struct EvolutionOptions {
  // The first generation: the defaults and the manifest's starting points, then random
  // configurations up to this many in all. Smaller than the later generations because random
  // draws teach the cost model less than its own choices: the sooner it ranks, the fewer
  // candidates the search spends before its choices are informed.
  int first_generation_size = 8;
  // Of each generation after the first: at most this share goes to the incumbent's unexplored
  // one-knob neighbours (best-ranked first), so that the best so far is never left with a
  // neighbour unmeasured for long, whatever the model believes. The model ranks a neighbour of
  // the best low where it saw failures nearby, and that is where fast kernels are.
  double neighbour_share = 0.375;
  // Of each generation after the first: this share goes to the unexplored configurations whose
  // knob values are most often those of the fastest candidates, each knob read alone
  // (engine/knob_marginals), after the neighbours and before the model's picks. Per-knob counts
  // settle on the values fast configurations share sooner than the model's joint forecasts do.
  double marginal_share = 0.125;
  // Of each generation after the first: this share is drawn uniformly from the unexplored
  // configurations, so a model that is sure and wrong keeps meeting counterexamples.
  double random_share = 0.125;
  // Spaces of up to this many knob combinations are ranked whole each generation; larger ones
  // through a pool of the elite's neighbours, mutations, crossovers and random draws.
  int64_t enumerate_limit = 50000;
  int pool_random = 1500;    // random draws in such a pool
  int pool_mutations = 400;  // two- and three-knob mutations of the best candidates in it
  int pool_parents = 8;      // the best timed candidates whose neighbours and crosses it holds
};

// What a generation after the first gives each share of EvolutionOptions; the model takes the
// rest (and the neighbours' slots it cannot fill).
struct GenerationShares {
  int neighbours = 0;
  int marginals = 0;
  int random = 0;
};
GenerationShares SharesOfSlots(const EvolutionOptions& options, int64_t first, int count);

// The search's proposals. Generation 0 is the template's defaults, its manifest's starting
// points, then random valid configurations, first_generation_size in all (or as many as there
// are hints, when more). Every later generation is chosen by a cost model
// (engine/cost_model.h) fitted on every finished candidate of the run: the unexplored
// configurations (the whole space where it is small, else a pool of children of the best) are
// ranked by expected improvement over the best time, and the generation takes the incumbent's
// best-ranked unexplored one-knob neighbours, then the configurations whose knob values the
// fastest candidates share most (engine/knob_marginals), then the best-ranked of the rest, then a
// few random ones. A configuration already in the history or earlier in the same generation is
// never proposed again.
//
// Deterministic: the proposals depend only on (seed, generation, history), so a run resumed
// from its database proposes exactly what the uninterrupted run would have.
class Evolution {
 public:
  Evolution(const SearchSpace& space, uint64_t seed, EvolutionOptions options = {});

  // Up to `count` new valid configurations; fewer only when the space has no more, or in
  // generation 0 (EvolutionOptions::first_generation_size).
  // `history`: every candidate of the run (pending ones too), by id; `elite`: best first (its
  // first names the incumbent when it holds one).
  std::vector<Proposal> Propose(int generation, int count,
                                const std::vector<CandidateRecord>& history,
                                const std::vector<CandidateRecord>& elite);

  // Configurations worth compiling while the pending candidates of `history` (the generation
  // just proposed) are measured, likeliest first: generation `generation` as Propose would make
  // it should none of them beat the incumbent, then as it would make it were one of them (the
  // first few, in their order) the new best. Only a guess, which changes nothing Propose does.
  std::vector<Genome> Speculate(int generation, int count,
                                const std::vector<CandidateRecord>& history,
                                const std::vector<CandidateRecord>& elite);

 private:
  const std::vector<double>& Features(const Genome& genome);
  // Every valid configuration, when the space is small enough to rank whole.
  const std::vector<Genome>* Enumerated();

  const SearchSpace& space_;
  uint64_t seed_;
  EvolutionOptions options_;
  FeatureMap features_;
  // Caches of pure functions of the space: they change nothing the search decides.
  std::map<Genome, std::vector<double>> feature_cache_;
  std::optional<std::vector<Genome>> enumerated_;
  bool enumerable_checked_ = false;
};

}  // namespace evo

#include "engine/evolution.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "engine/knob_marginals.h"

namespace evo {
namespace {

// Draws of a random configuration before the unexplored rest of the space is enumerated:
// duplicates become common late in a search.
constexpr int kRandomAttempts = 8;

// What a configuration one (two) knobs away from one the generation already took still counts,
// as a logarithm added to its acquisition: half (four fifths) of its expected improvement.
const double kOneKnobAway = std::log(0.5);
const double kTwoKnobsAway = std::log(0.8);

// A configuration the generation may take, with the model's view of it.
struct Ranked {
  Genome genome;
  CostEstimate estimate;
  double score = 0;       // the model's acquisition value
  uint64_t tiebreak = 0;  // random, so equal scores are not taken in the genomes' order
  std::string origin;     // how the pool came by it, for the operator's name
  std::optional<int64_t> parent1;
  std::optional<int64_t> parent2;
};

// How many knobs two configurations of one space set differently (genomes of one space hold the
// same knobs, in the same map order).
int KnobsDiffering(const Genome& a, const Genome& b) {
  int knobs = 0;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end() && ib != b.end(); ++ia, ++ib) {
    if (ia->second != ib->second) ++knobs;
  }
  return knobs;
}

bool Better(const Ranked& a, const Ranked& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.estimate.log_us != b.estimate.log_us) return a.estimate.log_us < b.estimate.log_us;
  return a.tiebreak < b.tiebreak;
}

std::string Forecast(const CostEstimate& estimate) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g us", std::exp(estimate.log_us));
  return text;
}

std::string Change(const std::string& knob, int64_t from, int64_t to) {
  return knob + " " + std::to_string(from) + "->" + std::to_string(to);
}

// The timed candidate with the lowest median: the model's best, also before any confirmation.
const CandidateRecord* FastestTimed(const std::vector<CandidateRecord>& history) {
  const CandidateRecord* best = nullptr;
  for (const CandidateRecord& record : history) {
    if (record.state != CandidateState::kFinished || record.outcome.status != Status::kMeasured ||
        record.outcome.timing() == nullptr) {
      continue;
    }
    if (best == nullptr || record.outcome.timing()->median_us < best->outcome.timing()->median_us) {
      best = &record;
    }
  }
  return best;
}

}  // namespace

// How many of the slots [first, first + count) after generation 0 go to each share. Slot by
// slot, the share furthest behind its part of the slots so far takes the next (ties to the
// neighbours, then the marginals, the random picks, the model last), so that any generation size
// keeps the mix: per generation, 4 slots would round 1.5 neighbours and 0.5 marginal and random
// picks each to one, and 2 slots would round them past the generation. Where each share of 16 is
// whole, every 16 slots from the first hold exactly those counts, as a generation of 16 did.
GenerationShares SharesOfSlots(const EvolutionOptions& options, int64_t first, int count) {
  const std::array<double, 4> part = {
      options.neighbour_share, options.marginal_share, options.random_share,
      1.0 - options.neighbour_share - options.marginal_share - options.random_share};
  std::array<int64_t, 4> taken = {0, 0, 0, 0};
  GenerationShares shares;
  for (int64_t slot = 0; slot < first + count; ++slot) {
    const auto owed = [&](size_t role) {
      return part[role] * static_cast<double>(slot + 1) - static_cast<double>(taken[role]);
    };
    size_t role = 0;
    for (size_t i = 1; i < part.size(); ++i) {
      if (owed(i) > owed(role)) role = i;
    }
    ++taken[role];
    if (slot < first) continue;
    if (role == 0) ++shares.neighbours;
    if (role == 1) ++shares.marginals;
    if (role == 2) ++shares.random;
  }
  return shares;
}

Evolution::Evolution(const SearchSpace& space, uint64_t seed, EvolutionOptions options)
    : space_(space), seed_(seed), options_(options), features_(space) {}

const std::vector<double>& Evolution::Features(const Genome& genome) {
  auto it = feature_cache_.find(genome);
  if (it == feature_cache_.end())
    it = feature_cache_.emplace(genome, features_.Features(genome)).first;
  return it->second;
}

const std::vector<Genome>* Evolution::Enumerated() {
  if (!enumerable_checked_) {
    enumerable_checked_ = true;
    int64_t combinations = 1;
    for (const KnobSpec& knob : space_.manifest().knobs) {
      combinations *= std::max<int64_t>(1, static_cast<int64_t>(knob.values.size()));
      if (combinations > options_.enumerate_limit) break;
    }
    if (combinations <= options_.enumerate_limit) enumerated_ = space_.Enumerate();
  }
  return enumerated_ ? &*enumerated_ : nullptr;
}

std::vector<Proposal> Evolution::Propose(int generation, int count,
                                         const std::vector<CandidateRecord>& history,
                                         const std::vector<CandidateRecord>& elite) {
  Random random(StreamSeed(seed_, static_cast<uint64_t>(generation)));
  std::set<Genome> seen;
  for (const CandidateRecord& record : history) seen.insert(record.proposal.genome);
  std::vector<Proposal> proposals;
  int limit = count;
  const auto full = [&] { return static_cast<int>(proposals.size()) >= limit; };
  const auto take = [&](Proposal proposal) {
    if (full() || !seen.insert(proposal.genome).second) return false;
    proposals.push_back(std::move(proposal));
    return true;
  };
  // Random valid configurations not yet tried, until the generation is full or the space has
  // no more.
  const auto fill_randomly = [&] {
    std::optional<std::vector<Genome>> unexplored;
    while (!full()) {
      bool taken = false;
      for (int attempt = 0; !taken && attempt < kRandomAttempts; ++attempt) {
        std::optional<Genome> genome = space_.Sample(random);
        if (!genome) return;
        taken = take({std::move(*genome), "random", std::nullopt, std::nullopt});
      }
      if (taken) continue;
      // A space too large to list or enumerate leaves the generation short here rather than
      // fail the run: its random draws found only seen configurations, which in such a space
      // is rare luck, not exhaustion.
      if (!unexplored && !space_.Enumerable()) return;
      if (!unexplored) unexplored = space_.Enumerate();
      std::erase_if(*unexplored, [&](const Genome& genome) { return seen.count(genome) > 0; });
      if (unexplored->empty()) return;
      take({random.Pick(*unexplored), "random (unexplored)", std::nullopt, std::nullopt});
    }
  };

  if (generation == 0) {
    // The defaults, then the manifest's starting points, skipping any this problem makes
    // invalid (a starting point is tried as written or not at all).
    const Manifest& manifest = space_.manifest();
    Genome defaults = DefaultGenome(manifest);
    if (space_.IsValid(defaults)) {
      take({defaults, "default", std::nullopt, std::nullopt});
    } else if (std::optional<Genome> repaired = space_.Repair(defaults, random)) {
      take({std::move(*repaired), "default +repair", std::nullopt, std::nullopt});
    }
    for (const auto& point : manifest.starting_points) {
      Genome genome = DefaultGenome(manifest);
      for (const auto& [knob, value] : point) genome[knob] = value;
      if (space_.IsValid(genome))
        take({std::move(genome), "starting point", std::nullopt, std::nullopt});
    }
    // The hints are all tried; random draws only make the generation up to its size.
    limit = std::min(count,
                     std::max(options_.first_generation_size, static_cast<int>(proposals.size())));
    fill_randomly();
    return proposals;
  }

  CostModel model(features_);
  model.Fit(history, random);
  if (model.timed() == 0) {
    // Nothing timed to learn from: the first generation still pending, or all of it failed.
    fill_randomly();
    return proposals;
  }
  const auto rank = [&](Genome genome, std::string origin, std::optional<int64_t> parent1,
                        std::optional<int64_t> parent2) {
    Ranked ranked;
    ranked.estimate = model.Predict(Features(genome));
    ranked.score = model.Acquisition(ranked.estimate);
    ranked.tiebreak = random.Next();
    ranked.genome = std::move(genome);
    ranked.origin = std::move(origin);
    ranked.parent1 = parent1;
    ranked.parent2 = parent2;
    return ranked;
  };
  const auto propose = [&](const Ranked& ranked, const std::string& name) {
    return take({ranked.genome, name + " (" + Forecast(ranked.estimate) + ")", ranked.parent1,
                 ranked.parent2});
  };

  int64_t first_generation = 0;
  for (const CandidateRecord& record : history) first_generation += record.generation == 0;
  const auto [neighbour_count, marginal_count, random_count] =
      SharesOfSlots(options_, static_cast<int64_t>(history.size()) - first_generation, count);

  // One-knob neighbours, best-ranked first: of the incumbent until they are all measured, then
  // of the next best measured candidate, and so on. Fast kernels sit at the edge of what the
  // registers and shared memory allow, where a model that saw failures nearby is least sure;
  // a complete scan around the best ones does not depend on it.
  std::vector<const CandidateRecord*> centers;
  if (const CandidateRecord* incumbent = elite.empty() ? FastestTimed(history) : &elite.front()) {
    centers.push_back(incumbent);
  }
  {
    std::vector<const CandidateRecord*> timed;
    for (const CandidateRecord& record : history) {
      if (record.state == CandidateState::kFinished && record.outcome.status == Status::kMeasured &&
          record.outcome.timing() != nullptr) {
        timed.push_back(&record);
      }
    }
    std::stable_sort(timed.begin(), timed.end(), [](const auto* a, const auto* b) {
      return a->outcome.timing()->median_us < b->outcome.timing()->median_us;
    });
    // After the incumbent, the next centre is the fastest candidate at least two knobs from
    // every centre before it: the next fastest is mostly one of the incumbent's neighbours, whose
    // neighbourhood is the incumbent's two-knob ring again, and a second basin (sdpa_fp16 causal
    // 2x16x2048x128: BLOCK_M=128 NUM_WARPS=8 STAGES=1 at 0.87 of the best, one knob from it,
    // below 21 faster candidates, 17 of them of the BLOCK_M=64 basin) was never scanned.
    for (const CandidateRecord* record : timed) {
      bool apart = true;
      for (const CandidateRecord* c : centers)
        apart = apart && KnobsDiffering(c->proposal.genome, record->proposal.genome) >= 2;
      if (apart) centers.push_back(record);
    }
  }
  int neighbours_taken = 0;
  for (const CandidateRecord* center_record : centers) {
    if (neighbours_taken >= neighbour_count) break;
    const Genome& center = center_record->proposal.genome;
    std::vector<Ranked> neighbours;
    for (const KnobSpec& knob : space_.manifest().knobs) {
      const int64_t from = center.at(knob.name);
      for (int64_t to : knob.values) {
        if (to == from) continue;
        Genome genome = center;
        genome[knob.name] = to;
        if (seen.count(genome) > 0 || !space_.IsValid(genome)) continue;
        neighbours.push_back(
            rank(std::move(genome), Change(knob.name, from, to), center_record->id, std::nullopt));
      }
    }
    std::stable_sort(neighbours.begin(), neighbours.end(), Better);
    for (const Ranked& ranked : neighbours) {
      if (neighbours_taken >= neighbour_count) break;
      if (propose(ranked, "neighbour " + ranked.origin)) ++neighbours_taken;
    }
  }

  // Everything else the generation may take, ranked.
  std::vector<Ranked> pool;
  if (const std::vector<Genome>* all = Enumerated()) {
    for (const Genome& genome : *all) {
      if (seen.count(genome) == 0) pool.push_back(rank(genome, "", std::nullopt, std::nullopt));
    }
  } else {
    // Children of the best timed candidates and random draws: the model picks among many more
    // than are measured.
    std::vector<const CandidateRecord*> parents;
    for (const CandidateRecord& record : history) {
      if (record.state == CandidateState::kFinished && record.outcome.status == Status::kMeasured &&
          record.outcome.timing() != nullptr) {
        parents.push_back(&record);
      }
    }
    std::stable_sort(parents.begin(), parents.end(), [](const auto* a, const auto* b) {
      return a->outcome.timing()->median_us < b->outcome.timing()->median_us;
    });
    parents.resize(std::min(parents.size(), static_cast<size_t>(options_.pool_parents)));
    std::set<Genome> pooled;
    const auto add = [&](Genome genome, std::string origin, std::optional<int64_t> parent1,
                         std::optional<int64_t> parent2) {
      if (seen.count(genome) > 0 || pooled.count(genome) > 0 || !space_.IsValid(genome)) return;
      pooled.insert(genome);
      pool.push_back(rank(std::move(genome), std::move(origin), parent1, parent2));
    };
    const std::vector<KnobSpec>& knobs = space_.manifest().knobs;
    for (const CandidateRecord* parent : parents) {
      const Genome& center = parent->proposal.genome;
      for (const KnobSpec& knob : knobs) {
        for (int64_t to : knob.values) {
          if (to == center.at(knob.name)) continue;
          Genome genome = center;
          genome[knob.name] = to;
          add(std::move(genome), "mutate " + Change(knob.name, center.at(knob.name), to),
              parent->id, std::nullopt);
        }
      }
    }
    for (int i = 0; !parents.empty() && i < options_.pool_mutations; ++i) {
      // The better of two ranks: the best parents breed more.
      const auto size = static_cast<int64_t>(parents.size());
      const CandidateRecord& parent =
          *parents[static_cast<size_t>(std::min(random.Below(size), random.Below(size)))];
      Genome genome = parent.proposal.genome;
      std::string changes;
      for (int n = random.Chance(0.5) ? 2 : 3; n > 0; --n) {
        const KnobSpec& knob = random.Pick(knobs);
        const int64_t from = genome.at(knob.name);
        const int64_t to = random.Pick(knob.values);
        if (to == from) continue;
        genome[knob.name] = to;
        changes += (changes.empty() ? "" : ", ") + Change(knob.name, from, to);
      }
      if (!changes.empty()) add(std::move(genome), "mutate " + changes, parent.id, std::nullopt);
      if (parents.size() >= 2) {
        const size_t a = static_cast<size_t>(random.Below(size));
        size_t b = static_cast<size_t>(random.Below(size - 1));
        if (b >= a) ++b;
        Genome cross;
        for (const KnobSpec& knob : knobs) {
          cross[knob.name] =
              (random.Chance(0.5) ? parents[a] : parents[b])->proposal.genome.at(knob.name);
        }
        add(std::move(cross), "crossover", parents[a]->id, parents[b]->id);
      }
    }
    for (int i = 0; i < options_.pool_random; ++i) {
      std::optional<Genome> genome = space_.Sample(random);
      if (!genome) break;
      add(std::move(*genome), "random", std::nullopt, std::nullopt);
    }
  }
  std::erase_if(pool, [&](const Ranked& ranked) { return seen.count(ranked.genome) > 0; });
  std::stable_sort(pool.begin(), pool.end(), Better);

  // The configurations whose knob values the fastest candidates share most, each knob read
  // alone (engine/knob_marginals): where the model is still unsure of the best's region, they
  // combine what each knob's fastest value says. Ties keep the model's order.
  if (marginal_count > 0) {
    const KnobMarginals marginals(space_.manifest(), history);
    std::vector<double> ratio(pool.size());
    std::vector<size_t> order(pool.size());
    for (size_t i = 0; i < pool.size(); ++i) {
      ratio[i] = marginals.LogRatio(pool[i].genome);
      order[i] = i;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return ratio[a] > ratio[b]; });
    int marginal_taken = 0;
    for (size_t i : order) {
      if (marginal_taken >= marginal_count) break;
      if (propose(pool[i], "marginal")) ++marginal_taken;
    }
  }

  // The best-ranked, leaving room for the random share. The generation's candidates are
  // measured before the model learns from any of them, so they should not all bet on one
  // guess: once a configuration is taken, those one or two knobs away from it count less.
  std::vector<double> value(pool.size());
  for (size_t i = 0; i < pool.size(); ++i) value[i] = pool[i].score;
  std::vector<bool> used(pool.size(), false);
  const auto discount = [&](const Genome& taken) {
    for (size_t i = 0; i < pool.size(); ++i) {
      if (used[i]) continue;
      const int d = KnobsDiffering(taken, pool[i].genome);
      if (d == 1) value[i] += kOneKnobAway;
      if (d == 2) value[i] += kTwoKnobsAway;
    }
  };
  for (const Proposal& proposal : proposals) discount(proposal.genome);
  while (static_cast<int>(proposals.size()) < count - random_count) {
    // The pool is sorted best first, so the first of equal values wins, as a stable sort would.
    size_t best = pool.size();
    for (size_t i = 0; i < pool.size(); ++i) {
      if (!used[i] && (best == pool.size() || value[i] > value[best])) best = i;
    }
    if (best == pool.size()) break;
    used[best] = true;
    const Ranked& ranked = pool[best];
    if (propose(ranked, ranked.origin.empty() ? "model" : "model: " + ranked.origin)) {
      discount(ranked.genome);
    }
  }
  std::vector<size_t> rest;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (!used[i]) rest.push_back(i);
  }
  while (!full() && !rest.empty()) {
    const auto pick = static_cast<size_t>(random.Below(static_cast<int64_t>(rest.size())));
    const Ranked& ranked = pool[rest[pick]];
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(pick));
    take({ranked.genome, "random", std::nullopt, std::nullopt});
  }
  fill_randomly();
  return proposals;
}

std::vector<Genome> Evolution::Speculate(int generation, int count,
                                         const std::vector<CandidateRecord>& history,
                                         const std::vector<CandidateRecord>& elite) {
  // A generation's neighbours come first, and a neighbour of the incumbent is the likeliest new
  // best: only the first pending candidates get a plan of their own. Eight, a generation of 16 up
  // to its checkpoint (engine/search.cc), where a new best cuts it short and the next generation
  // is due at once: guessing around the first four left 100 candidates 9 % slower on the GPU
  // than without the checkpoint, around eight 5 % (BENCHMARKS.md, thirty-first session).
  constexpr int kCentres = 8;
  std::vector<Genome> guesses;
  // Before anything is timed the next generation is random draws: nothing to guess.
  if (FastestTimed(history) == nullptr) return guesses;
  std::set<Genome> guessed;
  const auto add = [&](const std::vector<Proposal>& proposals) {
    for (const Proposal& proposal : proposals) {
      if (guessed.insert(proposal.genome).second) guesses.push_back(proposal.genome);
    }
  };
  add(Propose(generation, count, history, elite));
  int centres = 0;
  for (const CandidateRecord& record : history) {
    if (record.state != CandidateState::kPending) continue;
    if (centres++ == kCentres) break;
    std::vector<CandidateRecord> as_best = {record};
    as_best.insert(as_best.end(), elite.begin(), elite.end());
    add(Propose(generation, count, history, as_best));
  }
  return guesses;
}

}  // namespace evo

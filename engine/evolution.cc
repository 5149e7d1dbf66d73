#include "engine/evolution.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace evo {
namespace {

// Tries of the drawn operator for one child before it falls back to random configurations,
// then to the unexplored rest of the space: duplicates become common late in a search, and the
// fallbacks keep a generation full until the space is exhausted.
constexpr int kOperatorAttempts = 8;
constexpr int kRandomAttempts = 8;
// Chance that a mutated knob jumps to any other value instead of one step along its domain,
// so a parent can leave a local minimum that single steps cannot.
constexpr double kJumpChance = 0.1;

size_t DomainIndex(const KnobSpec& knob, int64_t value) {
  return static_cast<size_t>(std::find(knob.values.begin(), knob.values.end(), value) -
                             knob.values.begin());
}

bool Avoided(const KnobBias& bias, int64_t value) {
  return std::find(bias.avoid.begin(), bias.avoid.end(), value) != bias.avoid.end();
}

// Indices of the values a mutation of `knob` may move to from `current`.
std::vector<size_t> Destinations(const KnobSpec& knob, const KnobBias& bias, int64_t current) {
  std::vector<size_t> destinations;
  for (size_t i = 0; i < knob.values.size(); ++i) {
    if (knob.values[i] != current && !Avoided(bias, knob.values[i])) destinations.push_back(i);
  }
  return destinations;
}

// An elite rank, better ranks more often: the better of two uniform draws, so rank r of n is
// drawn with chance (2(n - r) - 1) / n^2.
size_t PickRank(size_t n, Random& random) {
  const auto size = static_cast<int64_t>(n);
  return static_cast<size_t>(std::min(random.Below(size), random.Below(size)));
}

class ChildMaker {
 public:
  ChildMaker(const SearchSpace& space, const Insights& insights, const EvolutionOptions& options,
             const std::vector<CandidateRecord>& elite, Random& random)
      : space_(space), insights_(insights), options_(options), elite_(elite), random_(random) {}

  enum class Operator { kMutate, kCrossover, kRandom };

  // The operator of one child, by the options' shares; drawn once per child, so that
  // duplicates retried with the same operator do not tilt the shares toward random.
  Operator Draw() {
    if (elite_.empty()) return Operator::kRandom;
    const double draw = random_.Unit();
    if (draw < options_.mutation_share) return Operator::kMutate;
    if (draw < options_.mutation_share + options_.crossover_share) {
      return elite_.size() >= 2 ? Operator::kCrossover : Operator::kMutate;
    }
    return Operator::kRandom;
  }

  // One child; it may be invalid or a duplicate.
  std::optional<Proposal> Make(Operator op) {
    switch (op) {
      case Operator::kMutate:
        return Mutate();
      case Operator::kCrossover:
        return Crossover();
      case Operator::kRandom:
        break;
    }
    return Sample();
  }

  std::optional<Proposal> Sample() {
    std::optional<Genome> genome = space_.Sample(random_);
    if (!genome) return std::nullopt;
    return Proposal{std::move(*genome), "random", std::nullopt, std::nullopt};
  }

 private:
  std::optional<Proposal> Mutate() {
    const CandidateRecord& parent = elite_[PickRank(elite_.size(), random_)];
    Genome genome = parent.proposal.genome;

    std::vector<const KnobSpec*> mutable_knobs;
    for (const KnobSpec& knob : space_.manifest().knobs) {
      if (!Destinations(knob, Bias(knob), genome.at(knob.name)).empty()) {
        mutable_knobs.push_back(&knob);
      }
    }
    if (mutable_knobs.empty()) return Sample();
    const bool two = mutable_knobs.size() >= 2 && random_.Chance(options_.two_knob_mutation);

    std::string changes;
    bool insight = false;
    for (int n = two ? 2 : 1; n > 0; --n) {
      const size_t pick = PickWeighted(mutable_knobs);
      const KnobSpec& knob = *mutable_knobs[pick];
      mutable_knobs.erase(mutable_knobs.begin() + static_cast<std::ptrdiff_t>(pick));
      const int64_t from = genome.at(knob.name);
      const auto [to, followed_insight] = MutateKnob(knob, from);
      genome[knob.name] = to;
      insight = insight || followed_insight;
      changes += (changes.empty() ? "" : ", ") + knob.name + " " + std::to_string(from) + "->" +
                 std::to_string(to);
    }
    return Proposal{std::move(genome), "mutate " + changes + (insight ? " (insight)" : ""),
                    parent.id, std::nullopt};
  }

  std::optional<Proposal> Crossover() {
    const size_t first = PickRank(elite_.size(), random_);
    size_t second = PickRank(elite_.size() - 1, random_);
    if (second >= first) ++second;
    const Genome& a = elite_[first].proposal.genome;
    const Genome& b = elite_[second].proposal.genome;
    Genome genome;
    for (const KnobSpec& knob : space_.manifest().knobs) {
      genome[knob.name] = random_.Chance(0.5) ? b.at(knob.name) : a.at(knob.name);
    }
    return Proposal{std::move(genome), "crossover", elite_[first].id, elite_[second].id};
  }

  const KnobBias& Bias(const KnobSpec& knob) const {
    static const KnobBias kNeutral;
    const auto it = insights_.knobs.find(knob.name);
    return it == insights_.knobs.end() ? kNeutral : it->second;
  }

  size_t PickWeighted(const std::vector<const KnobSpec*>& knobs) {
    double total = 0;
    for (const KnobSpec* knob : knobs) total += std::max(Bias(*knob).weight, 0.0);
    if (total <= 0) return static_cast<size_t>(random_.Below(static_cast<int64_t>(knobs.size())));
    double draw = random_.Unit() * total;
    for (size_t i = 0; i < knobs.size(); ++i) {
      draw -= std::max(Bias(*knobs[i]).weight, 0.0);
      if (draw < 0) return i;
    }
    return knobs.size() - 1;
  }

  // The new value of one knob and whether the move went the way the insights lean. "Down" is
  // toward the start of the domain, the direction the insights measure costs along.
  std::pair<int64_t, bool> MutateKnob(const KnobSpec& knob, int64_t from) {
    const KnobBias& bias = Bias(knob);
    const std::vector<size_t> destinations = Destinations(knob, bias, from);
    if (random_.Chance(kJumpChance)) return {knob.values[random_.Pick(destinations)], false};
    const size_t current = DomainIndex(knob, from);
    const bool down = random_.Chance(bias.down);
    // The nearest allowed value that way, else the nearest the other way.
    auto below = std::find_if(destinations.rbegin(), destinations.rend(),
                              [&](size_t i) { return i < current; });
    auto above = std::find_if(destinations.begin(), destinations.end(),
                              [&](size_t i) { return i > current; });
    const bool went_down = down ? below != destinations.rend() : above == destinations.end();
    const size_t to = went_down ? *below : *above;
    const bool followed = (went_down && bias.down > 0.5) || (!went_down && bias.down < 0.5);
    return {knob.values[to], followed};
  }

  const SearchSpace& space_;
  const Insights& insights_;
  const EvolutionOptions& options_;
  const std::vector<CandidateRecord>& elite_;
  Random& random_;
};

}  // namespace

Evolution::Evolution(const SearchSpace& space, uint64_t seed, EvolutionOptions options)
    : space_(space), seed_(seed), options_(options) {}

std::vector<Proposal> Evolution::Propose(int generation, int count,
                                         const std::vector<CandidateRecord>& history,
                                         const std::vector<CandidateRecord>& elite) {
  Random random(StreamSeed(seed_, static_cast<uint64_t>(generation)));
  last_insights_ = DeriveInsights(space_.manifest(), history);
  ChildMaker maker(space_, last_insights_, options_, elite, random);

  std::set<Genome> seen;
  for (const CandidateRecord& record : history) seen.insert(record.proposal.genome);
  std::optional<std::vector<Genome>> unexplored;  // computed once, when first needed

  // Valid and new, or nothing.
  auto accept = [&](std::optional<Proposal> child) -> std::optional<Proposal> {
    if (!child) return std::nullopt;
    if (!space_.IsValid(child->genome)) {
      std::optional<Genome> repaired = space_.Repair(child->genome, random);
      if (!repaired) return std::nullopt;
      child->genome = std::move(*repaired);
      child->operator_name += " +repair";
    }
    if (seen.count(child->genome) > 0) return std::nullopt;
    return child;
  };

  // Generation 0 opens with the defaults and then the manifest's starting points, skipping any
  // this problem makes invalid (a starting point is tried as written or not at all).
  std::vector<Genome> openers;
  if (generation == 0) {
    const Manifest& manifest = space_.manifest();
    openers.push_back(DefaultGenome(manifest));
    for (const auto& point : manifest.starting_points) {
      Genome genome = DefaultGenome(manifest);
      for (const auto& [knob, value] : point) genome[knob] = value;
      if (space_.IsValid(genome)) openers.push_back(std::move(genome));
    }
  }
  size_t next_opener = 0;

  std::vector<Proposal> proposals;
  while (static_cast<int>(proposals.size()) < count) {
    std::optional<Proposal> child;
    while (!child && next_opener < openers.size()) {
      const char* name = next_opener == 0 ? "default" : "starting point";
      child = accept(Proposal{openers[next_opener++], name, std::nullopt, std::nullopt});
    }
    if (!child && generation > 0) {
      const ChildMaker::Operator op = maker.Draw();
      for (int attempt = 0; !child && attempt < kOperatorAttempts; ++attempt) {
        child = accept(maker.Make(op));
      }
    }
    for (int attempt = 0; !child && attempt < kRandomAttempts; ++attempt) {
      child = accept(maker.Sample());
    }
    if (!child) {
      if (!unexplored) unexplored = space_.Enumerate();
      std::erase_if(*unexplored, [&](const Genome& genome) { return seen.count(genome) > 0; });
      if (unexplored->empty()) break;
      child = Proposal{random.Pick(*unexplored), "random (unexplored)", std::nullopt, std::nullopt};
    }
    seen.insert(child->genome);
    proposals.push_back(std::move(*child));
  }
  return proposals;
}

}  // namespace evo

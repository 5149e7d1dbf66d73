#include "engine/evolution.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>

#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

// Without the split-KV knobs, whose values only matter for grouped heads and short queries.
const Manifest& SdpaManifest() { return test::SdpaManifestWithoutSplitKnobs(); }

// A made-up kernel time with one best configuration (BLOCK_M=128 BLOCK_N=64 NUM_WARPS=4
// STAGES=3 FAST_EXP=1 PERSISTENT=0), smooth around it, and an interaction between the tiles.
double Objective(const Genome& g) {
  const auto square = [](int64_t x) { return static_cast<double>(x * x); };
  const int64_t m = test::SdpaKnobPosition("BLOCK_M", g);
  const int64_t n = test::SdpaKnobPosition("BLOCK_N", g);
  return 20 + 3 * square(m - 3) + 2 * square(n - 2) +
         2 * square(test::SdpaKnobPosition("NUM_WARPS", g) - 2) +
         square(test::SdpaKnobPosition("STAGES", g) - 2) + 4.0 * (1 - g.at("FAST_EXP")) +
         1.5 * static_cast<double>(g.at("PERSISTENT")) +
         0.5 * std::abs(static_cast<double>(m + n - 5));
}

// A run of the engine against the objective: every proposal is "evaluated" at once; those
// whose tiles are too heavy spill, the rest are measured and confirmed; the elite is the best
// `elite_size` by score.
class Simulation {
 public:
  Simulation(uint64_t seed, EvolutionOptions options = {}, int elite_size = 3)
      : evolution_(test::SdpaSpaceWithoutSplitKnobs(), seed, options), elite_size_(elite_size) {}

  // The proposals of the next generation, recorded as finished candidates.
  std::vector<Proposal> Step(int count) {
    const std::vector<Proposal> proposals =
        evolution_.Propose(generation_, count, history_, Elite());
    for (const Proposal& proposal : proposals) Record(proposal);
    ++generation_;
    return proposals;
  }

  std::vector<CandidateRecord> Elite() const {
    std::vector<CandidateRecord> measured;
    for (const CandidateRecord& record : history_) {
      if (record.score_us()) measured.push_back(record);
    }
    std::stable_sort(measured.begin(), measured.end(),
                     [](const auto& a, const auto& b) { return *a.score_us() < *b.score_us(); });
    measured.resize(std::min(measured.size(), static_cast<size_t>(elite_size_)));
    return measured;
  }

  double Best() const {
    double best = 1e9;
    for (const CandidateRecord& record : history_) {
      if (record.score_us()) best = std::min(best, *record.score_us());
    }
    return best;
  }

  const std::vector<CandidateRecord>& history() const { return history_; }
  const Evolution& evolution() const { return evolution_; }

 private:
  void Record(const Proposal& proposal) {
    CandidateRecord record;
    record.id = static_cast<int64_t>(history_.size()) + 1;
    record.generation = generation_;
    record.proposal = proposal;
    record.state = CandidateState::kFinished;
    const Genome& g = proposal.genome;
    KernelResources resources;
    resources.registers = static_cast<int>(32 + g.at("BLOCK_M") / g.at("NUM_WARPS") / 2);
    resources.spill_stores = resources.registers > 120 ? 32 : 0;
    record.outcome.resources = resources;
    record.outcome.threads_per_block = g.at("NUM_WARPS") * 32;
    if (resources.spills()) {
      record.outcome.status = Status::kResourceReject;
      record.outcome.reason = "spills registers: 32 bytes stored, 0 bytes loaded";
    } else {
      record.outcome.status = Status::kMeasured;
      TimingFigures timing;
      timing.median_us = Objective(g);
      record.outcome.gpu = GpuVerdict{};
      record.outcome.gpu->timing = timing;
      record.confirmation = timing;
    }
    history_.push_back(std::move(record));
  }

  Evolution evolution_;
  int elite_size_;
  int generation_ = 0;
  std::vector<CandidateRecord> history_;
};

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The manifest's starting points as whole configurations, those valid in `space` only.
std::vector<Genome> ValidStartingPoints(const SearchSpace& space) {
  std::vector<Genome> genomes;
  for (const auto& point : SdpaManifest().starting_points) {
    Genome genome = DefaultGenome(SdpaManifest());
    for (const auto& [knob, value] : point) genome[knob] = value;
    if (space.IsValid(genome)) genomes.push_back(genome);
  }
  return genomes;
}

TEST_CASE("generation 0 is the default, the starting points, then random configurations",
          "[engine]") {
  EvolutionOptions options;
  options.first_generation_size = 16;
  Simulation simulation(42, options);
  const std::vector<Proposal> proposals = simulation.Step(16);
  REQUIRE(proposals.size() == 16);
  CHECK(proposals[0].genome == DefaultGenome(SdpaManifest()));
  CHECK(proposals[0].operator_name == "default");
  const std::vector<Genome> starts = ValidStartingPoints(test::SdpaSpaceWithoutSplitKnobs());
  REQUIRE(SdpaManifest().starting_points.size() >= 2);
  REQUIRE(starts.size() == SdpaManifest().starting_points.size());  // all valid at D=64
  std::set<Genome> distinct;
  for (size_t i = 0; i < proposals.size(); ++i) {
    CHECK(test::SdpaSpaceWithoutSplitKnobs().IsValid(proposals[i].genome));
    CHECK_FALSE(proposals[i].parent1);
    if (i >= 1 && i <= starts.size()) {
      CHECK(proposals[i].genome == starts[i - 1]);
      CHECK(proposals[i].operator_name == "starting point");
    }
    if (i > starts.size()) CHECK(proposals[i].operator_name == "random");
    distinct.insert(proposals[i].genome);
  }
  CHECK(distinct.size() == proposals.size());
}

TEST_CASE("generation 0 is smaller than the later ones, and keeps every hint", "[engine]") {
  const std::vector<Genome> starts = ValidStartingPoints(test::SdpaSpaceWithoutSplitKnobs());
  REQUIRE(starts.size() == 6);
  for (const int size : {1, 4, 7, 8, 10}) {
    INFO("first_generation_size " << size);
    EvolutionOptions options;
    options.first_generation_size = size;
    Simulation simulation(9, options);
    // The default and the 6 starting points even past the size; random ones only up to it.
    const std::vector<Proposal> first = simulation.Step(16);
    CHECK(first.size() == static_cast<size_t>(std::max(size, 7)));
    for (size_t i = 7; i < first.size(); ++i) CHECK(first[i].operator_name == "random");
    CHECK(simulation.Step(16).size() == 16);
  }
  // By default 8: the model ranks from the second generation on, after 8 candidates.
  CHECK(EvolutionOptions{}.first_generation_size == 8);
  CHECK(Simulation(9).Step(16).size() == 8);
  // The count still bounds it: a budget of 3 is 3 candidates.
  CHECK(Simulation(9).Step(3).size() == 3);
}

TEST_CASE("starting points the problem makes invalid are skipped, not repaired", "[engine]") {
  Problem problem = DefaultProblem(SdpaManifest());
  ArchInfo small = ArchByName("sm_90");
  // 64 KiB per block: the default (40 KiB) fits; at D=64 the starting points with BLOCK_N=128
  // (136 KiB with 4 stages, 80 KiB with BLOCK_M=128) do not.
  small.max_smem_per_block_optin = 64 * 1024;
  const SearchSpace space(SdpaManifest(), problem, small);
  const std::vector<Genome> starts = ValidStartingPoints(space);
  REQUIRE(!starts.empty());
  REQUIRE(starts.size() < SdpaManifest().starting_points.size());
  Evolution evolution(space, 1);
  const std::vector<Proposal> proposals = evolution.Propose(0, 12, {}, {});
  REQUIRE(proposals.size() == static_cast<size_t>(EvolutionOptions{}.first_generation_size));
  CHECK(proposals[0].operator_name == "default");
  for (size_t i = 0; i < starts.size(); ++i) {
    CHECK(proposals[i + 1].genome == starts[i]);
    CHECK(proposals[i + 1].operator_name == "starting point");
  }
  for (size_t i = starts.size() + 1; i < proposals.size(); ++i) {
    CHECK(proposals[i].operator_name.find("starting point") == std::string::npos);
  }
  for (const Proposal& proposal : proposals) CHECK(space.IsValid(proposal.genome));
}

TEST_CASE("an invalid default is repaired", "[engine]") {
  Problem problem = DefaultProblem(SdpaManifest());
  ArchInfo small = ArchByName("sm_90");
  // Default tiles at D=64 need 40 KB; a 32 KB budget forces a smaller one.
  small.max_smem_per_block_optin = 32 * 1024;
  const SearchSpace space(SdpaManifest(), problem, small);
  REQUIRE_FALSE(space.IsValid(DefaultGenome(SdpaManifest())));
  Evolution evolution(space, 1);
  const std::vector<Proposal> proposals = evolution.Propose(0, 4, {}, {});
  REQUIRE(proposals.size() == 4);
  CHECK(proposals[0].operator_name == "default +repair");
  for (const Proposal& proposal : proposals) CHECK(space.IsValid(proposal.genome));
}

TEST_CASE("children are valid, new, and name their operator and parents", "[engine]") {
  Simulation simulation(7);
  std::set<Genome> seen;
  std::map<std::string, int> operators;
  for (int generation = 0; generation < 20; ++generation) {
    std::map<int64_t, Genome> measured;
    for (const CandidateRecord& record : simulation.history()) {
      if (record.outcome.status == Status::kMeasured) measured[record.id] = record.proposal.genome;
    }
    for (const Proposal& proposal : simulation.Step(16)) {
      INFO(proposal.operator_name);
      REQUIRE(test::SdpaSpaceWithoutSplitKnobs().IsValid(proposal.genome));
      REQUIRE(seen.insert(proposal.genome).second);
      const std::string& name = proposal.operator_name;
      if (StartsWith(name, "neighbour ")) {
        ++operators["neighbour"];
        // One knob of a measured candidate changed, the one the name gives.
        REQUIRE(proposal.parent1);
        REQUIRE(measured.count(*proposal.parent1) == 1);
        CHECK_FALSE(proposal.parent2);
        const Genome& parent = measured.at(*proposal.parent1);
        int changed = 0;
        for (const auto& [knob, value] : proposal.genome) {
          if (parent.at(knob) == value) continue;
          ++changed;
          CHECK(name.find(knob + " " + std::to_string(parent.at(knob)) + "->" +
                          std::to_string(value)) != std::string::npos);
        }
        CHECK(changed == 1);
      } else if (StartsWith(name, "marginal")) {
        ++operators["marginal"];
        CHECK(name.find(" us)") != std::string::npos);
        CHECK_FALSE(proposal.parent1);
      } else if (StartsWith(name, "model")) {
        ++operators["model"];
        // The forecast it was chosen on.
        CHECK(name.find(" us)") != std::string::npos);
      } else {
        CHECK((name == "default" || name == "starting point" || StartsWith(name, "random")));
        ++operators[name.substr(0, name.find(' '))];
        CHECK_FALSE(proposal.parent1);
      }
    }
  }
  CHECK(operators["neighbour"] > 20);
  CHECK(operators["model"] > 100);
  CHECK(operators["marginal"] > 20);
  CHECK(operators["random"] > 20);
}

TEST_CASE("each generation's shares: neighbours, marginals, the model's best, random ones",
          "[engine]") {
  Simulation simulation(12);
  simulation.Step(40);
  for (int generation = 1; generation < 5; ++generation) {
    std::map<std::string, int> operators;
    for (const Proposal& proposal : simulation.Step(40)) {
      const std::string& name = proposal.operator_name;
      ++operators[name.substr(0, name.find(' '))];
    }
    // Of 40: 15 neighbours (three eighths), 5 by the knobs' marginals and 5 random (an eighth
    // each), the model the rest.
    CHECK(operators["neighbour"] <= 15);
    CHECK(operators["marginal"] == 5);
    CHECK(operators["random"] == 5);
    CHECK(operators["model"] >= 15);
    CHECK(operators["neighbour"] + operators["marginal"] + operators["random"] +
              operators["model"] ==
          40);
  }
}

TEST_CASE("smaller generations keep the mix of a generation of 16", "[engine]") {
  for (const int size : {1, 2, 4, 8}) {
    CAPTURE(size);
    Simulation simulation(5);
    simulation.Step(16);  // generation 0: 8
    for (int block = 0; block < 3; ++block) {
      std::map<std::string, int> operators;
      for (int generation = 0; generation < 16 / size; ++generation) {
        for (const Proposal& proposal : simulation.Step(size)) {
          const std::string& name = proposal.operator_name;
          ++operators[name.substr(0, name.find(' '))];
        }
      }
      // Any 16 in a row: 6 neighbours at most, 2 marginals, 2 random, the model the rest. Counted
      // within each generation, generations of 4 took 4 random of 16 and 1 or 2 took none.
      CHECK(operators["neighbour"] <= 6);
      CHECK(operators["marginal"] == 2);
      CHECK(operators["random"] == 2);
      CHECK(operators["neighbour"] + operators["marginal"] + operators["random"] +
                operators["model"] ==
            16);
    }
  }
}

TEST_CASE("the incumbent's one-knob neighbourhood is scanned completely, best-ranked first",
          "[engine]") {
  Simulation simulation(31);
  for (int generation = 0; generation < 12; ++generation) simulation.Step(16);
  // The best measured configuration: every valid configuration one knob away was measured.
  const CandidateRecord best = simulation.Elite().front();
  std::set<Genome> tried;
  for (const CandidateRecord& record : simulation.history()) tried.insert(record.proposal.genome);
  int neighbours = 0;
  for (const KnobSpec& knob : SdpaManifest().knobs) {
    for (int64_t value : knob.values) {
      Genome genome = best.proposal.genome;
      if (genome.at(knob.name) == value) continue;
      genome[knob.name] = value;
      if (!test::SdpaSpaceWithoutSplitKnobs().IsValid(genome)) continue;
      ++neighbours;
      INFO(FormatGenome(SdpaManifest(), genome));
      CHECK(tried.count(genome) == 1);
    }
  }
  CHECK(neighbours > 5);
}

TEST_CASE("after the incumbent, the neighbourhoods scanned are of candidates two knobs apart",
          "[engine]") {
  Simulation simulation(31);
  for (int generation = 0; generation < 12; ++generation) simulation.Step(16);
  std::map<int64_t, Genome> genome_of;
  for (const CandidateRecord& record : simulation.history())
    genome_of[record.id] = record.proposal.genome;
  // The centres of each generation's scan: the parents of its neighbours.
  std::map<int, std::set<int64_t>> centres;
  for (const CandidateRecord& record : simulation.history()) {
    if (StartsWith(record.proposal.operator_name, "neighbour ") && record.proposal.parent1)
      centres[record.generation].insert(*record.proposal.parent1);
  }
  const auto distance = [](const Genome& a, const Genome& b) {
    int d = 0;
    for (const auto& [name, value] : a) d += b.at(name) != value;
    return d;
  };
  int several = 0;
  for (const auto& [generation, ids] : centres) {
    several += ids.size() > 1;
    for (int64_t a : ids) {
      for (int64_t b : ids) {
        if (a >= b) continue;
        INFO("generation " << generation << ": centres " << a << " and " << b);
        CHECK(distance(genome_of.at(a), genome_of.at(b)) >= 2);
      }
    }
  }
  CHECK(several > 0);
}

TEST_CASE("the search never repeats itself and exhausts the space", "[engine]") {
  Simulation simulation(3);
  const size_t valid = test::SdpaSpaceWithoutSplitKnobs().Enumerate().size();
  std::set<Genome> seen;
  for (int generation = 0; generation < 200; ++generation) {
    const std::vector<Proposal> proposals = simulation.Step(40);
    for (const Proposal& proposal : proposals) {
      REQUIRE(test::SdpaSpaceWithoutSplitKnobs().IsValid(proposal.genome));
      REQUIRE(seen.insert(proposal.genome).second);
    }
    if (generation > 0 && proposals.size() < 40) break;  // the first is smaller
  }
  CHECK(seen.size() == valid);
  CHECK(simulation.Step(40).empty());
}

TEST_CASE("the same seed proposes the same, another seed otherwise", "[engine]") {
  const auto run = [](uint64_t seed) {
    Simulation simulation(seed);
    std::vector<std::string> trace;
    for (int generation = 0; generation < 8; ++generation) {
      for (const Proposal& proposal : simulation.Step(12)) {
        trace.push_back(FormatGenome(SdpaManifest(), proposal.genome) + " | " +
                        proposal.operator_name + " | " +
                        std::to_string(proposal.parent1.value_or(0)) + "," +
                        std::to_string(proposal.parent2.value_or(0)));
      }
    }
    return trace;
  };
  const std::vector<std::string> first = run(2024);
  CHECK(first.size() == 8 + 7 * 12);
  CHECK(run(2024) == first);
  CHECK(run(2025) != first);
}

TEST_CASE("a resumed engine proposes what the uninterrupted one would", "[engine]") {
  Simulation simulation(5);
  for (int generation = 0; generation < 4; ++generation) simulation.Step(10);
  Evolution fresh(test::SdpaSpaceWithoutSplitKnobs(), 5);
  const std::vector<Proposal> resumed =
      fresh.Propose(4, 10, simulation.history(), simulation.Elite());
  const std::vector<Proposal> continued = simulation.Step(10);
  REQUIRE(resumed.size() == continued.size());
  for (size_t i = 0; i < resumed.size(); ++i) {
    CHECK(resumed[i].genome == continued[i].genome);
    CHECK(resumed[i].operator_name == continued[i].operator_name);
  }
}

TEST_CASE("without a history a later generation is random", "[engine]") {
  Evolution evolution(test::SdpaSpaceWithoutSplitKnobs(), 8);
  const std::vector<Proposal> proposals = evolution.Propose(3, 12, {}, {});
  REQUIRE(proposals.size() == 12);
  for (const Proposal& proposal : proposals) CHECK(proposal.operator_name == "random");
}

TEST_CASE("the model steers away from configurations like those that failed", "[engine]") {
  // Every candidate with PERSISTENT=1 failed; the others ran at about the same speed. Half of
  // the space has PERSISTENT=1.
  std::vector<CandidateRecord> history;
  Random random(17);
  while (history.size() < 40) {
    CandidateRecord record;
    record.id = static_cast<int64_t>(history.size()) + 1;
    record.proposal.genome = *test::SdpaSpaceWithoutSplitKnobs().Sample(random);
    record.state = CandidateState::kFinished;
    if (record.proposal.genome.at("PERSISTENT") == 1) {
      record.outcome.status = Status::kRuntimeError;
    } else {
      record.outcome.status = Status::kMeasured;
      record.outcome.gpu = GpuVerdict{};
      record.outcome.gpu->timing = TimingFigures{};
      record.outcome.gpu->timing->median_us = 30 + random.Unit();
      record.confirmation = record.outcome.gpu->timing;
    }
    history.push_back(record);
  }
  Evolution evolution(test::SdpaSpaceWithoutSplitKnobs(), 4);
  int model = 0;
  int persistent = 0;
  int marginal = 0;
  for (const Proposal& proposal : evolution.Propose(1, 40, history, {})) {
    if (StartsWith(proposal.operator_name, "marginal")) {
      // Per-knob counts put PERSISTENT=1 among the others only.
      ++marginal;
      CHECK(proposal.genome.at("PERSISTENT") == 0);
    }
    if (!StartsWith(proposal.operator_name, "model")) continue;
    ++model;
    if (proposal.genome.at("PERSISTENT") == 1) ++persistent;
  }
  CHECK(marginal == 5);
  // 15 of 40 go to the best's neighbours, 5 by the marginals, 5 are random.
  REQUIRE(model >= 15);
  CHECK(persistent * 5 < model);
}

TEST_CASE("the search beats random sampling on a synthetic objective", "[engine]") {
  // Rank of a time among every valid configuration's, 0 for the best.
  std::vector<double> all;
  for (const Genome& genome : test::SdpaSpaceWithoutSplitKnobs().Enumerate())
    all.push_back(Objective(genome));
  std::sort(all.begin(), all.end());
  const auto rank = [&](double best) {
    return static_cast<double>(std::lower_bound(all.begin(), all.end(), best) - all.begin());
  };

  double evolved = 0;
  double random = 0;
  int evolved_optimum = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Simulation search(seed);
    EvolutionOptions all_random;
    all_random.neighbour_share = 0;
    all_random.random_share = 1;
    Simulation baseline(seed, all_random);
    for (int generation = 0; generation < 6; ++generation) {
      search.Step(12);
      baseline.Step(12);
    }
    evolved += rank(search.Best());
    random += rank(baseline.Best());
    evolved_optimum += search.Best() == all.front() ? 1 : 0;
  }
  INFO("mean rank: evolved " << evolved / 8 << ", random " << random / 8);
  CHECK(evolved < random / 2);
  CHECK(evolved_optimum >= 6);
}

TEST_CASE("an empty space proposes nothing", "[engine]") {
  ArchInfo tiny = ArchByName("sm_90");
  tiny.max_smem_per_block_optin = 1024;
  const SearchSpace space(SdpaManifest(), DefaultProblem(SdpaManifest()), tiny);
  Evolution evolution(space, 1);
  CHECK(evolution.Propose(0, 8, {}, {}).empty());
  CHECK(evolution.Propose(1, 8, {}, {}).empty());
}

}  // namespace
}  // namespace evo

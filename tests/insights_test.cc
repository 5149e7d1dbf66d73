#include "engine/insights.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>

#include "engine/search_space.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

// Without the split-KV knobs, whose values only matter for grouped heads and short queries.
const Manifest& SdpaManifest() { return test::SdpaManifestWithoutSplitKnobs(); }

// Made-up compile figures of a configuration: registers grow with each warp's rows, shared
// memory with the tiles and stages, as in sdpa_fp16.
struct Figures {
  int registers = 0;
  int64_t smem = 0;
  int64_t threads = 0;
};

Figures SdpaLikeFigures(const Genome& g) {
  Figures figures;
  figures.registers = static_cast<int>(32 + g.at("BLOCK_M") / g.at("NUM_WARPS") / 2);
  figures.smem = (g.at("BLOCK_M") * 64 + g.at("STAGES") * 2 * g.at("BLOCK_N") * 64) * 2;
  figures.threads = g.at("NUM_WARPS") * 32;
  return figures;
}

CandidateRecord Finished(int64_t id, int generation, const Genome& genome, Status status,
                         std::string reason = "") {
  CandidateRecord record;
  record.id = id;
  record.generation = generation;
  record.proposal.genome = genome;
  record.state = CandidateState::kFinished;
  record.outcome.status = status;
  record.outcome.reason = std::move(reason);
  return record;
}

void SetCompiled(CandidateRecord& record, const Figures& figures) {
  KernelResources resources;
  resources.registers = figures.registers;
  record.outcome.resources = resources;
  record.outcome.threads_per_block = figures.threads;
  record.outcome.dynamic_smem = figures.smem;
}

void SetMeasured(CandidateRecord& record, double median_us) {
  record.outcome.status = Status::kMeasured;
  record.outcome.gpu = GpuVerdict{};
  record.outcome.gpu->timing = TimingFigures{};
  record.outcome.gpu->timing->median_us = median_us;
}

// Candidates of generation 0 drawn from the valid configurations, compiled with `figures` and
// measured, the lighter ones faster (so the best keep a high occupancy unless a test says).
std::vector<CandidateRecord> CompiledHistory(const std::function<Figures(const Genome&)>& figures,
                                             int count, uint64_t seed) {
  const SearchSpace space(SdpaManifest(), DefaultProblem(SdpaManifest()), ArchByName("sm_90"));
  Random random(seed);
  std::vector<CandidateRecord> history;
  for (int i = 0; i < count; ++i) {
    const Genome genome = *space.Sample(random);
    CandidateRecord record = Finished(i + 1, 0, genome, Status::kMeasured);
    const Figures f = figures(genome);
    SetCompiled(record, f);
    SetMeasured(record, 100.0 + f.registers + static_cast<double>(f.smem) / 1024);
    history.push_back(std::move(record));
  }
  return history;
}

bool FiredWith(const Insights& insights, const std::string& words) {
  return std::any_of(insights.fired.begin(), insights.fired.end(), [&](const std::string& line) {
    return line.find(words) != std::string::npos;
  });
}

TEST_CASE("no history: every knob neutral and no rule fired", "[engine]") {
  const Insights insights = DeriveInsights(SdpaManifest(), {});
  CHECK(insights.fired.empty());
  REQUIRE(insights.knobs.size() == SdpaManifest().knobs.size());
  for (const auto& [name, bias] : insights.knobs) {
    CHECK(bias.weight == 1);
    CHECK(bias.down == 0.5);
    CHECK(bias.avoid.empty());
  }
}

TEST_CASE("healthy compiles fire no resource rule", "[engine]") {
  const Insights insights = DeriveInsights(SdpaManifest(), CompiledHistory(SdpaLikeFigures, 60, 1));
  CHECK(insights.fired.empty());
  for (const auto& [name, bias] : insights.knobs) CHECK(bias.down == 0.5);
}

TEST_CASE("spills push the knobs that cost registers down", "[engine]") {
  std::vector<CandidateRecord> history = CompiledHistory(SdpaLikeFigures, 60, 2);
  int spilling = 0;
  for (CandidateRecord& record : history) {
    if (record.outcome.resources->registers < 64) continue;
    record.outcome.resources->spill_stores = 64;
    record.outcome.resources->spill_loads = 64;
    record.outcome.status = Status::kResourceReject;
    record.outcome.reason = "spills registers: 64 bytes stored, 64 bytes loaded";
    record.outcome.gpu.reset();
    ++spilling;
  }
  REQUIRE(spilling > 0);
  const Insights insights = DeriveInsights(SdpaManifest(), history);
  INFO(insights.fired.front());
  CHECK(FiredWith(insights, "spills or registers over the limit in " + std::to_string(spilling)));
  CHECK(FiredWith(insights, "lower BLOCK_M"));
  CHECK(insights.knobs.at("BLOCK_M").down == 0.8);
  CHECK(insights.knobs.at("BLOCK_M").weight == 2);
  // More warps mean fewer rows, hence fewer registers, per thread; the other knobs cost none.
  for (const char* knob : {"NUM_WARPS", "BLOCK_N", "STAGES", "FAST_EXP", "PERSISTENT"}) {
    INFO(knob);
    CHECK(insights.knobs.at(knob).down == 0.5);
  }
}

TEST_CASE("registers over the limit in the latest generation fire the register rule", "[engine]") {
  std::vector<CandidateRecord> history = CompiledHistory(SdpaLikeFigures, 40, 3);
  const Genome genome = test::GenomeFromSettings(SdpaManifest(), "BLOCK_M=256 NUM_WARPS=8");
  CandidateRecord reject =
      Finished(100, 1, genome, Status::kResourceReject,
               "300 registers x 256 threads need 77824 registers; a block has 65536");
  history.push_back(reject);
  const Insights insights = DeriveInsights(SdpaManifest(), history);
  CHECK(FiredWith(insights, "(1 in generation 1)"));
  CHECK(insights.knobs.at("BLOCK_M").down == 0.8);

  // The same reject, but long ago among many healthy candidates, is under 10%: no rule.
  for (CandidateRecord& record : history) record.generation = 2;
  history.back().generation = 0;
  CHECK_FALSE(FiredWith(DeriveInsights(SdpaManifest(), history), "registers over the limit"));
}

TEST_CASE("shared memory over the budget pushes the knobs that cost it down", "[engine]") {
  std::vector<CandidateRecord> history = CompiledHistory(SdpaLikeFigures, 60, 4);
  CHECK_FALSE(FiredWith(DeriveInsights(SdpaManifest(), history), "shared memory"));

  const Genome genome =
      test::GenomeFromSettings(SdpaManifest(), "BLOCK_M=256 BLOCK_N=128 STAGES=4");
  CandidateRecord reject =
      Finished(100, 1, genome, Status::kResourceReject,
               "240000 bytes of shared memory (0 static + 240000 dynamic); the limit is 232448");
  history.push_back(reject);
  const Insights insights = DeriveInsights(SdpaManifest(), history);
  CHECK(FiredWith(insights, "shared memory over the budget in 1 of 61 candidates"));
  for (const char* knob : {"BLOCK_M", "BLOCK_N", "STAGES"}) {
    INFO(knob);
    CHECK(insights.knobs.at(knob).down == 0.8);
    CHECK(insights.knobs.at(knob).weight == 2);
  }
  // NUM_WARPS costs no shared memory, though it comes with large BLOCK_M: the joint fit tells.
  for (const char* knob : {"NUM_WARPS", "FAST_EXP", "PERSISTENT"}) {
    INFO(knob);
    CHECK(insights.knobs.at(knob).down == 0.5);
  }
}

TEST_CASE("low occupancy of the best candidates, for lack of registers, asks for fewer",
          "[engine]") {
  // Heavy threads: 8 warps of 200 registers leave room for one CTA, 8 warps, per SM.
  const auto heavy = [](const Genome& g) {
    Figures figures = SdpaLikeFigures(g);
    figures.registers = static_cast<int>(40 + g.at("BLOCK_M") / 2 + g.at("NUM_WARPS") * 4);
    figures.smem = 16 * 1024;
    return figures;
  };
  std::vector<CandidateRecord> history = CompiledHistory(heavy, 60, 5);
  const Genome best_genome = test::GenomeFromSettings(SdpaManifest(), "BLOCK_M=256 NUM_WARPS=8");
  for (int i = 0; i < 3; ++i) {
    CandidateRecord best = Finished(200 + i, 0, best_genome, Status::kMeasured);
    SetCompiled(best, {200, 16 * 1024, 256});
    SetMeasured(best, 10.0 + i);
    history.push_back(best);
  }
  const Insights insights = DeriveInsights(SdpaManifest(), history);
  CHECK(FiredWith(insights, "low occupancy of the best 3 (at most 8 warps per SM"));
  CHECK(insights.knobs.at("BLOCK_M").down == 0.65);
  CHECK(insights.knobs.at("NUM_WARPS").down == 0.65);  // more warps, more registers per CTA
  CHECK(insights.knobs.at("STAGES").down == 0.5);

  // The same best candidates with 64 registers hold 32 warps per SM: no rule.
  for (CandidateRecord& record : history) {
    if (record.id >= 200) record.outcome.resources->registers = 64;
  }
  CHECK_FALSE(FiredWith(DeriveInsights(SdpaManifest(), history), "occupancy"));

  // Few warps for lack of shared memory are not the registers' fault.
  for (CandidateRecord& record : history) {
    if (record.id < 200) continue;
    record.outcome.resources->registers = 200;
    record.outcome.dynamic_smem = 200 * 1024;
  }
  CHECK_FALSE(FiredWith(DeriveInsights(SdpaManifest(), history), "occupancy"));
}

TEST_CASE("values that only ever failed on the GPU are avoided", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  std::vector<CandidateRecord> history;
  const Genome persistent = test::GenomeFromSettings(manifest, "PERSISTENT=1");
  const Genome persistent_small = test::GenomeFromSettings(manifest, "PERSISTENT=1 BLOCK_M=32");
  history.push_back(Finished(1, 0, persistent, Status::kRuntimeError, "illegal address"));
  CandidateRecord plain = Finished(2, 0, DefaultGenome(manifest), Status::kMeasured);
  SetMeasured(plain, 50);
  history.push_back(plain);

  // One failure is not enough.
  CHECK(DeriveInsights(manifest, history).knobs.at("PERSISTENT").avoid.empty());

  history.push_back(Finished(3, 1, persistent_small, Status::kTimeout, "missed its deadline"));
  Insights insights = DeriveInsights(manifest, history);
  CHECK(insights.knobs.at("PERSISTENT").avoid == std::vector<int64_t>{1});
  CHECK(FiredWith(insights, "avoid PERSISTENT=1: 2 candidates failed"));
  // BLOCK_M=64 failed once but also ran: never avoided.
  CHECK(insights.knobs.at("BLOCK_M").avoid.empty());

  // A value that also ran correctly once is not avoided, whatever else failed with it.
  CandidateRecord ran =
      Finished(4, 1, test::GenomeFromSettings(manifest, "PERSISTENT=1 BLOCK_N=32"), Status::kSlow);
  SetMeasured(ran, 500);
  ran.outcome.status = Status::kSlow;
  history.push_back(ran);
  history.push_back(Finished(5, 1, persistent, Status::kIncorrect, "max error 3.2"));
  insights = DeriveInsights(manifest, history);
  CHECK(insights.knobs.at("PERSISTENT").avoid.empty());
  CHECK_FALSE(FiredWith(insights, "avoid"));
}

TEST_CASE("a knob whose change made a child faster keeps moving that way", "[engine]") {
  const Manifest& manifest = SdpaManifest();
  CandidateRecord parent = Finished(1, 0, DefaultGenome(manifest), Status::kMeasured);
  SetMeasured(parent, 100);

  const auto child = [&](int64_t id, const std::string& settings, double median_us) {
    CandidateRecord record =
        Finished(id, 1, test::GenomeFromSettings(manifest, settings), Status::kMeasured);
    record.proposal.parent1 = 1;
    SetMeasured(record, median_us);
    return record;
  };

  SECTION("up") {
    const Insights insights = DeriveInsights(manifest, {parent, child(2, "BLOCK_N=128", 90)});
    CHECK(insights.knobs.at("BLOCK_N").down == 0.25);
    CHECK(insights.knobs.at("BLOCK_N").weight == 1.5);
    CHECK(FiredWith(insights, "BLOCK_N up made 1 child faster"));
  }
  SECTION("down, overriding nothing else") {
    const Insights insights = DeriveInsights(manifest, {parent, child(2, "STAGES=1", 80)});
    CHECK(insights.knobs.at("STAGES").down == 0.75);
    CHECK(insights.knobs.at("BLOCK_N").down == 0.5);
  }
  SECTION("not faster by more than 3%") {
    const Insights insights = DeriveInsights(manifest, {parent, child(2, "BLOCK_N=128", 98)});
    CHECK(insights.fired.empty());
    CHECK(insights.knobs.at("BLOCK_N").down == 0.5);
  }
  SECTION("two knobs changed: which one helped is unknown") {
    const Insights insights =
        DeriveInsights(manifest, {parent, child(2, "BLOCK_N=128 STAGES=3", 70)});
    CHECK(insights.fired.empty());
  }
  SECTION("a crossover child is not a mutation") {
    CandidateRecord other = Finished(
        3, 0, test::GenomeFromSettings(manifest, "BLOCK_N=128 STAGES=3"), Status::kMeasured);
    SetMeasured(other, 100);
    CandidateRecord crossed = child(4, "BLOCK_N=128", 60);
    crossed.proposal.parent2 = 3;
    CHECK(DeriveInsights(manifest, {parent, other, crossed}).fired.empty());
  }
  SECTION("pending and failed children say nothing") {
    CandidateRecord pending = child(2, "BLOCK_N=128", 60);
    pending.state = CandidateState::kPending;
    CandidateRecord failed = child(3, "BLOCK_N=32", 60);
    failed.outcome.status = Status::kIncorrect;
    CHECK(DeriveInsights(manifest, {parent, pending, failed}).fired.empty());
  }
}

}  // namespace
}  // namespace evo

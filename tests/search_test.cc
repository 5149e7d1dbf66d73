#include "engine/search.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "evaluator/recording.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

// The replay, counting the first measurements it is asked for.
class CountingEvaluator final : public CandidateEvaluator {
 public:
  explicit CountingEvaluator(ReplayEvaluator& replay) : replay_(replay) {}
  const EvaluatorIdentity& identity() const override { return replay_.identity(); }
  const std::vector<GpuIdentity>& lanes() const override { return replay_.lanes(); }
  void Prefetch(const std::vector<Genome>& genomes) override { replay_.Prefetch(genomes); }
  void Speculate(const std::vector<Genome>& genomes) override { replay_.Speculate(genomes); }
  bool ReadyToMeasure(const Genome& genome) const override {
    return replay_.ReadyToMeasure(genome);
  }
  CandidateOutcome Evaluate(int lane, const Genome& genome) override {
    ++evaluations_;
    return replay_.Evaluate(lane, genome);
  }
  GpuVerdict Remeasure(int lane, const Genome& genome) override {
    return replay_.Remeasure(lane, genome);
  }
  std::string RetimingUnavailable() const override { return replay_.RetimingUnavailable(); }
  int evaluations() const { return evaluations_.load(); }

 private:
  ReplayEvaluator& replay_;
  std::atomic<int> evaluations_{0};
};

// A run of sdpa_fp16 at the recording's shape, answered by replaying the H100 sweep.
class ReplayedRun {
 public:
  // `gpus`: the simulated GPUs that answer at once, each taking `delay` per measurement.
  // `starting_points`: whether the first generation tries the manifest's (on this recording one
  // of them is nearly the best, and little is left to improve on).
  explicit ReplayedRun(uint64_t seed, int64_t budget = 100, int patience = 0,
                       const std::vector<int>& gpus = {0}, std::chrono::milliseconds delay = {},
                       bool starting_points = true)
      : library_(TemplateLibrary::Load({})),
        kernel_template_(library_.Find("sdpa_fp16")),
        problem_(DefaultProblem(kernel_template_.manifest)),
        replay_(test::H100Recording(), kernel_template_.manifest, problem_, delay, {}, gpus),
        searched_(replay_.RecordedSpace(kernel_template_.manifest)),
        space_(Searched(starting_points), problem_, ArchByName(replay_.identity().arch)),
        store_(dir_.path() / "evo.db", PopulationStore::Access::kReadWrite) {
    RunSpec spec;
    spec.template_name = "sdpa_fp16";
    spec.template_hash = replay_.identity().template_hash;
    spec.problem = problem_;
    spec.arch = replay_.identity().arch;
    spec.device = replay_.identity().device;
    spec.evaluator = replay_.identity().evaluator;
    spec.seed = seed;
    spec.budget = budget;
    spec.elite_size = 3;
    spec.generation_size = 16;
    spec.patience = patience;
    run_id_ = store_.CreateRun(spec);
  }

  SearchSummary Run(SearchOptions options = {}, int64_t stop_after = -1) {
    std::atomic<bool> stop{false};
    int64_t seen = 0;
    Search search(store_, run_id_, space_, counting_, options);
    return search.Run(
        [&](const SearchProgress&) {
          if (stop_after >= 0 && ++seen >= stop_after) stop = true;
        },
        stop);
  }

  // The recorded space, without the manifest's starting points unless `starting_points`.
  const Manifest& Searched(bool starting_points) {
    if (!starting_points) searched_.starting_points.clear();
    return searched_;
  }

  // Like Run, but dies right after the `finished`th candidate this session stores, as a run
  // killed before doing anything more would: nothing after that candidate's transaction.
  void RunDyingAfter(int64_t finished) {
    struct Killed {};
    std::atomic<bool> stop{false};
    int64_t seen = 0;
    Search search(store_, run_id_, space_, counting_, {});
    CHECK_THROWS_AS(search.Run(
                        [&](const SearchProgress&) {
                          if (++seen == finished) throw Killed{};
                        },
                        stop),
                    Killed);
  }

  // Everything the search decided, to compare two runs: each candidate's genome, provenance,
  // outcome and confirmation, and the elite.
  std::string Decisions() {
    std::string text;
    for (const CandidateRecord& c : store_.Candidates(run_id_)) {
      text += std::to_string(c.id) + " g" + std::to_string(c.generation) + " " +
              nlohmann::json(c.proposal.genome).dump() + " " + c.proposal.operator_name + " " +
              std::string(ToString(c.outcome.status)) + " " + c.outcome.reason;
      if (c.confirmation) text += " confirmed " + std::to_string(c.confirmation->median_us);
      text += "\n";
    }
    text += "elite";
    for (const CandidateRecord& c : store_.Elite(run_id_)) text += " " + std::to_string(c.id);
    return text;
  }

  std::vector<Genome> Genomes() {
    std::vector<Genome> genomes;
    for (const CandidateRecord& c : store_.Candidates(run_id_))
      genomes.push_back(c.proposal.genome);
    return genomes;
  }

  PopulationStore& store() { return store_; }
  int64_t run_id() const { return run_id_; }
  int evaluations() const { return counting_.evaluations(); }
  const SearchSpace& space() const { return space_; }

 private:
  test::TempDir dir_;
  TemplateLibrary library_;
  const KernelTemplate& kernel_template_;
  Problem problem_;
  ReplayEvaluator replay_;
  CountingEvaluator counting_{replay_};
  Manifest searched_;  // the space the recording measured
  SearchSpace space_;
  PopulationStore store_;
  int64_t run_id_ = 0;
};

TEST_CASE("a replayed search spends its budget exactly, never repeats, keeps the implied elite",
          "[search]") {
  ReplayedRun run(11);
  const SearchSummary summary = run.Run();
  CHECK(summary.reason == StopReason::kBudget);
  CHECK(summary.evaluated_now == 100);

  const std::vector<CandidateRecord> candidates = run.store().Candidates(run.run_id());
  REQUIRE(candidates.size() == 100);
  std::set<Genome> genomes;
  std::set<std::string> ids;
  int measured = 0;
  for (const CandidateRecord& c : candidates) {
    CHECK(c.state == CandidateState::kFinished);
    CHECK(run.space().IsValid(c.proposal.genome));
    genomes.insert(c.proposal.genome);
    ids.insert(c.config_id);
    if (c.outcome.status == Status::kMeasured) ++measured;
    if (c.proposal.operator_name.rfind("neighbour", 0) == 0) {
      CHECK(c.proposal.parent1.has_value());
    }
  }
  CHECK(genomes.size() == 100);
  CHECK(ids.size() == 100);
  CHECK(measured > 10);

  const std::vector<CandidateRecord> elite = run.store().Elite(run.run_id());
  const std::vector<CandidateRecord> expected = SelectElite(candidates, 3);
  REQUIRE(elite.size() == 3);
  REQUIRE(expected.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(elite[i].id == expected[i].id);
    CHECK(elite[i].confirmation.has_value());
  }
  // Nothing measured and not slow beats the elite's last member without having been confirmed.
  for (const CandidateRecord& c : candidates) {
    if (c.outcome.status == Status::kMeasured && !c.confirmation) {
      CHECK(c.outcome.timing()->median_us >= *elite.back().score_us() - 1e-9);
    }
  }
  const RunRecord stored = *run.store().FindRun(run.run_id());
  CHECK(stored.state == RunState::kFinished);
  CHECK(stored.stop_reason == "budget reached");
  CHECK(stored.finished_candidates == 100);
}

TEST_CASE("a stored configuration that sets other knobs than the template stops the search by name",
          "[search]") {
  ReplayedRun stale(1, 20);
  Genome extra = DefaultGenome(stale.space().manifest());
  extra["OLD_KNOB"] = 1;
  Genome missing = DefaultGenome(stale.space().manifest());
  missing.erase("STAGES");
  stale.store().AddPending(
      stale.run_id(), 0,
      {{"cfg-extra", Proposal{extra, "random", std::nullopt, std::nullopt}},
       {"cfg-missing", Proposal{missing, "random", std::nullopt, std::nullopt}}});
  try {
    stale.Run();
    FAIL("the search ran over configurations of another template version");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) ==
          "run 1 cannot go on: template sdpa_fp16 no longer has OLD_KNOB, which candidate 1 sets "
          "(the template changed since the run was stored); start another run with --new");
  }
  CHECK(stale.Genomes() == std::vector<Genome>{extra, missing});
}

TEST_CASE("the same seed replays the same search; another seed searches otherwise", "[search]") {
  ReplayedRun first(5, 64);
  ReplayedRun second(5, 64);
  ReplayedRun other(6, 64);
  first.Run();
  second.Run();
  other.Run();
  CHECK(first.Genomes() == second.Genomes());
  CHECK(first.Genomes() != other.Genomes());
}

TEST_CASE("a stopped run resumes into the very search the uninterrupted one makes", "[search]") {
  ReplayedRun whole(21, 80);
  whole.Run();
  ReplayedRun pieces(21, 80);
  // Stops land mid-generation, leaving pending candidates to redo.
  for (int64_t stop_after : {5, 13, 1, 30}) {
    const SearchSummary summary = pieces.Run({}, stop_after);
    CHECK(summary.reason == StopReason::kInterrupted);
    CHECK(pieces.store().FindRun(pieces.run_id())->state == RunState::kPaused);
  }
  const SearchSummary last = pieces.Run();
  CHECK(last.reason == StopReason::kBudget);
  CHECK(pieces.Genomes() == whole.Genomes());
  CHECK(pieces.store().FindRun(pieces.run_id())->finished_candidates == 80);
  CHECK(pieces.store().FindRun(pieces.run_id())->pending_candidates == 0);
}

// The generations that ended at their checkpoint: fewer candidates than proposed, and not the
// run's last (which the budget may cut).
std::vector<std::vector<CandidateRecord>> CutGenerations(
    const std::vector<CandidateRecord>& candidates, int generation_size) {
  std::map<int, std::vector<CandidateRecord>> generations;
  for (const CandidateRecord& c : candidates) generations[c.generation].push_back(c);
  std::vector<std::vector<CandidateRecord>> cut;
  for (const auto& [generation, members] : generations) {
    const bool last = generation == generations.rbegin()->first;
    if (generation > 0 && !last && static_cast<int>(members.size()) < generation_size)
      cut.push_back(members);
  }
  return cut;
}

// The best score of the generations before `generation`, and what beats it beyond the noise.
struct IncumbentBefore {
  double score_us = 0;
  double threshold_us = 0;
};
IncumbentBefore BestBefore(const std::vector<CandidateRecord>& candidates, int generation) {
  const CandidateRecord* before = nullptr;
  for (const CandidateRecord& c : candidates) {
    if (c.generation < generation && c.score_us() &&
        (before == nullptr || *c.score_us() < *before->score_us()))
      before = &c;
  }
  REQUIRE(before != nullptr);
  const TimingFigures& noise = *before->scoring_timing();
  return {*before->score_us(),
          std::max(0.01 * noise.median_us, 0.5 * (noise.p90_us - noise.p10_us))};
}

TEST_CASE(
    "a new best in a generation's first half ends it there, and the next one is proposed "
    "around it",
    "[search]") {
  ReplayedRun run(21, 100, 0, {0}, {}, false);
  CHECK(run.Run().reason == StopReason::kBudget);
  const std::vector<CandidateRecord> candidates = run.store().Candidates(run.run_id());
  CHECK(candidates.size() == 100);  // the budget is spent all the same
  std::map<int, std::vector<CandidateRecord>> generations;
  for (const CandidateRecord& c : candidates) generations[c.generation].push_back(c);
  int cut = 0;
  for (const auto& [generation, members] : generations) {
    if (generation == 0 || generation == generations.rbegin()->first) continue;
    const IncumbentBefore best = BestBefore(candidates, generation);
    const auto improves = [&](const CandidateRecord& c) {
      return c.score_us() && *c.score_us() < best.score_us - best.threshold_us;
    };
    // Its first half decides: 8 of 16.
    const bool first_half_improved = std::any_of(
        members.begin(), members.begin() + std::min<size_t>(8, members.size()), improves);
    INFO("generation " << generation);
    CHECK(members.size() == (first_half_improved ? 8u : 16u));
    if (first_half_improved) ++cut;
  }
  CHECK(cut >= 1);
  // The generation after the first cut one starts with one-knob neighbours of the new best.
  const std::vector<std::vector<CandidateRecord>> cut_generations = CutGenerations(candidates, 16);
  REQUIRE(!cut_generations.empty());
  const std::vector<CandidateRecord>& first = cut_generations.front();
  const CandidateRecord& best = *std::min_element(
      first.begin(), first.end(), [](const CandidateRecord& a, const CandidateRecord& b) {
        return a.score_us().value_or(1e300) < b.score_us().value_or(1e300);
      });
  const auto next = std::find_if(candidates.begin(), candidates.end(), [&](const auto& c) {
    return c.generation == best.generation + 1;
  });
  REQUIRE(next != candidates.end());
  CHECK(next->proposal.operator_name.rfind("neighbour", 0) == 0);
  CHECK(next->proposal.parent1 == best.id);

  // Without re-planning every generation but the last is whole, and the search differs.
  ReplayedRun whole(21, 100, 0, {0}, {}, false);
  SearchOptions options;
  options.replan = false;
  CHECK(whole.Run(options).reason == StopReason::kBudget);
  CHECK(CutGenerations(whole.store().Candidates(whole.run_id()), 16).empty());
  CHECK(whole.Decisions() != run.Decisions());
}

TEST_CASE("a run killed between its checkpoint and the re-plan resumes into the uninterrupted one",
          "[search]") {
  ReplayedRun whole(21, 80, 0, {0}, {}, false);
  whole.Run();
  const std::vector<CandidateRecord> candidates = whole.store().Candidates(whole.run_id());
  const auto cut = CutGenerations(candidates, 16);
  REQUIRE(!cut.empty());
  // Killed right after the checkpoint's candidate is stored: the rest of its generation is
  // still pending, and it is dropped on resume.
  const int64_t last_measured = cut.front().back().id;
  const int64_t position = std::find_if(candidates.begin(), candidates.end(),
                                        [&](const auto& c) { return c.id == last_measured; }) -
                           candidates.begin() + 1;
  ReplayedRun pieces(21, 80, 0, {0}, {}, false);
  pieces.RunDyingAfter(position);
  const RunRecord killed = *pieces.store().FindRun(pieces.run_id());
  CHECK(killed.state == RunState::kRunning);
  CHECK(killed.finished_candidates == position);
  CHECK(killed.pending_candidates == 8);
  CHECK(pieces.Run().reason == StopReason::kBudget);
  CHECK(pieces.Decisions() == whole.Decisions());

  // Killed a candidate before it, the generation goes on to the checkpoint, then ends there.
  ReplayedRun earlier(21, 80, 0, {0}, {}, false);
  earlier.RunDyingAfter(position - 1);
  CHECK(earlier.Run().reason == StopReason::kBudget);
  CHECK(earlier.Decisions() == whole.Decisions());
}

TEST_CASE("three simulated GPUs re-plan as one does and measure nothing the re-plan drops",
          "[search][gpus]") {
  ReplayedRun one(21, 80, 0, {0}, {}, false);
  ReplayedRun three(21, 80, 0, {0, 1, 2}, std::chrono::milliseconds(1), false);
  CHECK(one.Run().reason == StopReason::kBudget);
  CHECK(three.Run().reason == StopReason::kBudget);
  CHECK(!CutGenerations(one.store().Candidates(one.run_id()), 16).empty());
  CHECK(three.Decisions() == one.Decisions());
  // Each stored candidate measured once; none of the dropped ones measured at all.
  CHECK(one.evaluations() == 80);
  CHECK(three.evaluations() == 80);
}

TEST_CASE("three simulated GPUs make the one-GPU search: candidates, outcomes, elite",
          "[search][gpus]") {
  ReplayedRun one(12, 96);
  ReplayedRun three(12, 96, 0, {0, 1, 2}, std::chrono::milliseconds(1));
  CHECK(one.Run().reason == StopReason::kBudget);
  const SearchSummary summary = three.Run();
  CHECK(summary.reason == StopReason::kBudget);
  CHECK(summary.evaluated_now == 96);
  CHECK(three.Decisions() == one.Decisions());
  std::map<int, int> per_gpu;
  for (const CandidateRecord& c : three.store().Candidates(three.run_id())) {
    REQUIRE(c.measured_on.has_value() == c.outcome.gpu.has_value());
    if (c.measured_on) ++per_gpu[c.measured_on->ordinal];
  }
  CHECK(per_gpu.size() == 3);
  for (const CandidateRecord& c : one.store().Candidates(one.run_id())) {
    if (c.measured_on) CHECK(c.measured_on->ordinal == 0);
  }
}

TEST_CASE("a search on simulated GPUs, stopped mid-generation, resumes into the one-GPU search",
          "[search][gpus]") {
  ReplayedRun whole(21, 80);
  whole.Run();
  ReplayedRun pieces(21, 80, 0, {0, 1, 2, 3}, std::chrono::milliseconds(1));
  for (int64_t stop_after : {5, 13, 1, 30}) {
    const SearchSummary summary = pieces.Run({}, stop_after);
    CHECK(summary.reason == StopReason::kInterrupted);
    const RunRecord stored = *pieces.store().FindRun(pieces.run_id());
    CHECK(stored.state == RunState::kPaused);
    CHECK(stored.finished_candidates + stored.pending_candidates <= 80);
  }
  CHECK(pieces.Run().reason == StopReason::kBudget);
  CHECK(pieces.Decisions() == whole.Decisions());
}

TEST_CASE("two simulated GPUs measure a search at about twice the rate of one", "[search][gpus]") {
  const auto seconds = [](const std::vector<int>& gpus) {
    ReplayedRun run(31, 48, 0, gpus, std::chrono::milliseconds(80));
    const auto start = std::chrono::steady_clock::now();
    CHECK(run.Run().reason == StopReason::kBudget);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double one = seconds({0});
  const double two = seconds({0, 1});
  INFO("one GPU " << one << " s, two " << two << " s");
  // Ideal is 2; the proposals between generations and the generations' tails cost the rest.
  CHECK(one / two > 1.4);
}

TEST_CASE("a larger budget extends a finished run", "[search]") {
  ReplayedRun run(3, 20);
  CHECK(run.Run().reason == StopReason::kBudget);
  run.store().SetRunBudget(run.run_id(), 45);
  const SearchSummary more = run.Run();
  CHECK(more.reason == StopReason::kBudget);
  CHECK(more.evaluated_now == 25);
  CHECK(run.store().Candidates(run.run_id()).size() == 45);
}

TEST_CASE("the time limit pauses a run, and it resumes", "[search]") {
  ReplayedRun run(4, 30);
  SearchOptions options;
  options.time_limit = std::chrono::seconds(0);
  const SearchSummary summary = run.Run(options);
  CHECK(summary.reason == StopReason::kTimeLimit);
  CHECK(summary.evaluated_now == 0);
  CHECK(run.store().FindRun(run.run_id())->state == RunState::kPaused);
  CHECK(run.Run().reason == StopReason::kBudget);
}

TEST_CASE("patience stops a run whose generations stopped improving", "[search]") {
  ReplayedRun run(8, 800, 2);
  const SearchSummary summary = run.Run();
  REQUIRE(summary.reason == StopReason::kPatience);
  const std::vector<CandidateRecord> candidates = run.store().Candidates(run.run_id());
  CHECK(candidates.size() < 800);
  CHECK(GenerationsWithoutImprovement(candidates, &run.space()) == 2);
  // The best's one-knob neighbourhood was scanned before the search called itself stuck.
  const CandidateRecord best = run.store().Elite(run.run_id()).front();
  std::set<Genome> tried;
  for (const CandidateRecord& c : candidates) tried.insert(c.proposal.genome);
  for (const KnobSpec& knob : run.space().manifest().knobs) {
    for (int64_t value : knob.values) {
      Genome genome = best.proposal.genome;
      genome[knob.name] = value;
      if (run.space().IsValid(genome)) CHECK(tried.count(genome) == 1);
    }
  }
}

TEST_CASE("the performance gate calls far slower measurements slow", "[search]") {
  ReplayedRun run(9, 48);
  SearchOptions options;
  options.slow_factor = 1.05;
  run.Run(options);
  int slow = 0;
  for (const CandidateRecord& c : run.store().Candidates(run.run_id())) {
    if (c.outcome.status != Status::kSlow) continue;
    ++slow;
    CHECK(!c.confirmation);
    CHECK(c.outcome.timing() != nullptr);
  }
  CHECK(slow > 0);
}

TEST_CASE("the replay refuses configurations and tasks it has no measurement of", "[search]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_fp16").manifest;
  Problem problem = DefaultProblem(manifest);
  ReplayEvaluator replay(test::H100Recording(), manifest, problem);
  CHECK(replay.size() > 100);
  Genome unknown = DefaultGenome(manifest);
  unknown["BLOCK_M"] = 3;
  CHECK_THROWS_WITH(replay.Evaluate(0, unknown), Catch::Contains("holds no measurement"));
  problem["S_q"] = 1024;
  CHECK_THROWS_WITH(ReplayEvaluator(test::H100Recording(), manifest, problem),
                    Catch::Contains("is of sdpa_fp16"));
}

TEST_CASE("generations without improvement count only improvements beyond the noise", "[search]") {
  const auto candidate = [](int generation, double median, double spread) {
    CandidateRecord c;
    c.id = generation * 10 + static_cast<int>(median);
    c.generation = generation;
    c.state = CandidateState::kFinished;
    c.outcome.status = Status::kMeasured;
    TimingFigures t;
    t.median_us = median;
    t.p10_us = median - spread / 2;
    t.p90_us = median + spread / 2;
    c.confirmation = t;
    return c;
  };
  // 10.0 -> 9.95 is inside 1 %; 9.0 is an improvement; 8.95 is inside the spread of 0.2.
  std::vector<CandidateRecord> history = {candidate(0, 10.0, 0.05), candidate(1, 9.95, 0.05)};
  CHECK(GenerationsWithoutImprovement(history) == 1);
  history.push_back(candidate(2, 9.0, 0.2));
  CHECK(GenerationsWithoutImprovement(history) == 0);
  history.push_back(candidate(3, 8.95, 0.2));
  CHECK(GenerationsWithoutImprovement(history) == 1);
  CandidateRecord pending = candidate(4, 1.0, 0.0);
  pending.state = CandidateState::kPending;
  history.push_back(pending);
  CHECK(GenerationsWithoutImprovement(history) == 1);  // generation 4 is not complete
}

TEST_CASE("a generation without improvement is stuck only once the best's neighbours were tried",
          "[search]") {
  const Manifest& manifest = test::SdpaManifestWithoutSplitKnobs();
  const SearchSpace space(manifest, DefaultProblem(manifest), ArchByName("sm_90"));
  int64_t id = 0;
  const auto candidate = [&](int generation, const Genome& genome, double median) {
    CandidateRecord c;
    c.id = ++id;
    c.generation = generation;
    c.state = CandidateState::kFinished;
    c.proposal.genome = genome;
    c.outcome.status = Status::kMeasured;
    TimingFigures t;
    t.median_us = median;
    t.p10_us = median;
    t.p90_us = median;
    c.outcome.gpu = GpuVerdict{};
    c.outcome.gpu->timing = t;
    c.confirmation = t;
    return c;
  };
  const Genome best = DefaultGenome(manifest);
  Genome far = best;
  far["BLOCK_M"] = 128;
  far["BLOCK_N"] = 32;
  far["STAGES"] = 3;
  REQUIRE(space.IsValid(far));
  std::vector<CandidateRecord> history = {candidate(0, best, 10.0), candidate(1, far, 12.0)};
  CHECK(GenerationsWithoutImprovement(history) == 1);
  CHECK(GenerationsWithoutImprovement(history, &space) == 0);
  // Generation 2 measures every valid neighbour of the best; none is faster.
  for (const KnobSpec& knob : manifest.knobs) {
    for (int64_t value : knob.values) {
      Genome genome = best;
      if (value == best.at(knob.name)) continue;
      genome[knob.name] = value;
      if (space.IsValid(genome)) history.push_back(candidate(2, genome, 11.0));
    }
  }
  CHECK(GenerationsWithoutImprovement(history) == 2);
  CHECK(GenerationsWithoutImprovement(history, &space) == 1);
  history.push_back(candidate(
      3,
      [&] {
        Genome genome = far;
        genome["STAGES"] = 4;
        return genome;
      }(),
      13.0));
  CHECK(GenerationsWithoutImprovement(history, &space) == 2);
}

}  // namespace
}  // namespace evo

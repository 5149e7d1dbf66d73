#include "engine/retime.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "engine/search.h"
#include "population/retiming.h"
#include "population/sqlite.h"
#include "population/store.h"
#include "tests/fake_gpu_run.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using test::FakeGpuRun;

std::vector<int64_t> Ids(const std::vector<CandidateRecord>& candidates) {
  std::vector<int64_t> ids;
  for (const CandidateRecord& c : candidates) ids.push_back(c.id);
  return ids;
}

std::set<int64_t> IdSet(const std::vector<CandidateRecord>& candidates) {
  const std::vector<int64_t> ids = Ids(candidates);
  return {ids.begin(), ids.end()};
}

// The median evo_fake_worker gives a genome before any drift (its Verdict): what a GPU that
// never warmed would measure.
double BaseMedian(const Genome& genome) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : nlohmann::json(genome).dump()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return 20.0 + static_cast<double>(hash % 1000) / 10.0;
}

// Everything a run's candidates and elite hold, to show that nothing changed.
std::string Stored(PopulationStore& store, int64_t run_id) {
  std::ostringstream text;
  for (const CandidateRecord& c : store.Candidates(run_id)) {
    text << c.id << " " << nlohmann::json(c.proposal.genome).dump() << " "
         << ToString(c.outcome.status) << " " << CandidateOutcomeToJson(c.outcome).dump();
    if (c.confirmation) text << " " << TimingFiguresToJson(*c.confirmation).dump();
    text << "\n";
  }
  text << "elite";
  for (const CandidateRecord& c : store.EliteByScore(run_id)) text << " " << c.id;
  const RunRecord run = *store.FindRun(run_id);
  text << "\n" << ToString(run.state) << " " << run.stop_reason;
  return text.str();
}

SearchOptions NoRetime() {
  SearchOptions options;
  options.retime.rounds = 0;
  return options;
}

// A GPU that warms as the search goes: every evaluation of a worker measures 0.3 us more than
// the one before, so candidates measured late score worse than they are.
const std::vector<std::string> kWarming = {"--drift-us", "0.3"};

TEST_CASE("RoundOrder alternates the elite's order and its reverse", "[retime]") {
  const std::vector<int64_t> members = {7, 3, 9};
  CHECK(RoundOrder(members, 0) == std::vector<int64_t>{7, 3, 9});
  CHECK(RoundOrder(members, 1) == std::vector<int64_t>{9, 3, 7});
  CHECK(RoundOrder(members, 2) == std::vector<int64_t>{7, 3, 9});
  CHECK(RoundOrder(members, 3) == std::vector<int64_t>{9, 3, 7});
}

// A finished, measured candidate whose score is `score_us`.
CandidateRecord Scored(int64_t id, double score_us) {
  CandidateRecord c;
  c.id = id;
  c.state = CandidateState::kFinished;
  c.outcome.status = Status::kMeasured;
  TimingFigures confirmation;
  confirmation.median_us = score_us;
  c.confirmation = confirmation;
  return c;
}

Retiming WithTimings(int64_t id, const std::vector<std::pair<int64_t, double>>& timings) {
  Retiming retiming;
  retiming.id = id;
  for (const auto& [candidate, us] : timings) {
    RetimingTiming t;
    t.candidate_id = candidate;
    t.timing.median_us = us;
    retiming.timings.push_back(t);
  }
  return retiming;
}

TEST_CASE(
    "SelectContenders: the score's elite, then up to max(K, 2) more scored within the margin of "
    "its last member",
    "[retime]") {
  // Scores 100, 101, 102 (the elite of 3), then 103, 104.5, 105.05 (within 3 % of 102, that is
  // 105.06), 105.07 (outside), and a candidate that failed.
  std::vector<CandidateRecord> candidates = {Scored(1, 104.5),  Scored(2, 100),   Scored(3, 105.07),
                                             Scored(4, 102),    Scored(5, 101),   Scored(6, 103),
                                             Scored(7, 105.05), CandidateRecord{}};
  candidates.back().id = 8;
  CHECK(Ids(SelectContenders(candidates, 3)) == std::vector<int64_t>{2, 5, 4, 6, 1, 7});
  // Two more at most for an elite of 2 (101 * 1.03 = 104.03: 102 and 103 are within).
  CHECK(Ids(SelectContenders(candidates, 2)) == std::vector<int64_t>{2, 5, 4, 6});
  // An elite of 1 still has up to two contenders (within 103); an elite larger than the scored
  // candidates holds them all.
  CHECK(Ids(SelectContenders(candidates, 1)) == std::vector<int64_t>{2, 5, 4});
  CHECK(Ids(SelectContenders(candidates, 10)).size() == 7);
  // No elite, nothing to re-time.
  CHECK(SelectContenders(candidates, 0).empty());
  // No contender beyond the margin: only the elite.
  CHECK(Ids(SelectContenders({Scored(1, 10), Scored(2, 20), Scored(3, 30)}, 2)) ==
        std::vector<int64_t>{1, 2});
}

TEST_CASE(
    "EliteBySideBySide: the K fastest of the re-timed candidates by their medians, ties in score "
    "order; the score's elite when the re-timing did not time all of it",
    "[retime]") {
  const std::vector<CandidateRecord> elite = {Scored(1, 10), Scored(2, 10.1), Scored(3, 10.2)};
  std::vector<CandidateRecord> retimed = elite;
  retimed.push_back(Scored(4, 10.25));  // a close contender
  // Medians of four timings each: 1 -> 11, 2 -> 10.5 (between 10 and 11), 3 -> 11 (a tie with
  // 1), 4 -> 10.75.
  const Retiming retiming = WithTimings(5, {{1, 11},
                                            {2, 10},
                                            {3, 12},
                                            {3, 10},
                                            {4, 11},
                                            {2, 11},
                                            {1, 11},
                                            {1, 12},
                                            {4, 10.5},
                                            {2, 10},
                                            {3, 11},
                                            {3, 11},
                                            {2, 12},
                                            {1, 9},
                                            {4, 10},
                                            {4, 12}});
  CHECK(retiming.Medians() ==
        std::map<int64_t, double>{{1, 11.0}, {2, 10.5}, {3, 11.0}, {4, 10.75}});
  // The contender, faster than 1 and 3 side by side, takes the place of the slowest (3: tied
  // with 1, after it by score).
  const std::vector<CandidateRecord> ordered = EliteBySideBySide(elite, retimed, retiming);
  CHECK(Ids(ordered) == std::vector<int64_t>{2, 4, 1});
  CHECK(ordered[0].side_by_side->median_us == 10.5);
  CHECK(ordered[0].side_by_side->timings == 4);
  CHECK(ordered[0].side_by_side->timed == 4);
  CHECK(ordered[0].side_by_side->retiming_id == 5);

  // Exactly the elite re-timed: only its order moves.
  const Retiming members_only =
      WithTimings(6, {{1, 11}, {2, 10}, {3, 9}, {3, 9}, {2, 10}, {1, 11}});
  CHECK(Ids(EliteBySideBySide(elite, elite, members_only)) == std::vector<int64_t>{3, 2, 1});

  // A member of the score's elite that the re-timing did not time (one joined since): the
  // score's order, no side-by-side figures. Also when `retimed` is not what it timed, or there
  // is no re-timing.
  std::vector<CandidateRecord> changed = elite;
  changed[2] = Scored(9, 10.2);
  const std::vector<CandidateRecord> other = EliteBySideBySide(changed, retimed, retiming);
  CHECK(Ids(other) == std::vector<int64_t>{1, 2, 9});
  for (const CandidateRecord& c : other) CHECK(!c.side_by_side);
  CHECK(Ids(EliteBySideBySide(elite, elite, retiming)) == std::vector<int64_t>{1, 2, 3});
  CHECK(Ids(EliteBySideBySide(elite, retimed, std::nullopt)) == std::vector<int64_t>{1, 2, 3});
}

// A re-timing of `rounds` rounds: for each candidate, its time (us) in each round and the mean
// SM clock (MHz, 0 for none) of all its timings.
Retiming WithRounds(int64_t id,
                    const std::vector<std::tuple<int64_t, std::vector<double>, double>>& members) {
  Retiming retiming;
  retiming.id = id;
  for (const auto& [candidate, times, mhz] : members) {
    for (size_t round = 0; round < times.size(); ++round) {
      RetimingTiming t;
      t.candidate_id = candidate;
      t.round = static_cast<int>(round);
      t.timing.median_us = times[round];
      t.timing.mean_sm_clock_mhz = mhz;
      retiming.timings.push_back(t);
    }
  }
  return retiming;
}

TEST_CASE(
    "EliteBySideBySide: where the re-timing cannot tell a candidate slower than the fastest, the "
    "one with fewer SM cycles takes the place",
    "[retime]") {
  // 1 is the fastest by median (101.5 us; its timings lie a median 1 us from it); 2, 0.25 us
  // behind, is faster than 1 in round 1 and takes fewer cycles (at 1450 MHz); 3 takes fewer still
  // but is slower than 1 in every round; 4 takes the fewest and beat 1 in round 0, but its median
  // (104) lies 2.5 us past 1's, further than 1's timings scatter.
  const std::vector<std::tuple<int64_t, std::vector<double>, double>> members = {
      {1, {100, 102, 101, 103}, 1500},
      {2, {101, 101.5, 102, 102.5}, 1450},
      {3, {101.8, 102.5, 101.6, 103.5}, 1400},
      {4, {99, 104, 104, 105}, 1300}};
  const Retiming retiming = WithRounds(7, members);
  CHECK_FALSE(retiming.ClearlySlower(2, 1));
  CHECK(retiming.ClearlySlower(3, 1));
  CHECK(retiming.ClearlySlower(4, 1));
  CHECK_FALSE(retiming.ClearlySlower(1, 2));
  CHECK(retiming.ClearlySlower(4, 3));
  CHECK(retiming.MedianCycles().at(2) == Approx(101.75 * 1450));
  // Within 1's slowest timing (103) and faster in round 0, but 1.5 us past 1's median: further
  // than 1's timings scatter, so slower (one outlier timing of the leader widens no bound).
  const Retiming scatter =
      WithRounds(9, {{1, {100, 102, 101, 103}, 1500}, {5, {99.5, 103, 103, 103.5}, 1500}});
  CHECK(scatter.ClearlySlower(5, 1));

  const std::vector<CandidateRecord> elite = {Scored(1, 10), Scored(2, 10.1), Scored(3, 10.2)};
  std::vector<CandidateRecord> retimed = elite;
  retimed.push_back(Scored(4, 10.25));
  const std::vector<CandidateRecord> ordered = EliteBySideBySide(elite, retimed, retiming);
  CHECK(Ids(ordered) == std::vector<int64_t>{2, 1, 3});
  REQUIRE(ordered[0].side_by_side->median_cycles);
  CHECK(*ordered[0].side_by_side->median_cycles == Approx(101.75 * 1450));
  CHECK(ordered[0].side_by_side->median_us == 101.75);

  // Without a clock in one of 2's timings its cycles are unknown: the order is by time.
  Retiming one_without = retiming;
  for (RetimingTiming& t : one_without.timings) {
    if (t.candidate_id == 2 && t.round == 3) t.timing.mean_sm_clock_mhz = 0;
  }
  CHECK(one_without.MedianCycles().count(2) == 0);
  CHECK(Ids(EliteBySideBySide(elite, retimed, one_without)) == std::vector<int64_t>{1, 2, 3});
  // No clocks at all (re-timings before the mean clock): by time.
  const Retiming no_clocks = WithRounds(8, {{1, {100, 102, 101, 103}, 0},
                                            {2, {101, 101.5, 102, 102.5}, 0},
                                            {3, {101.8, 102.5, 101.6, 103.5}, 0}});
  CHECK(Ids(EliteBySideBySide(elite, elite, no_clocks)) == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE(
    "EliteBySideBySide: fewer cycles take the place only where they save more than the time they "
    "lose",
    "[retime][cycles]") {
  // Two re-timings of sdpa_hopper at 4,16,4096,128 fp16: us per round, and one clock per
  // candidate that gives the median cycles the re-timing measured.
  // Twenty-fifth session, H100: #9 is 0.55 % behind #49 by median, not clearly slower (faster
  // in round 2), and takes 3.4 % fewer cycles: it comes first.
  const Retiming h100 = WithRounds(25, {{49, {953.31, 934.53, 935.94, 953.22}, 1423},
                                        {9, {957.92, 943.39, 904.13, 956.19}, 1367}});
  CHECK_FALSE(h100.ClearlySlower(9, 49));
  const std::vector<CandidateRecord> two = {Scored(49, 10), Scored(9, 10.1)};
  CHECK(Ids(EliteBySideBySide(two, two, h100)) == std::vector<int64_t>{9, 49});
  // Thirty-fifth session, H200: #32 is not clearly slower than #47 (faster in round 3) and takes
  // 0.11 % fewer cycles, but is 0.96 % behind by median at 1 % lower clocks: #47, the faster,
  // stays first.
  const Retiming h200 = WithRounds(35, {{47, {903.42, 867.55, 904.19, 929.73}, 1455},
                                        {32, {913.12, 918.91, 911.07, 911.84}, 1439.5}});
  CHECK_FALSE(h200.ClearlySlower(32, 47));
  REQUIRE(h200.MedianCycles().at(32) < h200.MedianCycles().at(47));
  const std::vector<CandidateRecord> pair = {Scored(32, 10), Scored(47, 10.1)};
  CHECK(Ids(EliteBySideBySide(pair, pair, h200)) == std::vector<int64_t>{47, 32});
  // The same with #32 saving 1.9 % of the cycles (at 1414 MHz): it comes first.
  const Retiming saving = WithRounds(36, {{47, {903.42, 867.55, 904.19, 929.73}, 1455},
                                          {32, {913.12, 918.91, 911.07, 911.84}, 1414}});
  CHECK(Ids(EliteBySideBySide(pair, pair, saving)) == std::vector<int64_t>{32, 47});
}

// Candidates ordered as a GPU that never warmed would time them (ties in the given order).
std::vector<CandidateRecord> ByTrueSpeed(std::vector<CandidateRecord> members) {
  std::stable_sort(members.begin(), members.end(),
                   [](const CandidateRecord& a, const CandidateRecord& b) {
                     return BaseMedian(a.proposal.genome) < BaseMedian(b.proposal.genome);
                   });
  return members;
}

// The first `count` of `candidates`.
std::vector<CandidateRecord> First(std::vector<CandidateRecord> candidates, size_t count) {
  candidates.resize(std::min(count, candidates.size()));
  return candidates;
}

// The first run from seed `seed` on (budget 32, elite of 4, warming, searched without its
// re-timing) whose stored elite by score and contenders meet `wanted`; null if none below 200.
// The re-timing is then run on that run's own store: which candidates a run scores within the
// margin depends on the worker's warming, which a second run of the same seed may not repeat.
std::unique_ptr<FakeGpuRun> RunWhere(
    uint64_t seed, const std::function<bool(const std::vector<CandidateRecord>&,
                                            const std::vector<CandidateRecord>&)>& wanted) {
  for (; seed < 200; ++seed) {
    auto run =
        std::make_unique<FakeGpuRun>(std::vector<std::vector<std::string>>{kWarming}, seed, 32, 4);
    REQUIRE(run->Run(NoRetime()).reason == StopReason::kBudget);
    if (wanted(run->store().EliteByScore(run->run_id()), run->store().Contenders(run->run_id()))) {
      return run;
    }
  }
  return nullptr;
}

// A run found by RunWhere, re-timed as a search's end re-times it, and what it stored: the
// elite by score, the candidates timed (by score) and the elite that users take.
struct Retimed {
  std::unique_ptr<FakeGpuRun> run;
  RetimeReport report;
  std::vector<std::string> announced;  // the announcement before the first timing
  std::vector<CandidateRecord> by_score;
  std::vector<CandidateRecord> timed;
  std::vector<CandidateRecord> elite;
};

Retimed RetimeRunWhere(uint64_t seed,
                       const std::function<bool(const std::vector<CandidateRecord>&,
                                                const std::vector<CandidateRecord>&)>& wanted) {
  Retimed retimed;
  retimed.run = RunWhere(seed, wanted);
  REQUIRE(retimed.run);
  FakeGpuRun& run = *retimed.run;
  RetimeOptions options;
  options.announce = [&](const std::string& line) { retimed.announced.push_back(line); };
  retimed.report = RetimeElite(run.store(), run.run_id(), run.pipeline(), options, nullptr);
  retimed.by_score = run.store().EliteByScore(run.run_id());
  retimed.timed = run.store().Contenders(run.run_id());
  retimed.elite = run.store().Elite(run.run_id());
  return retimed;
}

TEST_CASE(
    "retime: at the end of a run the elite and its close contenders are timed side by side; the "
    "elite is the fastest of them in order, every timing stored",
    "[retime][search][gpus]") {
  // A seed whose scores, taken as the GPU warmed, put the elite out of order, so that the
  // re-timing has an order to recover (most seeds do; which ones follows the engine).
  const Retimed retimed = RetimeRunWhere(7, [](const auto& by_score, const auto& timed) {
    return Ids(First(ByTrueSpeed(timed), by_score.size())) != Ids(by_score);
  });
  const auto& [found, report, announced, by_score, timed, elite] = retimed;
  FakeGpuRun& run = *found;
  PopulationStore& store = run.store();
  INFO(report.message);
  CHECK(report.result == RetimeResult::kRetimed);
  REQUIRE(by_score.size() == 4);
  // The score's Top-K, as SelectElite makes it, leads the timed candidates.
  CHECK(Ids(by_score) == Ids(SelectElite(store.Candidates(run.run_id()), 4)));
  CHECK(Ids(First(timed, 4)) == Ids(by_score));
  CHECK(Ids(timed) == Ids(SelectContenders(store.Candidates(run.run_id()), 4)));
  const size_t timings = timed.size() * 4;
  REQUIRE(announced.size() == 1);
  CHECK_THAT(announced[0], Catch::Contains("side by side on GPU 0: 4 rounds, " +
                                           std::to_string(timings) + " timings"));

  // Side by side, the warming cancels: the elite is the fastest K, in the order a GPU that never
  // warmed gives, which the scores (taken as the GPU warmed) did not.
  CHECK(Ids(elite) == Ids(First(ByTrueSpeed(timed), 4)));
  CHECK(Ids(elite) != Ids(by_score));
  REQUIRE(elite.front().side_by_side);
  const double offset =
      elite.front().side_by_side->median_us - BaseMedian(elite.front().proposal.genome);
  for (const CandidateRecord& c : elite) {
    REQUIRE(c.side_by_side);
    CHECK(c.side_by_side->timings == 4);
    CHECK(c.side_by_side->timed == static_cast<int>(timed.size()));
    CHECK(c.side_by_side->median_us - BaseMedian(c.proposal.genome) == Approx(offset));
  }
  CHECK_THAT(report.message, Catch::Contains("by score it was"));

  // Every timing, in rounds alternately in score order and reversed, on GPU 0.
  const std::vector<Retiming> retimings = store.Retimings(run.run_id());
  REQUIRE(retimings.size() == 1);
  const Retiming& retiming = retimings[0];
  CHECK(retiming.rounds == 4);
  CHECK(retiming.gpu->ordinal == 0);
  CHECK(retiming.Members() == IdSet(timed));
  REQUIRE(retiming.timings.size() == timings);
  for (int round = 0; round < 4; ++round) {
    const std::vector<int64_t> order = RoundOrder(Ids(timed), round);
    for (size_t i = 0; i < order.size(); ++i) {
      const RetimingTiming& t = retiming.timings[static_cast<size_t>(round) * timed.size() + i];
      CHECK(t.round == round);
      CHECK(t.candidate_id == order[i]);
    }
  }
  // The worker got them in that order, last.
  const std::vector<std::pair<int, Genome>> log = run.RequestLog();
  REQUIRE(log.size() >= timings);
  for (size_t i = 0; i < timings; ++i) {
    const RetimingTiming& t = retiming.timings[i];
    const CandidateRecord member = *store.FindCandidate(t.candidate_id);
    CHECK(log[log.size() - timings + i].second == member.proposal.genome);
  }
}

TEST_CASE(
    "retime: a close contender that is faster side by side than a member takes its place in the "
    "elite; the search's own elite stays the score's",
    "[retime][search][gpus]") {
  // A seed where a candidate scored behind the elite (measured later, on a warmer GPU) is
  // faster than one of its members.
  const Retimed retimed = RetimeRunWhere(1, [](const auto& by_score, const auto& timed) {
    return IdSet(First(ByTrueSpeed(timed), by_score.size())) != IdSet(by_score);
  });
  const auto& [found, report, announced, by_score, timed, elite] = retimed;
  FakeGpuRun& run = *found;
  PopulationStore& store = run.store();
  INFO(report.message);
  CHECK(report.result == RetimeResult::kRetimed);
  REQUIRE(timed.size() > by_score.size());
  REQUIRE(announced.size() == 1);
  CHECK_THAT(announced[0], Catch::Contains("close contender"));
  CHECK_THAT(announced[0], Catch::Contains("scored within 3 % of the last member"));

  CHECK(elite.size() == 4);
  CHECK(Ids(elite) == Ids(First(ByTrueSpeed(timed), 4)));
  std::vector<int64_t> joined;
  for (const CandidateRecord& c : elite) {
    if (IdSet(by_score).count(c.id) == 0) joined.push_back(c.id);
  }
  REQUIRE(!joined.empty());
  CHECK_THAT(report.message, Catch::Contains("joined the elite from the contenders"));
  CHECK_THAT(report.message, Catch::Contains("#" + std::to_string(joined[0])));
  // Every one that joined was scored behind the elite's last member, within the margin.
  for (const int64_t id : joined) {
    const double score = *store.FindCandidate(id)->score_us();
    CHECK(score >= *by_score.back().score_us());
    CHECK(score <= *by_score.back().score_us() * (1 + kContenderMargin));
  }
  // The search decides on the score's elite, which the re-timing did not touch.
  CHECK(Ids(store.EliteByScore(run.run_id())) ==
        Ids(SelectElite(store.Candidates(run.run_id()), 4)));
}

TEST_CASE("retime: a run on several GPUs re-times its elite on the first GPU only",
          "[retime][search][gpus]") {
  FakeGpuRun run({kWarming, kWarming, kWarming}, 7, 32, 3);
  const SearchSummary summary = run.Run();
  REQUIRE(summary.retime);
  INFO(summary.retime->message);
  CHECK(summary.retime->result == RetimeResult::kRetimed);
  const std::vector<Retiming> retimings = run.store().Retimings(run.run_id());
  REQUIRE(retimings.size() == 1);
  CHECK(retimings[0].gpu->ordinal == 0);
  CHECK(retimings[0].gpu->uuid == "GPU-fake-0");
  const size_t timings = run.store().Contenders(run.run_id()).size() * 4;
  CHECK(retimings[0].timings.size() == timings);
  const std::vector<std::pair<int, Genome>> log = run.RequestLog();
  REQUIRE(log.size() >= timings);
  for (size_t i = log.size() - timings; i < log.size(); ++i) CHECK(log[i].first == 0);
  CHECK(retimings[0].Members() == IdSet(run.store().Contenders(run.run_id())));
}

TEST_CASE(
    "retime: a resumed run re-times again when its elite's members changed, not when they did "
    "not; in between the order is the score's",
    "[retime][search][gpus]") {
  FakeGpuRun run({kWarming}, 11, 24, 3);
  REQUIRE(run.Run().retime->result == RetimeResult::kRetimed);
  const std::set<int64_t> first_members = run.store().LatestRetiming(run.run_id())->Members();
  CHECK(first_members == IdSet(run.store().Contenders(run.run_id())));
  const std::set<int64_t> first_elite = IdSet(run.store().EliteByScore(run.run_id()));
  const std::vector<int64_t> first_order = Ids(run.store().Elite(run.run_id()));
  const size_t requests = run.RequestLog().size();

  // Resumed with nothing left to search: the same members, nothing timed again.
  run.Restart({kWarming});
  const SearchSummary same = run.Run();
  CHECK(same.reason == StopReason::kBudget);
  REQUIRE(same.retime);
  CHECK(same.retime->result == RetimeResult::kUpToDate);
  CHECK(run.store().Retimings(run.run_id()).size() == 1);
  CHECK(run.RequestLog().size() == requests);
  CHECK(Ids(run.store().Elite(run.run_id())) == first_order);

  // A larger budget, searched with the re-timing off: new members (measured on a fresh, cool
  // worker) joined, and the elite is in score order until it is re-timed.
  run.store().SetRunBudget(run.run_id(), 56);
  run.Restart({kWarming});
  CHECK(run.Run(NoRetime()).reason == StopReason::kBudget);
  const std::vector<CandidateRecord> grown = run.store().Elite(run.run_id());
  REQUIRE(IdSet(grown) != first_elite);
  CHECK(Ids(grown) == Ids(run.store().EliteByScore(run.run_id())));
  for (const CandidateRecord& c : grown) CHECK(!c.side_by_side);

  // The next resume stops at once and re-times the new members.
  run.Restart({kWarming});
  const SearchSummary again = run.Run();
  REQUIRE(again.retime);
  INFO(again.retime->message);
  CHECK(again.retime->result == RetimeResult::kRetimed);
  const std::vector<Retiming> retimings = run.store().Retimings(run.run_id());
  REQUIRE(retimings.size() == 2);
  const std::vector<CandidateRecord> timed = run.store().Contenders(run.run_id());
  CHECK(Ids(First(timed, 3)) == Ids(grown));
  CHECK(retimings[1].Members() == IdSet(timed));
  CHECK(retimings[0].Members() == first_members);  // the first is kept
  const std::vector<CandidateRecord> elite = run.store().Elite(run.run_id());
  CHECK(Ids(elite) == Ids(First(ByTrueSpeed(timed), 3)));
  for (const CandidateRecord& c : elite) CHECK(c.side_by_side->retiming_id == retimings[1].id);
}

TEST_CASE(
    "retime: a worker that crashes or hangs while re-timing leaves everything stored as it was "
    "and the elite in score order",
    "[retime][search][gpus]") {
  const std::vector<std::string> misbehaving =
      GENERATE(std::vector<std::string>{"--crash-every", "3"},
               std::vector<std::string>{"--hang-every", "3"});
  FakeGpuRun run({kWarming}, 11, 24, 3);
  CHECK(run.Run(NoRetime()).reason == StopReason::kBudget);
  const std::string before = Stored(run.store(), run.run_id());

  run.Restart({misbehaving});
  const SearchSummary summary = run.Run();
  CHECK(summary.reason == StopReason::kBudget);
  REQUIRE(summary.retime);
  const std::string& message = summary.retime->message;
  INFO(message);
  CHECK(summary.retime->result == RetimeResult::kFailed);
  CHECK_THAT(message, Catch::StartsWith("re-timing failed: candidate "));
  CHECK_THAT(message, Catch::Contains("in round 1 was"));
  CHECK_THAT(message, Catch::Contains(misbehaving[0] == "--crash-every" ? "crashed" : "deadline"));
  CHECK_THAT(message, Catch::EndsWith("the elite keeps its score order and nothing was stored"));
  CHECK(Stored(run.store(), run.run_id()) == before);
  CHECK(run.store().Retimings(run.run_id()).empty());
  const std::vector<CandidateRecord> elite = run.store().Elite(run.run_id());
  CHECK(Ids(elite) == Ids(run.store().EliteByScore(run.run_id())));
  for (const CandidateRecord& c : elite) CHECK(!c.side_by_side);
  CHECK(run.pipeline().worker_respawns() >= 1);

  // A later resume on a sound worker re-times it.
  run.Restart({kWarming});
  CHECK(run.Run().retime->result == RetimeResult::kRetimed);
  CHECK(run.store().Retimings(run.run_id()).size() == 1);
}

TEST_CASE("retime: a stop (Ctrl-C, SIGTERM) while re-timing stores nothing and stops at once",
          "[retime][search][gpus]") {
  FakeGpuRun run({kWarming}, 11, 24, 3);
  CHECK(run.Run(NoRetime()).reason == StopReason::kBudget);
  const std::string before = Stored(run.store(), run.run_id());
  const size_t requests = run.RequestLog().size();

  // Stopped after five timings.
  int asked = 0;
  const RetimeReport stopped =
      RetimeElite(run.store(), run.run_id(), run.pipeline(), {}, [&asked] { return ++asked > 5; });
  CHECK(stopped.result == RetimeResult::kInterrupted);
  CHECK(stopped.message == "re-timing stopped after 5 of " +
                               std::to_string(run.store().Contenders(run.run_id()).size() * 4) +
                               " timings; the elite keeps its score order and nothing was stored");
  CHECK(run.RequestLog().size() == requests + 5);
  CHECK(run.store().Retimings(run.run_id()).empty());
  CHECK(Stored(run.store(), run.run_id()) == before);

  // Through the search: the run stops for its budget, the re-timing at once, before any timing.
  std::atomic<bool> stop{true};
  const SearchSummary summary = run.Run({}, stop);
  CHECK(summary.reason == StopReason::kBudget);
  REQUIRE(summary.retime);
  CHECK(summary.retime->result == RetimeResult::kInterrupted);
  CHECK(run.RequestLog().size() == requests + 5);
  CHECK(run.store().Retimings(run.run_id()).empty());
  CHECK(Stored(run.store(), run.run_id()) == before);
}

TEST_CASE(
    "retime: an elite of one member with no close contender has no order to settle; with one, "
    "the two are timed side by side; rounds 0 turn it off",
    "[retime][search][gpus]") {
  // Runs of budget 16, searched without the re-timing, until one has no candidate scored
  // within the margin of its best and one has; each is then re-timed on its own store.
  bool alone = false;
  bool contested = false;
  for (uint64_t seed = 1; seed < 200 && (!alone || !contested); ++seed) {
    FakeGpuRun one({kWarming}, seed, 16, 1);
    REQUIRE(one.Run(NoRetime()).reason == StopReason::kBudget);
    const std::vector<CandidateRecord> contenders = one.store().Contenders(one.run_id());
    const RetimeReport report = RetimeElite(one.store(), one.run_id(), one.pipeline(), {}, nullptr);
    INFO(report.message);
    const std::vector<CandidateRecord> elite = one.store().Elite(one.run_id());
    REQUIRE(elite.size() == 1);
    if (contenders.size() == 1) {
      alone = true;
      CHECK(report.result == RetimeResult::kTooFew);
      CHECK(report.message == "the elite has 1 member: nothing to re-time side by side");
      CHECK(one.store().Retimings(one.run_id()).empty());
      CHECK(!elite[0].side_by_side);
    } else {
      contested = true;
      CHECK(report.result == RetimeResult::kRetimed);
      CHECK(elite[0].id == ByTrueSpeed(contenders)[0].id);
      REQUIRE(elite[0].side_by_side);
      CHECK(elite[0].side_by_side->timed == static_cast<int>(contenders.size()));
    }
  }
  CHECK(alone);
  CHECK(contested);

  FakeGpuRun off({kWarming}, 11, 16, 3);
  const SearchSummary unretimed = off.Run(NoRetime());
  REQUIRE(unretimed.retime);
  CHECK(unretimed.retime->result == RetimeResult::kOff);
  CHECK(off.store().Retimings(off.run_id()).empty());
}

TEST_CASE(
    "retime: a run resumed (--force) on another template version or GPU model is not re-timed",
    "[retime][search][gpus]") {
  const std::string column = GENERATE(std::string("template_hash"), std::string("device"));
  FakeGpuRun run({kWarming}, 11, 16, 3);
  CHECK(run.Run(NoRetime()).reason == StopReason::kBudget);
  {
    sqlite::Database db(run.folder() / "evo.db", sqlite::Database::Mode::kReadWrite);
    db.Execute("UPDATE runs SET " + column + " = 'another'");
  }
  const SearchSummary summary = run.Run();
  REQUIRE(summary.retime);
  CHECK(summary.retime->result == RetimeResult::kUnavailable);
  CHECK_THAT(summary.retime->message,
             Catch::Contains(column == "device" ? "was measured on another, not on Fake GPU"
                                                : "was measured with another version of "
                                                  "sdpa_fp16"));
  CHECK(run.store().Retimings(run.run_id()).empty());
}

TEST_CASE("retime: an interrupted search does not re-time", "[retime][search][gpus]") {
  FakeGpuRun run({kWarming}, 11, 24, 3);
  // Interrupted as the first candidate is taken: the run pauses, and no re-timing starts.
  const std::atomic<bool> stop{true};
  const SearchSummary summary = run.Run({}, stop);
  CHECK(summary.reason == StopReason::kInterrupted);
  CHECK(!summary.retime);
  CHECK(run.store().Retimings(run.run_id()).empty());
}

TEST_CASE(
    "a GPU whose clock falls as the search goes: the kernels it scored behind are re-timed side "
    "by side by their cycles, and the elite is the fastest at one clock",
    "[retime][search][gpus][cycles]") {
  // 14 MHz less with every evaluation: the 32nd runs at 1307 MHz and reads a third slower.
  const std::vector<std::string> falling = {"--clock-drift-mhz", "14"};
  bool scored_out = false;
  // Seeds 6 to 13: in 5 of them one of the fastest kernels is scored too far behind (11 of seeds 0
  // to 39). With 6 MHz and seeds 0 to 5 only seed 4 was, and a run perturbed under load (the
  // pipeline's timing moves which evaluation a candidate gets) failed the check in CI.
  for (uint64_t seed = 6; seed < 14; ++seed) {
    INFO("seed " << seed);
    FakeGpuRun run({falling}, seed, 32, 3);
    const SearchSummary summary = run.Run();
    REQUIRE(summary.reason == StopReason::kBudget);
    REQUIRE(summary.retime);
    CHECK(summary.retime->result == RetimeResult::kRetimed);
    std::vector<CandidateRecord> scored;
    for (const CandidateRecord& c : run.store().Candidates(run.run_id())) {
      if (c.score_us()) scored.push_back(c);
    }
    REQUIRE(scored.size() >= 3);
    std::vector<CandidateRecord> fastest = scored;  // at one clock: by the clock-free median
    std::stable_sort(fastest.begin(), fastest.end(),
                     [](const CandidateRecord& a, const CandidateRecord& b) {
                       return BaseMedian(a.proposal.genome) < BaseMedian(b.proposal.genome);
                     });
    fastest.resize(3);
    // Every one of them was timed side by side, and the elite is they, fastest first.
    const std::set<int64_t> timed = run.store().LatestRetiming(run.run_id())->Members();
    for (const CandidateRecord& c : fastest) CHECK(timed.count(c.id) == 1);
    CHECK(Ids(run.store().Elite(run.run_id())) == Ids(fastest));
    // What the score alone would have re-timed: the same records without their clocks.
    std::vector<CandidateRecord> clockless = scored;
    for (CandidateRecord& c : clockless) {
      c.outcome.gpu->timing->mean_sm_clock_mhz = 0;
      c.confirmation->mean_sm_clock_mhz = 0;
    }
    std::set<int64_t> by_score;
    for (const CandidateRecord& c : SelectContenders(clockless, 3)) by_score.insert(c.id);
    for (const CandidateRecord& c : fastest) scored_out = scored_out || by_score.count(c.id) == 0;
  }
  // At least once one of the fastest was scored too far behind to be re-timed by its score.
  CHECK(scored_out);
}

}  // namespace
}  // namespace evo

#include "engine/retime.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

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

TEST_CASE("OrderBySideBySide: medians order the members, ties keep the score order", "[retime]") {
  std::vector<CandidateRecord> elite(3);
  for (size_t i = 0; i < elite.size(); ++i) elite[i].id = static_cast<int64_t>(i + 1);
  Retiming retiming;
  retiming.id = 5;
  // Medians of four timings each: 1 -> 11, 2 -> 10.5 (between 10 and 11), 3 -> 11 (a tie with 1).
  const std::vector<std::pair<int64_t, double>> timings = {{1, 11}, {2, 10}, {3, 12}, {3, 10},
                                                           {2, 11}, {1, 11}, {1, 12}, {2, 10},
                                                           {3, 11}, {3, 11}, {2, 12}, {1, 9}};
  for (const auto& [id, us] : timings) {
    RetimingTiming t;
    t.candidate_id = id;
    t.timing.median_us = us;
    retiming.timings.push_back(t);
  }
  CHECK(retiming.Medians() == std::map<int64_t, double>{{1, 11.0}, {2, 10.5}, {3, 11.0}});
  const std::vector<CandidateRecord> ordered = OrderBySideBySide(elite, retiming);
  CHECK(Ids(ordered) == std::vector<int64_t>{2, 1, 3});
  CHECK(ordered[0].side_by_side->median_us == 10.5);
  CHECK(ordered[0].side_by_side->timings == 4);
  CHECK(ordered[0].side_by_side->retiming_id == 5);

  // Other members (one left, one joined): the score's order, no side-by-side figures.
  elite[2].id = 4;
  const std::vector<CandidateRecord> other = OrderBySideBySide(elite, retiming);
  CHECK(Ids(other) == std::vector<int64_t>{1, 2, 4});
  for (const CandidateRecord& c : other) CHECK(!c.side_by_side);
  CHECK(Ids(OrderBySideBySide(elite, std::nullopt)) == std::vector<int64_t>{1, 2, 4});
}

TEST_CASE(
    "retime: at the end of a run the elite is ordered by side-by-side medians, its members "
    "unchanged, every timing stored",
    "[retime][search][gpus]") {
  // A seed whose scores, taken as the GPU warmed, put the elite out of order, so that the
  // re-timing has an order to recover (most seeds do; which ones follows the engine).
  const auto by_true_speed = [](std::vector<CandidateRecord> members) {
    std::stable_sort(members.begin(), members.end(),
                     [](const CandidateRecord& a, const CandidateRecord& b) {
                       return BaseMedian(a.proposal.genome) < BaseMedian(b.proposal.genome);
                     });
    return members;
  };
  uint64_t seed = 7;
  for (; seed < 40; ++seed) {
    FakeGpuRun probe({kWarming}, seed, 32, 4);
    probe.Run(NoRetime());
    const std::vector<CandidateRecord> scored = probe.store().EliteByScore(probe.run_id());
    if (Ids(scored) != Ids(by_true_speed(scored))) break;
  }
  REQUIRE(seed < 40);
  FakeGpuRun run({kWarming}, seed, 32, 4);
  std::vector<std::string> announced;
  SearchOptions options;
  options.retime.announce = [&](const std::string& line) { announced.push_back(line); };
  const SearchSummary summary = run.Run(options);
  CHECK(summary.reason == StopReason::kBudget);
  REQUIRE(summary.retime);
  INFO(summary.retime->message);
  CHECK(summary.retime->result == RetimeResult::kRetimed);
  REQUIRE(announced.size() == 1);
  CHECK_THAT(announced[0], Catch::Contains("side by side on GPU 0: 4 rounds, 16 timings"));

  PopulationStore& store = run.store();
  const std::vector<CandidateRecord> by_score = store.EliteByScore(run.run_id());
  const std::vector<CandidateRecord> elite = store.Elite(run.run_id());
  REQUIRE(by_score.size() == 4);
  // The members are the score's Top-K, as SelectElite makes it.
  CHECK(Ids(by_score) == Ids(SelectElite(store.Candidates(run.run_id()), 4)));
  CHECK(IdSet(elite) == IdSet(by_score));

  // Side by side, the warming cancels: the order is the one a GPU that never warmed gives,
  // which the scores (taken as the GPU warmed) did not.
  CHECK(Ids(elite) == Ids(by_true_speed(by_score)));
  CHECK(Ids(elite) != Ids(by_score));
  REQUIRE(elite.front().side_by_side);
  const double offset =
      elite.front().side_by_side->median_us - BaseMedian(elite.front().proposal.genome);
  for (const CandidateRecord& c : elite) {
    REQUIRE(c.side_by_side);
    CHECK(c.side_by_side->timings == 4);
    CHECK(c.side_by_side->median_us - BaseMedian(c.proposal.genome) == Approx(offset));
  }
  CHECK_THAT(summary.retime->message, Catch::Contains("by score it was"));

  // Every timing, in rounds alternately in score order and reversed, on GPU 0.
  const std::vector<Retiming> retimings = store.Retimings(run.run_id());
  REQUIRE(retimings.size() == 1);
  const Retiming& retiming = retimings[0];
  CHECK(retiming.rounds == 4);
  CHECK(retiming.gpu->ordinal == 0);
  REQUIRE(retiming.timings.size() == 16);
  for (int round = 0; round < 4; ++round) {
    const std::vector<int64_t> order = RoundOrder(Ids(by_score), round);
    for (size_t i = 0; i < order.size(); ++i) {
      const RetimingTiming& t = retiming.timings[static_cast<size_t>(round) * 4 + i];
      CHECK(t.round == round);
      CHECK(t.candidate_id == order[i]);
    }
  }
  // The worker got them in that order, last.
  const std::vector<std::pair<int, Genome>> log = run.RequestLog();
  REQUIRE(log.size() >= 16);
  for (size_t i = 0; i < 16; ++i) {
    const RetimingTiming& t = retiming.timings[i];
    const CandidateRecord member = *store.FindCandidate(t.candidate_id);
    CHECK(log[log.size() - 16 + i].second == member.proposal.genome);
  }
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
  const std::vector<std::pair<int, Genome>> log = run.RequestLog();
  REQUIRE(log.size() >= 12);
  for (size_t i = log.size() - 12; i < log.size(); ++i) CHECK(log[i].first == 0);
  CHECK(retimings[0].Members() == IdSet(run.store().EliteByScore(run.run_id())));
}

TEST_CASE(
    "retime: a resumed run re-times again when its elite's members changed, not when they did "
    "not; in between the order is the score's",
    "[retime][search][gpus]") {
  FakeGpuRun run({kWarming}, 11, 24, 3);
  REQUIRE(run.Run().retime->result == RetimeResult::kRetimed);
  const std::set<int64_t> first_members = run.store().LatestRetiming(run.run_id())->Members();
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
  REQUIRE(IdSet(grown) != first_members);
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
  CHECK(retimings[1].Members() == IdSet(grown));
  CHECK(retimings[0].Members() == first_members);  // the first is kept
  const std::vector<CandidateRecord> elite = run.store().Elite(run.run_id());
  CHECK(IdSet(elite) == IdSet(grown));
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
  CHECK(stopped.message ==
        "re-timing stopped after 5 of 12 timings; the elite keeps its score order and nothing "
        "was stored");
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

TEST_CASE("retime: an elite of one member has no order to settle; rounds 0 turn it off",
          "[retime][search][gpus]") {
  FakeGpuRun one({kWarming}, 11, 16, 1);
  const SearchSummary summary = one.Run();
  REQUIRE(summary.retime);
  CHECK(summary.retime->result == RetimeResult::kTooFew);
  CHECK(summary.retime->message == "the elite has 1 member: nothing to re-time side by side");
  CHECK(one.store().Retimings(one.run_id()).empty());
  CHECK(one.store().Elite(one.run_id()).size() == 1);

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

}  // namespace
}  // namespace evo

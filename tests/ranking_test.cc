#include "population/ranking.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "evaluator/candidate_outcome.h"
#include "evaluator/device_kernels.h"
#include "evaluator/gpu_verdict_json.h"
#include "population/candidate.h"
#include "population/retiming.h"
#include "population/store.h"

namespace evo {
namespace {

TimingFigures Timed(double median_us, double mean_mhz) {
  TimingFigures t;
  t.median_us = median_us;
  t.p10_us = median_us * 0.99;
  t.p90_us = median_us * 1.01;
  t.mean_sm_clock_mhz = mean_mhz;
  return t;
}

// A measured candidate whose first timing and confirmation are as given.
CandidateRecord Measured(int64_t id, const TimingFigures& first, const TimingFigures& second) {
  CandidateRecord c;
  c.id = id;
  c.state = CandidateState::kFinished;
  c.outcome.status = Status::kMeasured;
  c.outcome.gpu = GpuVerdict{};
  c.outcome.gpu->timing = first;
  c.confirmation = second;
  return c;
}

std::vector<int64_t> Ids(const std::vector<CandidateRecord>& candidates) {
  std::vector<int64_t> ids;
  for (const CandidateRecord& c : candidates) ids.push_back(c.id);
  return ids;
}

TEST_CASE("the mean SM clock from two stamps: the median over the SMs stamped in both",
          "[ranking]") {
  // Slots of (cycles, ns): SM 0 ran at 1500 MHz, SM 1 at 1600, SM 2 at 1700; SM 3 was stamped
  // only after, SM 4 only before, SM 5 in neither.
  std::vector<uint64_t> before(12, 0);
  std::vector<uint64_t> after(12, 0);
  const auto stamp = [](std::vector<uint64_t>& s, int sm, uint64_t cycles, uint64_t ns) {
    s[2 * sm] = cycles;
    s[2 * sm + 1] = ns;
  };
  stamp(before, 0, 1000, 5000);
  stamp(after, 0, 1000 + 1500 * 2000, 5000 + 2000 * 1000);
  stamp(before, 1, 7, 5001);
  stamp(after, 1, 7 + 1600 * 2000, 5001 + 2000 * 1000);
  stamp(before, 2, 99, 4999);
  stamp(after, 2, 99 + 1700 * 2000, 4999 + 2000 * 1000);
  stamp(after, 3, 1, 1);
  stamp(before, 4, 1, 1);
  CHECK(MeanClockMhz(before, after) == Approx(1600));
  // No SM stamped in both, or no time between the stamps: no figure.
  CHECK(MeanClockMhz(std::vector<uint64_t>(12, 0), after) == 0);
  CHECK(MeanClockMhz(before, before) == 0);
}

TEST_CASE("a timing's cycles, and what a set of timings is ranked by", "[ranking]") {
  const TimingFigures clocked = Timed(900, 1600);
  const TimingFigures older = Timed(900, 0);
  CHECK(*MedianCycles(clocked) == Approx(900 * 1600));
  CHECK(!MedianCycles(older));
  CHECK(RankingFor({&clocked, &clocked}) == Ranking::kCycles);
  CHECK(RankingFor({&clocked, &older}) == Ranking::kTime);
  CHECK(RankingFor({&clocked, nullptr}) == Ranking::kTime);
  CHECK(RankedMedian(clocked, Ranking::kTime) == 900);
  CHECK(RankedMedian(clocked, Ranking::kCycles) == Approx(900 * 1600));
  CHECK(RankedHalfSpread(clocked, Ranking::kCycles) == Approx(9 * 1600));
  CHECK_THROWS(RankedMedian(older, Ranking::kCycles));
}

TEST_CASE("a timing's mean clock survives the verdict's JSON; a verdict without one is unchanged",
          "[ranking]") {
  GpuVerdict verdict;
  verdict.timing = Timed(12.5, 1712.5);
  CHECK(GpuVerdictFromJson(GpuVerdictToJson(verdict)).timing->mean_sm_clock_mhz == 1712.5);
  verdict.timing->mean_sm_clock_mhz = 0;
  const nlohmann::json json = GpuVerdictToJson(verdict);
  CHECK(!json.at("timing").contains("mean_sm_clock_mhz"));
  CHECK(GpuVerdictFromJson(json).timing->mean_sm_clock_mhz == 0);
}

TEST_CASE(
    "the score is the slower timing by cycles where both carry their clock, and the elite is "
    "ordered by cycles; by time where one timing has no clock",
    "[ranking]") {
  // A timing at a high clock is fast in time and slow in cycles.
  const CandidateRecord lucky = Measured(1, Timed(900, 1800), Timed(920, 1600));
  // 900 us at 1800 MHz is 1.62 M cycles, 920 at 1600 is 1.472 M: the first is the slower.
  CHECK(lucky.scoring_timing() == lucky.outcome.timing());
  CHECK(*lucky.score_us() == 900);
  CHECK(*lucky.score(Ranking::kCycles) == Approx(1.62e6));

  // Three kernels timed as the clock fell: by time 2 < 3 < 1, by cycles 1 < 2 < 3.
  const std::vector<CandidateRecord> run = {
      Measured(1, Timed(950, 1500), Timed(950, 1500)),   // 1.425 M cycles
      Measured(2, Timed(880, 1750), Timed(880, 1750)),   // 1.540 M
      Measured(3, Timed(900, 1760), Timed(900, 1760))};  // 1.584 M
  CHECK(RankingOf(run) == Ranking::kCycles);
  CHECK(Ids(SelectElite(run, 3)) == std::vector<int64_t>{1, 2, 3});
  CHECK(Ids(SelectElite(run, 1)) == std::vector<int64_t>{1});

  // One record from before the clock was measured: the whole set compares by time.
  std::vector<CandidateRecord> mixed = run;
  mixed.push_back(Measured(4, Timed(990, 0), Timed(990, 0)));
  CHECK(RankingOf(mixed) == Ranking::kTime);
  CHECK(Ids(SelectElite(mixed, 4)) == std::vector<int64_t>{2, 3, 1, 4});

  // The contenders' margin is in the same unit: 3 % past the elite's last by cycles.
  const std::vector<CandidateRecord> near = {
      Measured(1, Timed(1000, 1500), Timed(1000, 1500)),  // 1.500 M
      Measured(2, Timed(800, 1930), Timed(800, 1930)),    // 1.544 M: within 3 % of 1.5 M
      Measured(3, Timed(700, 2250), Timed(700, 2250))};   // 1.575 M: outside
  CHECK(Ids(SelectContenders(near, 1)) == std::vector<int64_t>{1, 2});
}

TEST_CASE("a side-by-side re-timing orders its members by their median cycles", "[ranking]") {
  Retiming retiming;
  retiming.id = 9;
  // Member 1 met the high clocks: faster in time, slower in cycles.
  for (int round = 0; round < 2; ++round) {
    retiming.timings.push_back({1, round, Timed(900 + round, 1800)});
    retiming.timings.push_back({2, round, Timed(920 + round, 1650)});
  }
  CHECK(retiming.ranking() == Ranking::kCycles);
  CHECK(retiming.Medians().at(1) == Approx(900.5));
  CHECK(retiming.RankedMedians().at(1) == Approx(900.5 * 1800));
  const std::vector<CandidateRecord> elite = {Measured(1, Timed(900, 1800), Timed(900, 1800)),
                                              Measured(2, Timed(920, 1650), Timed(920, 1650))};
  const std::vector<CandidateRecord> ordered = EliteBySideBySide(elite, elite, retiming);
  CHECK(Ids(ordered) == std::vector<int64_t>{2, 1});
  CHECK(ordered.front().side_by_side->ranking == Ranking::kCycles);
  CHECK(ordered.front().side_by_side->median_us == Approx(920.5));

  // One timing without its clock: the re-timing compares by time.
  retiming.timings.push_back({1, 2, Timed(899, 0)});
  CHECK(retiming.ranking() == Ranking::kTime);
  CHECK(Ids(EliteBySideBySide(elite, elite, retiming)) == std::vector<int64_t>{1, 2});
}

TEST_CASE("the engine's models read times at the history's median clock", "[ranking]") {
  std::vector<CandidateRecord> history = {Measured(1, Timed(950, 1500), Timed(950, 1500)),
                                          Measured(2, Timed(880, 1750), Timed(880, 1750)),
                                          Measured(3, Timed(900, 1760), Timed(900, 1760))};
  const ComparableTimes times = ComparableTimes::OfFirstTimings(history);
  CHECK(times.ranking() == Ranking::kCycles);
  // At the median clock, 1750 MHz.
  CHECK(times(Timed(950, 1500)) == Approx(950.0 * 1500 / 1750));
  CHECK(times(Timed(880, 1750)) == Approx(880));
  CHECK(times(Timed(950, 1500)) < times(Timed(880, 1750)));
  history.push_back(Measured(4, Timed(990, 0), Timed(990, 0)));
  const ComparableTimes as_measured = ComparableTimes::OfFirstTimings(history);
  CHECK(as_measured.ranking() == Ranking::kTime);
  CHECK(as_measured(Timed(950, 1500)) == 950);
}

}  // namespace
}  // namespace evo

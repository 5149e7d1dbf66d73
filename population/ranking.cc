#include "population/ranking.h"

#include <algorithm>

#include "common/error.h"
#include "evaluator/percentile.h"
#include "population/candidate.h"

namespace evo {

std::string_view ToString(Ranking ranking) {
  return ranking == Ranking::kCycles ? "SM cycles" : "time";
}

std::optional<double> MedianCycles(const TimingFigures& timing) {
  if (timing.mean_sm_clock_mhz <= 0) return std::nullopt;
  return timing.median_us * timing.mean_sm_clock_mhz;
}

Ranking RankingFor(const std::vector<const TimingFigures*>& timings) {
  for (const TimingFigures* timing : timings) {
    if (timing == nullptr || timing->mean_sm_clock_mhz <= 0) return Ranking::kTime;
  }
  return Ranking::kCycles;
}

namespace {

double ClockFactor(const TimingFigures& timing, Ranking ranking) {
  if (ranking == Ranking::kTime) return 1;
  if (timing.mean_sm_clock_mhz <= 0) {
    throw Error("a timing without its mean SM clock was ranked by cycles");
  }
  return timing.mean_sm_clock_mhz;
}

}  // namespace

Ranking RankingOf(const std::vector<CandidateRecord>& candidates) {
  std::vector<const TimingFigures*> timings;
  for (const CandidateRecord& candidate : candidates) {
    if (const TimingFigures* timing = candidate.scoring_timing()) timings.push_back(timing);
  }
  return RankingFor(timings);
}

double RankedMedian(const TimingFigures& timing, Ranking ranking) {
  return timing.median_us * ClockFactor(timing, ranking);
}

double RankedHalfSpread(const TimingFigures& timing, Ranking ranking) {
  return 0.5 * (timing.p90_us - timing.p10_us) * ClockFactor(timing, ranking);
}

ComparableTimes::ComparableTimes(const std::vector<const TimingFigures*>& timings) {
  if (timings.empty() || RankingFor(timings) != Ranking::kCycles) return;
  std::vector<double> clocks;
  for (const TimingFigures* timing : timings) clocks.push_back(timing->mean_sm_clock_mhz);
  std::sort(clocks.begin(), clocks.end());
  reference_mhz_ = Percentile(clocks, 0.5);
}

ComparableTimes ComparableTimes::OfFirstTimings(const std::vector<CandidateRecord>& history) {
  std::vector<const TimingFigures*> timings;
  for (const CandidateRecord& record : history) {
    if (record.state != CandidateState::kFinished) continue;
    if (const TimingFigures* timing = record.outcome.timing()) timings.push_back(timing);
  }
  return ComparableTimes(timings);
}

double ComparableTimes::operator()(const TimingFigures& timing) const {
  if (reference_mhz_ <= 0) return timing.median_us;
  return timing.median_us * timing.mean_sm_clock_mhz / reference_mhz_;
}

}  // namespace evo

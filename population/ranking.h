#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "evaluator/gpu_gates.h"

namespace evo {

struct CandidateRecord;

// What candidates are compared by: their time per call, or their SM cycles per call (the median
// time at the SM clock averaged over the same timed launches).
//
// On the H100 at its power limit the SM clock drifts 5 to 13 % over minutes with the GPU's state,
// so times order long kernels by the moment they were timed more than by their code. Cycles do not
// move with that drift, and they are what ncu measures at locked clocks. So evo ranks by cycles
// wherever every timing compared carries its mean clock, and by time where one does not (records
// and recordings from before the gate measured it). Times stay what evo reports.
enum class Ranking { kTime, kCycles };

// "time" or "SM cycles".
std::string_view ToString(Ranking ranking);

// SM cycles per call at the median; nullopt when the timing has no mean clock.
std::optional<double> MedianCycles(const TimingFigures& timing);

// kCycles when every one of `timings` has its mean clock, kTime otherwise.
Ranking RankingFor(const std::vector<const TimingFigures*>& timings);

// The figure `ranking` compares: the median in microseconds or in SM cycles. A timing without a
// mean clock has no cycles: asked for them, this throws evo::Error (a caller's defect).
double RankedMedian(const TimingFigures& timing, Ranking ranking);
// The measurement's noise in the same unit: half its p10..p90 spread.
double RankedHalfSpread(const TimingFigures& timing, Ranking ranking);

// How the engine's models read a history's timings: in microseconds, but where every one of
// them carries its mean clock, each scaled to their median clock (the time it would have taken
// there), so that they order as their cycles do and still read as times.
class ComparableTimes {
 public:
  explicit ComparableTimes(const std::vector<const TimingFigures*>& timings);
  // The first timings of `history`'s finished candidates that have one.
  static ComparableTimes OfFirstTimings(const std::vector<CandidateRecord>& history);
  double operator()(const TimingFigures& timing) const;
  Ranking ranking() const { return reference_mhz_ > 0 ? Ranking::kCycles : Ranking::kTime; }

 private:
  double reference_mhz_ = 0;  // 0: the times as measured
};

}  // namespace evo

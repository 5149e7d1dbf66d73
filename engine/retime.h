#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "evaluator/candidate_evaluator.h"
#include "population/store.h"

namespace evo {

// The side-by-side re-timing of a run's elite when the run stops. A candidate's score is two
// timings taken wherever the search was, at whatever clock the GPU had then (on the H100 the
// clock moves 1.56 to 1.80 GHz over a search of long kernels, and figures 2 to 6 %), so the
// order among close members is noise. Timed again in one worker on one GPU, in interleaved
// rounds, the members are compared under the same conditions.
struct RetimeOptions {
  // Rounds of one timing per member, alternately in score order and reversed (RoundOrder); 0
  // turns the re-timing off. An even number cancels a drift linear in time exactly.
  int rounds = 4;
  int lane = 0;  // the evaluator's GPU that times every member
  // Told, in one line, what is about to be timed before the first timing.
  std::function<void(const std::string&)> announce;
};

enum class RetimeResult {
  kRetimed,      // stored: the elite's order follows it
  kUpToDate,     // the latest re-timing timed exactly these members: nothing to do
  kTooFew,       // fewer than two members: no order to settle
  kOff,          // rounds is 0
  kUnavailable,  // the evaluator cannot time anew (a replay)
  kInterrupted,  // stopped before the last timing: nothing stored
  kFailed,       // a timing failed (a crash, a CUDA error, a rejected timing): nothing stored
};

// "retimed", "up_to_date", "too_few", "off", "unavailable", "interrupted", "failed".
std::string_view ToString(RetimeResult result);

struct RetimeReport {
  RetimeResult result = RetimeResult::kOff;
  std::string message;               // one line, for people
  std::optional<Retiming> retiming;  // the stored one, when kRetimed
};

// Re-times the elite of `run_id` (every member of the score's Top-K) and its close contenders
// (PopulationStore::Contenders: scored within kContenderMargin of the last member) side by side
// on options.lane when no stored re-timing timed exactly these candidates; the elite then holds
// K of them, by time and, where the re-timing cannot tell time apart, by cycles
// (PopulationStore::Elite). options.rounds rounds
// (RoundOrder), each timing the performance gate's measurement (CandidateEvaluator::Remeasure:
// gates 2 and 3 again, so a member whose output went wrong fails it). Stores the re-timing in
// one transaction once every timing is in; a failure, an exception or `should_stop` (asked
// before each timing) stores nothing, so the run keeps its elite in score order and everything
// stored as it was. Never throws for a failed timing; the report says what happened.
RetimeReport RetimeElite(PopulationStore& store, int64_t run_id, CandidateEvaluator& evaluator,
                         const RetimeOptions& options, const std::function<bool()>& should_stop);

}  // namespace evo

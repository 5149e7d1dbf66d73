#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include "engine/evolution.h"
#include "engine/retime.h"
#include "engine/search_space.h"
#include "evaluator/candidate_evaluator.h"
#include "population/store.h"

namespace evo {

struct SearchOptions {
  // Stops after this much wall time of this invocation; the run can be resumed.
  std::optional<std::chrono::steady_clock::duration> time_limit;
  // The performance gate: a measurement this many times slower than the best confirmed one
  // is `slow` and spends no re-measurement.
  double slow_factor = 3.0;
  EvolutionOptions evolution;
  // While a generation is measured, compile what the next one will likely hold (its proposals
  // should nothing improve, or should one of the first candidates become the best) on the
  // compile threads the generation leaves idle, so that the next generation's first
  // measurements need not wait for NVRTC. A guess changes no decision, only when a compile ends.
  bool compile_ahead = true;
  // A generation whose first half beat the best of the generations before stops there, and the
  // next one is proposed around the new best (engine/search.cc, GenerationCheckpoint).
  bool replan = true;
  // The elite's side-by-side re-timing once the search stops for any reason but an interrupt
  // (engine/retime); rounds = 0 turns it off. The time limit bounds the search, not the
  // re-timing after it (its length is known: members x rounds timings); `stop` ends it.
  RetimeOptions retime;
};

enum class StopReason { kBudget, kPatience, kTimeLimit, kInterrupted, kExhausted };
std::string_view ToString(StopReason reason);

struct SearchProgress {
  int64_t run_id = 0;
  int generation = 0;
  int64_t evaluated = 0;  // candidates of the run that reached the gates, all sessions
  int64_t budget = 0;
  std::optional<CandidateRecord> best;  // the elite's first
  double per_minute = 0;  // candidates this session finished per minute of its wall time
  std::optional<double> eta_seconds;
  const CandidateRecord* finished = nullptr;  // the candidate that just finished, if any
};

struct SearchSummary {
  StopReason reason = StopReason::kBudget;
  int64_t evaluated_now = 0;  // candidates finished by this session
  double seconds = 0;
  double per_minute = 0;
  // What the elite's re-timing did; absent when the search was interrupted.
  std::optional<RetimeReport> retime;
};

// Generations of a stored run, counted from its start, after which none improved on the best
// confirmed score by more than the noise (1 %, or half the incumbent's p10..p90 spread if
// wider). Only complete generations count. With `space`, a generation without improvement
// counts only once every valid configuration one knob away from the best was tried: until
// then the search has not looked where a better one is likeliest, and is not stuck.
int GenerationsWithoutImprovement(const std::vector<CandidateRecord>& candidates,
                                  const SearchSpace* space = nullptr);

// Throws evo::Error, naming the knob, when a stored configuration of run `run_id` sets other
// knobs than `manifest` has: the template gained or lost a knob since the run was stored (a
// user's template edited in place, or a replay, whose version check reads the recording's).
// Search::Run checks it first; a command that changes a stored run before it resumes it (a
// raised budget) checks it before that change.
void CheckStoredKnobs(const std::vector<CandidateRecord>& candidates, const Manifest& manifest,
                      int64_t run_id);

// The search loop of one stored run: proposes a generation (stored as pending in one
// transaction), lets the evaluator take them through the gates on all its GPUs at once while it
// compiles ahead (engine/lane_scheduler), and stores each finished candidate in its own
// transaction, in the generation's order, with the GPU that measured it and the elite it
// implies. A measured candidate that would enter the elite is measured a second time first, on
// the same GPU, and enters on that confirming figure; one far slower than the best is `slow`.
// Everything it decides follows from what the database holds, so a run killed at any moment
// resumes where it was: pending candidates are redone and the next generations are the ones the
// uninterrupted run would have made, on one GPU or several.
class Search {
 public:
  Search(PopulationStore& store, int64_t run_id, const SearchSpace& space,
         CandidateEvaluator& evaluator, SearchOptions options);

  // Runs until the budget is spent, the patience is out, the space is exhausted, the time
  // limit passes or `stop` becomes true (checked before a GPU takes a candidate; the ones on
  // the GPUs then are finished). Sets the run's state, then (unless interrupted) re-times the
  // elite and its close contenders side by side (options.retime), which chooses and orders
  // PopulationStore::Elite but changes nothing the search decides (it reads EliteByScore).
  SearchSummary Run(const std::function<void(const SearchProgress&)>& on_progress,
                    const std::atomic<bool>& stop);

 private:
  PopulationStore& store_;
  int64_t run_id_;
  const SearchSpace& space_;
  CandidateEvaluator& evaluator_;
  SearchOptions options_;
};

}  // namespace evo

#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/candidate_evaluator.h"

namespace evo {

// What the search does with the candidates a LaneScheduler takes through the gates. Every hook
// is called with the scheduler's lock held, so they never run at once and may share state.
struct LaneHooks {
  // Whether to stop taking candidates; asked before a lane takes one.
  std::function<bool()> should_stop;
  // The first measurement of candidate `index` is `outcome`, and every candidate before it is
  // finished: may change the outcome (the performance gate) and says whether the candidate
  // needs a confirming measurement.
  std::function<bool(size_t index, CandidateOutcome& outcome)> needs_confirmation;
  // Candidate `index` is done, after every candidate before it: store it. `confirmation` is the
  // confirming measurement when one was asked for; `lane` measured it (and confirmed it).
  std::function<void(size_t index, CandidateOutcome outcome, std::optional<GpuVerdict> confirmation,
                     int lane)>
      finish;
};

// Takes a batch of candidates (a generation) through the evaluator's lanes, one thread per lane:
// a free lane takes the next candidate whose compile is done (else the next one), so every GPU
// stays busy, while the candidates are finished strictly in their order. What the search decides
// about a candidate (slow, confirm it, its place in the elite) thus depends on the candidates
// before it and never on which GPU was faster: a run's candidates, outcomes and elite are the
// same on one GPU and on eight, given the same measurements. The confirming measurement of a
// candidate runs on the lane that measured it, before that lane takes another candidate.
//
// A lane whose evaluator throws LaneError (its GPU can no longer measure) is retired for the
// scheduler's life, and its unfinished candidates go back to the others: a candidate it was
// measuring, or had measured and not finished, is measured again from scratch on another GPU. A
// candidate whose measurement lost two GPUs is finished as a runtime_error, so that it cannot
// take down a third. When no lane is left, Run throws.
class LaneScheduler {
 public:
  explicit LaneScheduler(CandidateEvaluator& evaluator);

  // Returns when every candidate is finished, or once `should_stop` said so and the candidates
  // already measured are finished as far as their order allows (those after a candidate never
  // started stay unfinished: a resume redoes them). Rethrows what a hook throws, and any
  // evo::Error but LaneError from the evaluator, once every lane has stopped.
  void Run(const std::vector<Genome>& genomes, const LaneHooks& hooks);

  // The lanes that were retired, each with why.
  const std::map<int, std::string>& retired() const { return retired_; }

 private:
  CandidateEvaluator& evaluator_;
  std::map<int, std::string> retired_;
  // Why each GPU lost while measuring a configuration was lost, across batches.
  std::map<Genome, std::vector<std::string>> lane_failures_;
};

}  // namespace evo

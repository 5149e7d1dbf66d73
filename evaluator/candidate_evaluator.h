#pragma once

#include <string>
#include <vector>

#include "common/error.h"
#include "evaluator/candidate_outcome.h"
#include "evaluator/gpu_identity.h"
#include "kernel_templates/genome.h"

namespace evo {

// Who answers for the candidates: stored with a run, so that a resume on another GPU or another
// template version can be noticed.
struct EvaluatorIdentity {
  std::string evaluator;  // "gpu", or "replay <file>"
  std::string device;     // the GPUs' model (every GPU of a run is of one model)
  std::string arch;       // "sm_90"
  std::string driver_version;
  std::string nvrtc_version;
  std::string template_hash;  // the template version whose configurations it evaluates
  std::string notice;         // said once at the start of a run, e.g. what a replay replays
};

// A lane's GPU can no longer measure (its worker cannot be replaced): the candidate it was
// given is not its fault, and another lane can take it. Other evo::Errors mean that nothing
// can go on (NVRTC is broken, a replay lacks the configuration).
class LaneError : public Error {
 public:
  using Error::Error;
};

// Takes configurations of one task (template + problem) through the three gates. The search
// loop sees only this, so CPU tests can drive the whole loop with recorded measurements.
//
// Gates 2 and 3 run on lanes, one per GPU. A lane is driven by one thread at a time; different
// lanes may be driven at once, each through its own worker, while one compile pool serves them
// all (a configuration is compiled once, whichever lane measures it).
class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;
  virtual const EvaluatorIdentity& identity() const = 0;
  // The GPU of each lane; at least one.
  virtual const std::vector<GpuIdentity>& lanes() const = 0;
  // Configurations that will be evaluated soon, in order: work on them may start now (their
  // compiles run on the CPU cores while the GPUs measure). Not called while lanes are driven.
  virtual void Prefetch(const std::vector<Genome>& genomes) = 0;
  // Configurations that may be evaluated later (the search's guess at its next generation):
  // compiled only by threads that nothing Prefetch asked for keeps busy, and forgotten by the
  // next Prefetch unless started by then, so a wrong guess costs idle CPU time and no GPU time.
  // Changes no outcome. Called at most once after a Prefetch, from another thread, possibly while
  // the lanes measure what that Prefetch asked for.
  virtual void Speculate(const std::vector<Genome>& genomes) = 0;
  // Whether Evaluate of this configuration would start measuring at once, rather than wait for
  // its compile: a free lane takes such a configuration first.
  virtual bool ReadyToMeasure(const Genome& genome) const = 0;
  // All three gates for one valid configuration, gates 2 and 3 on `lane`'s GPU; blocks until
  // its outcome is known. Throws LaneError when that GPU can no longer measure.
  virtual CandidateOutcome Evaluate(int lane, const Genome& genome) = 0;
  // Gates 2 and 3 again, on `lane`'s GPU, for a configuration Evaluate measured there: the
  // confirming measurement. Throws LaneError like Evaluate.
  virtual GpuVerdict Remeasure(int lane, const Genome& genome) = 0;
  // Why Remeasure cannot time configurations anew, side by side (a replay only repeats what was
  // recorded, in the order it was recorded); empty when it can. The elite's re-timing at the end
  // of a run (engine/retime) is skipped, with this said, where it is not empty.
  virtual std::string RetimingUnavailable() const { return ""; }
};

}  // namespace evo

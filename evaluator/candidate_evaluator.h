#pragma once

#include <string>
#include <vector>

#include "evaluator/candidate_outcome.h"
#include "kernel_templates/genome.h"

namespace evo {

// Who answers for the candidates: stored with a run, so that a resume on another GPU or another
// template version can be noticed.
struct EvaluatorIdentity {
  std::string evaluator;  // "gpu", or "replay <file>"
  std::string device;     // the GPU's name
  std::string arch;       // "sm_90"
  std::string driver_version;
  std::string nvrtc_version;
  std::string template_hash;  // the template version whose configurations it evaluates
  std::string notice;         // said once at the start of a run, e.g. what a replay replays
};

// Takes configurations of one task (template + problem) through the three gates. The search
// loop sees only this, so CPU tests can drive the whole loop with recorded measurements.
class CandidateEvaluator {
 public:
  virtual ~CandidateEvaluator() = default;
  virtual const EvaluatorIdentity& identity() const = 0;
  // Configurations that will be evaluated soon, in order: work on them may start now (their
  // compiles run on the CPU cores while the GPU measures).
  virtual void Prefetch(const std::vector<Genome>& genomes) = 0;
  // All three gates for one valid configuration; blocks until its outcome is known.
  virtual CandidateOutcome Evaluate(const Genome& genome) = 0;
  // Gates 2 and 3 again for a configuration Evaluate measured: the confirming measurement.
  virtual GpuVerdict Remeasure(const Genome& genome) = 0;
};

}  // namespace evo

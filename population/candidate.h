#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "evaluator/candidate_outcome.h"
#include "evaluator/gpu_identity.h"
#include "kernel_templates/genome.h"

namespace evo {

// A configuration the engine proposes, with where it came from.
struct Proposal {
  Genome genome;
  // How it was made, for people reading the history: "default", "random",
  // "mutate BLOCK_N 64->128", "mutate STAGES 3->2 (insight: spills)", "crossover", "repair ...".
  std::string operator_name;
  std::optional<int64_t> parent1;  // candidate ids
  std::optional<int64_t> parent2;
};

enum class CandidateState { kPending, kFinished };

// An elite member's figure from the side-by-side re-timing that orders the elite (see
// population/retiming.h): the median of its timings there.
struct SideBySide {
  int64_t retiming_id = 0;
  double median_us = 0;
  // The median of its SM cycles per call, when every timing carries the mean clock.
  std::optional<double> median_cycles;
  int timings = 0;  // this member's
  int timed = 0;    // candidates the re-timing timed: the elite's members and close contenders
  std::optional<GpuIdentity> gpu;
  std::string finished_at;  // when the re-timing ended
};

// One candidate of a run as the population stores it.
struct CandidateRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string config_id;  // ConfigurationId: unique within a run
  int generation = 0;
  Proposal proposal;
  CandidateState state = CandidateState::kPending;
  CandidateOutcome outcome;  // meaningful once finished
  // The confirming re-measurement that lets a measured candidate into the elite. Absent for
  // candidates never confirmed.
  std::optional<TimingFigures> confirmation;
  // The GPU that measured it and confirmed it (the same one). Absent for candidates that never
  // reached a GPU, and for those stored before runs measured on several.
  std::optional<GpuIdentity> measured_on;
  std::string created_at;   // ISO 8601, UTC
  std::string finished_at;  // empty while pending
  // Set by PopulationStore::Elite on every member when the elite's order comes from a
  // side-by-side re-timing of exactly its members; absent otherwise (the order is the score's).
  std::optional<SideBySide> side_by_side;

  // The slower of the first and the confirming measurement: a place in the elite needs both to
  // be fast, so neither a lucky first timing nor a lucky second one holds it (on the H100 a
  // persistent kernel measured 1694 us, then 1559 us). Null unless measured and confirmed.
  const TimingFigures* scoring_timing() const {
    if (state != CandidateState::kFinished || outcome.status != Status::kMeasured ||
        !confirmation) {
      return nullptr;
    }
    const TimingFigures* first = outcome.timing();
    return first != nullptr && first->median_us > confirmation->median_us ? first : &*confirmation;
  }
  std::optional<double> score_us() const {
    const TimingFigures* timing = scoring_timing();
    if (timing == nullptr) return std::nullopt;
    return timing->median_us;
  }
  // The more SM cycles of the two timings: absent unless both carry their mean clock.
  std::optional<double> score_cycles() const {
    const TimingFigures* first = outcome.timing();
    if (scoring_timing() == nullptr || first == nullptr) return std::nullopt;
    const std::optional<double> a = first->median_cycles();
    const std::optional<double> b = confirmation->median_cycles();
    if (!a || !b) return std::nullopt;
    return std::max(*a, *b);
  }
};

}  // namespace evo

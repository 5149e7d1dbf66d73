#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evaluator/gpu_gates.h"
#include "evaluator/gpu_identity.h"
#include "population/candidate.h"

namespace evo {

// One timing of a side-by-side re-timing: the performance gate's measurement of one elite member
// in one round.
struct RetimingTiming {
  int64_t candidate_id = 0;
  int round = 0;  // from 0
  TimingFigures timing;
};

// A run's elite timed side by side on one GPU, in one worker: interleaved rounds, alternately in
// the elite's order and in reverse, so that a GPU warming (or cooling) over the session weighs on
// every member alike. Stored whole once every timing is in, or not at all.
struct Retiming {
  int64_t id = 0;  // 0 until stored
  int64_t run_id = 0;
  int rounds = 0;
  std::optional<GpuIdentity> gpu;  // the GPU that took every timing
  std::string started_at;          // ISO 8601, UTC
  std::string finished_at;
  std::vector<RetimingTiming> timings;  // in the order they were taken

  // The candidates it timed.
  std::set<int64_t> Members() const;
  // The median of each member's timings (each timing's own median_us).
  std::map<int64_t, double> Medians() const;
  // How many timings each member had.
  std::map<int64_t, int> Counts() const;
};

// The order of the members in round `round` of a re-timing of `members` (given best first by
// score): as given in even rounds, reversed in odd ones (A B C, C B A, A B C, ...). Over an even
// number of rounds every member's timings sit symmetrically around the session's middle, so a
// drift linear in time moves every member's median alike.
std::vector<int64_t> RoundOrder(const std::vector<int64_t>& members, int round);

// The elite (best first by score) in the order the re-timing's medians give it, best first, ties
// kept in score order, each member's SideBySide set, when `retiming` timed exactly the elite's
// members; otherwise (no re-timing, or the membership changed since) the elite as given.
std::vector<CandidateRecord> OrderBySideBySide(std::vector<CandidateRecord> elite,
                                               const std::optional<Retiming>& retiming);

}  // namespace evo

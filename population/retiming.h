#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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
  // The median of each member's SM cycles per call (TimingFigures::median_cycles), for the
  // members whose every timing carries a mean clock.
  std::map<int64_t, double> MedianCycles() const;
  // Whether the re-timing tells `challenger` slower than `leader`: its median lies further past
  // the leader's than the leader's timings lie from their own median (their median absolute
  // deviation), or it was slower in every round that timed both. Otherwise the two are within
  // what this re-timing resolves: at the H100's power limit one long kernel's timings swing by 5
  // to 13 % with the GPU's state, while a short one's stay within 1 to 2 %.
  bool ClearlySlower(int64_t challenger, int64_t leader) const;
};

// The order of the members in round `round` of a re-timing of `members` (given best first by
// score): as given in even rounds, reversed in odd ones (A B C, C B A, A B C, ...). Over an even
// number of rounds every member's timings sit symmetrically around the session's middle, so a
// drift linear in time moves every member's median alike.
std::vector<int64_t> RoundOrder(const std::vector<int64_t>& members, int round);

// How far past the score's K-th member a candidate's score may lie and still be re-timed beside
// the elite: on the H100 the same long kernel measured 2 to 6 % apart from one timing to the
// next, with the clock, so a candidate scored a few per cent behind may well be faster.
inline constexpr double kContenderMargin = 0.03;

// The candidates a re-timing times, best first by score: the score's elite (SelectElite of
// `elite_size`), up to max(elite_size, 2) more whose score is within kContenderMargin of the
// elite's last member's, and up to `elite_size` more: of the rest, those with fewer SM cycles
// (CandidateRecord::score_cycles) than a member of the score's elite, fewest first, which a clock
// that drifted between timings may have scored further behind.
std::vector<CandidateRecord> SelectContenders(const std::vector<CandidateRecord>& candidates,
                                              int elite_size);

// The elite as users take it. When `retiming` timed every member of the score's elite (`elite`,
// best first by score), and `retimed` holds the candidates it timed (best first by score):
// elite.size() of them, each carrying its SideBySide, place by place: the fastest left by the
// re-timing's medians (equal medians in score order), unless candidates the re-timing cannot
// tell slower than it (Retiming::ClearlySlower) took fewer SM cycles per call, by a larger
// fraction than the fraction of time they are behind it; then the one of those with the fewest.
// So a close contender that is faster side by side takes the place of the slowest member, and
// where time cannot tell two kernels apart, the one that does the work in fewer cycles comes
// first: at any clock the two shared, it would be the faster. But not one that saves fewer
// cycles than it loses time: it ran at a lower clock throughout, which at the power limit is the
// kernel's own. Otherwise (no re-timing, or the score's elite changed since) `elite`.
std::vector<CandidateRecord> EliteBySideBySide(std::vector<CandidateRecord> elite,
                                               std::vector<CandidateRecord> retimed,
                                               const std::optional<Retiming>& retiming);

// Whether EliteBySideBySide could order `elite` by cycles where time did not tell: some member's
// side-by-side figure carries its median cycles. Then kCyclesBreakTies says so to people.
bool CyclesBreakTies(const std::vector<CandidateRecord>& elite);
inline constexpr std::string_view kCyclesBreakTies =
    "the fewer SM cycles per call where those cannot tell two apart";

}  // namespace evo

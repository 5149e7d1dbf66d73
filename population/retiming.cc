#include "population/retiming.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "evaluator/percentile.h"
#include "population/store.h"

namespace evo {

std::set<int64_t> Retiming::Members() const {
  std::set<int64_t> members;
  for (const RetimingTiming& t : timings) members.insert(t.candidate_id);
  return members;
}

std::map<int64_t, double> Retiming::Medians() const {
  std::map<int64_t, std::vector<double>> samples;
  for (const RetimingTiming& t : timings) samples[t.candidate_id].push_back(t.timing.median_us);
  std::map<int64_t, double> medians;
  for (auto& [candidate, values] : samples) {
    std::sort(values.begin(), values.end());
    medians[candidate] = Percentile(values, 0.5);
  }
  return medians;
}

std::map<int64_t, int> Retiming::Counts() const {
  std::map<int64_t, int> counts;
  for (const RetimingTiming& t : timings) ++counts[t.candidate_id];
  return counts;
}

std::map<int64_t, double> Retiming::MedianCycles() const {
  std::map<int64_t, std::vector<double>> samples;
  std::set<int64_t> without_clock;
  for (const RetimingTiming& t : timings) {
    const std::optional<double> cycles = t.timing.median_cycles();
    if (cycles) {
      samples[t.candidate_id].push_back(*cycles);
    } else {
      without_clock.insert(t.candidate_id);
    }
  }
  std::map<int64_t, double> medians;
  for (auto& [candidate, values] : samples) {
    if (without_clock.count(candidate) != 0) continue;
    std::sort(values.begin(), values.end());
    medians[candidate] = Percentile(values, 0.5);
  }
  return medians;
}

bool Retiming::ClearlySlower(int64_t challenger, int64_t leader) const {
  std::map<int, double> leader_by_round;
  std::vector<double> leader_times;
  std::vector<double> challenger_times;
  for (const RetimingTiming& t : timings) {
    if (t.candidate_id == challenger) challenger_times.push_back(t.timing.median_us);
    if (t.candidate_id != leader) continue;
    leader_by_round[t.round] = t.timing.median_us;
    leader_times.push_back(t.timing.median_us);
  }
  if (leader_times.empty() || challenger_times.empty()) return false;
  std::sort(challenger_times.begin(), challenger_times.end());
  const double challenger_median = Percentile(challenger_times, 0.5);
  // The leader's own scatter: the median of its timings' distances from their median.
  std::sort(leader_times.begin(), leader_times.end());
  const double leader_median = Percentile(leader_times, 0.5);
  std::vector<double> deviations;
  for (double us : leader_times) deviations.push_back(std::abs(us - leader_median));
  std::sort(deviations.begin(), deviations.end());
  if (challenger_median - leader_median > Percentile(deviations, 0.5)) return true;
  int paired = 0;
  for (const RetimingTiming& t : timings) {
    if (t.candidate_id != challenger) continue;
    const auto same_round = leader_by_round.find(t.round);
    if (same_round == leader_by_round.end()) continue;
    if (t.timing.median_us <= same_round->second) return false;
    ++paired;
  }
  return paired > 0;
}

std::vector<int64_t> RoundOrder(const std::vector<int64_t>& members, int round) {
  std::vector<int64_t> order = members;
  if (round % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

std::vector<CandidateRecord> SelectContenders(const std::vector<CandidateRecord>& candidates,
                                              int elite_size) {
  if (elite_size <= 0) return {};
  const size_t size = static_cast<size_t>(elite_size);
  const size_t extra = std::max<size_t>(size, 2);
  std::vector<CandidateRecord> ranked = SelectElite(candidates, static_cast<int>(size + extra));
  if (ranked.size() <= size) return ranked;
  const double bound = *ranked[size - 1].score_us() * (1 + kContenderMargin);
  size_t keep = size;
  while (keep < ranked.size() && *ranked[keep].score_us() <= bound) ++keep;
  ranked.resize(keep);

  // Of the rest, those with fewer cycles than a member of the score's elite, fewest first:
  // kernels that the GPU's clock, falling or rising between their timings and the elite's,
  // scored further behind than they are.
  double most_cycles = 0;
  for (size_t i = 0; i < size; ++i) {
    const std::optional<double> cycles = ranked[i].score_cycles();
    if (!cycles) return ranked;
    most_cycles = std::max(most_cycles, *cycles);
  }
  std::set<int64_t> chosen;
  for (const CandidateRecord& c : ranked) chosen.insert(c.id);
  // (cycles, id, candidate): fewest cycles first, ties by id.
  std::vector<std::tuple<double, int64_t, const CandidateRecord*>> by_cycles;
  for (const CandidateRecord& c : candidates) {
    const std::optional<double> cycles = c.score_cycles();
    if (cycles && *cycles < most_cycles && chosen.count(c.id) == 0) {
      by_cycles.emplace_back(*cycles, c.id, &c);
    }
  }
  if (by_cycles.empty()) return ranked;
  const size_t added = std::min(by_cycles.size(), size);
  std::partial_sort(by_cycles.begin(), by_cycles.begin() + static_cast<std::ptrdiff_t>(added),
                    by_cycles.end());
  for (size_t i = 0; i < added; ++i) ranked.push_back(*std::get<2>(by_cycles[i]));
  return SelectElite(ranked, static_cast<int>(ranked.size()));
}

std::vector<CandidateRecord> EliteBySideBySide(std::vector<CandidateRecord> elite,
                                               std::vector<CandidateRecord> retimed,
                                               const std::optional<Retiming>& retiming) {
  if (!retiming || elite.empty()) return elite;
  const std::set<int64_t> members = retiming->Members();
  std::set<int64_t> given;
  for (const CandidateRecord& c : retimed) given.insert(c.id);
  if (given != members) return elite;
  for (const CandidateRecord& c : elite) {
    if (members.count(c.id) == 0) return elite;
  }
  const std::map<int64_t, double> medians = retiming->Medians();
  const std::map<int64_t, double> cycles = retiming->MedianCycles();
  const std::map<int64_t, int> counts = retiming->Counts();
  for (CandidateRecord& c : retimed) {
    SideBySide figure;
    figure.retiming_id = retiming->id;
    figure.median_us = medians.at(c.id);
    const auto c_cycles = cycles.find(c.id);
    if (c_cycles != cycles.end()) figure.median_cycles = c_cycles->second;
    figure.timings = counts.at(c.id);
    figure.timed = static_cast<int>(members.size());
    figure.gpu = retiming->gpu;
    figure.finished_at = retiming->finished_at;
    c.side_by_side = figure;
  }
  // Stable: equal medians keep the score's order.
  std::stable_sort(retimed.begin(), retimed.end(),
                   [](const CandidateRecord& a, const CandidateRecord& b) {
                     return a.side_by_side->median_us < b.side_by_side->median_us;
                   });
  std::vector<CandidateRecord> ordered;
  while (ordered.size() < elite.size() && !retimed.empty()) {
    const CandidateRecord& fastest = retimed.front();
    size_t pick = 0;
    if (fastest.side_by_side->median_cycles) {
      const double fastest_us = fastest.side_by_side->median_us;
      const double fastest_cycles = *fastest.side_by_side->median_cycles;
      for (size_t i = 1; i < retimed.size(); ++i) {
        const std::optional<double>& other = retimed[i].side_by_side->median_cycles;
        // The cycles must say more than the time: a candidate behind by a larger fraction of
        // time than the fraction of cycles it saves ran at a lower clock through the re-timing,
        // and at the power limit that is the kernel's own doing (a busier kernel draws a lower
        // clock; one that leaves SMs idle, a higher), which a user's calls see too.
        if (other && *other < *retimed[pick].side_by_side->median_cycles &&
            !retiming->ClearlySlower(retimed[i].id, fastest.id) &&
            1 - *other / fastest_cycles > retimed[i].side_by_side->median_us / fastest_us - 1) {
          pick = i;
        }
      }
    }
    ordered.push_back(std::move(retimed[pick]));
    retimed.erase(retimed.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  return ordered;
}

bool CyclesBreakTies(const std::vector<CandidateRecord>& elite) {
  return std::any_of(elite.begin(), elite.end(), [](const CandidateRecord& c) {
    return c.side_by_side && c.side_by_side->median_cycles;
  });
}

}  // namespace evo

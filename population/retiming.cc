#include "population/retiming.h"

#include <algorithm>

#include "evaluator/percentile.h"

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

std::vector<int64_t> RoundOrder(const std::vector<int64_t>& members, int round) {
  std::vector<int64_t> order = members;
  if (round % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

std::vector<CandidateRecord> OrderBySideBySide(std::vector<CandidateRecord> elite,
                                               const std::optional<Retiming>& retiming) {
  if (!retiming || elite.empty()) return elite;
  std::set<int64_t> members;
  for (const CandidateRecord& c : elite) members.insert(c.id);
  if (members != retiming->Members()) return elite;
  const std::map<int64_t, double> medians = retiming->Medians();
  const std::map<int64_t, int> counts = retiming->Counts();
  for (CandidateRecord& c : elite) {
    SideBySide figure;
    figure.retiming_id = retiming->id;
    figure.median_us = medians.at(c.id);
    figure.timings = counts.at(c.id);
    figure.gpu = retiming->gpu;
    figure.finished_at = retiming->finished_at;
    c.side_by_side = figure;
  }
  // Stable: equal medians keep the score's order.
  std::stable_sort(elite.begin(), elite.end(),
                   [](const CandidateRecord& a, const CandidateRecord& b) {
                     return a.side_by_side->median_us < b.side_by_side->median_us;
                   });
  return elite;
}

}  // namespace evo

#include "population/retiming.h"

#include <algorithm>
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
  const std::map<int64_t, int> counts = retiming->Counts();
  for (CandidateRecord& c : retimed) {
    SideBySide figure;
    figure.retiming_id = retiming->id;
    figure.median_us = medians.at(c.id);
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
  retimed.resize(elite.size());
  return retimed;
}

}  // namespace evo

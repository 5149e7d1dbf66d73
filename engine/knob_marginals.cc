#include "engine/knob_marginals.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace evo {

KnobMarginals::KnobMarginals(const Manifest& manifest, const std::vector<CandidateRecord>& history,
                             const KnobMarginalOptions& options) {
  // Timed candidates fastest first, then the failures; ties keep the history's (id) order.
  std::vector<std::pair<double, const Genome*>> ranked;
  int timed = 0;
  for (const CandidateRecord& record : history) {
    if (record.state != CandidateState::kFinished || !record.outcome.reached_gates()) continue;
    const TimingFigures* timing = record.outcome.timing();
    const bool is_timed =
        timing != nullptr && timing->median_us > 0 && PassedCorrectness(record.outcome.status);
    ranked.emplace_back(is_timed ? timing->median_us : INFINITY, &record.proposal.genome);
    if (is_timed) ++timed;
  }
  if (timed == 0) return;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto all = static_cast<int>(ranked.size());
  good_ = std::min(
      timed, std::max(options.min_good,
                      static_cast<int>(std::ceil(options.good_share * static_cast<double>(all)))));
  others_ = all - good_;
  const double base_rate = static_cast<double>(good_) / static_cast<double>(all);

  for (const KnobSpec& knob : manifest.knobs) {
    std::map<int64_t, double> good_count;
    std::map<int64_t, double> count;
    for (int i = 0; i < all; ++i) {
      const Genome& genome = *ranked[static_cast<size_t>(i)].second;
      const auto it = genome.find(knob.name);
      if (it == genome.end()) continue;
      count[it->second] += 1;
      if (i < good_) good_count[it->second] += 1;
    }
    std::map<int64_t, double>& ratios = log_ratio_[knob.name];
    for (int64_t value : knob.values) {
      const double good_rate =
          (good_count[value] + options.prior * base_rate) / (count[value] + options.prior);
      ratios[value] = std::log(good_rate / base_rate);
    }
  }
}

double KnobMarginals::LogRatio(const std::string& knob, int64_t value) const {
  const auto ratios = log_ratio_.find(knob);
  if (ratios == log_ratio_.end()) return 0;
  const auto it = ratios->second.find(value);
  return it == ratios->second.end() ? 0 : it->second;
}

double KnobMarginals::LogRatio(const Genome& genome) const {
  double sum = 0;
  for (const auto& [knob, value] : genome) sum += LogRatio(knob, value);
  return sum;
}

}  // namespace evo

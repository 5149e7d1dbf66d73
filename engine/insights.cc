#include "engine/insights.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace evo {
namespace {

// A figure "rises" along a knob's domain when the fit says it grows by at least this share
// across the knob's observed values (enough to ignore a register or two), and the slope is at
// least kMinTValue standard errors.
constexpr double kRisingShare = 0.05;
constexpr double kMinTValue = 2;

// Rules 2 and 3 fire on resource trouble in at least this share of the finished candidates, or
// on any in the latest generation: the latest generation is what the next one is bred from.
constexpr double kTroubleShare = 0.10;
constexpr double kTroubleDown = 0.8;
constexpr double kTroubleWeight = 2;

// Per-SM limits of sm_80 and sm_90 for the occupancy estimate (other arches differ a little;
// the rule only needs to tell "a handful of warps" from "many").
constexpr int64_t kRegistersPerSm = 64 * 1024;
constexpr int64_t kRegisterAllocationUnit = 256;  // registers, per warp
constexpr int64_t kSmemPerSm = 228 * 1024;
constexpr int64_t kThreadsPerSm = 2048;
constexpr int64_t kCtasPerSm = 32;
constexpr int64_t kWarpSize = 32;
// Low occupancy: at most 8 resident warps per SM (1/8 of sm_90's 64). Registers alone leave
// that few only when a thread holds more than 128 of them (CTAs of 8 warps) to 170 (4 warps),
// so the rule fires for heavy kernels only, where fewer registers buy latency hiding.
constexpr int64_t kLowOccupancyWarps = 8;
constexpr size_t kBestForOccupancy = 3;
constexpr double kOccupancyDown = 0.65;
constexpr double kOccupancyWeight = 1.5;

// Rule 5: a value is avoided after this many failures on the GPU with no success.
constexpr int kAvoidAfterFailures = 2;

// Rule 6: a child counts as faster when its median is below its parent's by more than this
// share, a little above the performance gate's target spread, so noise does not steer.
constexpr double kFasterShare = 0.03;
constexpr double kMomentumToward = 0.75;
constexpr double kMomentumWeight = 1.5;

size_t DomainIndex(const KnobSpec& knob, int64_t value) {
  return static_cast<size_t>(std::find(knob.values.begin(), knob.values.end(), value) -
                             knob.values.begin());
}

std::optional<int64_t> KnobValue(const CandidateRecord& record, const std::string& knob) {
  const auto it = record.proposal.genome.find(knob);
  if (it == record.proposal.genome.end()) return std::nullopt;
  return it->second;
}

// The gate-3 median; both ends of a comparison are measured the same way.
std::optional<double> MedianUs(const CandidateRecord& record) {
  if (record.outcome.status != Status::kMeasured && record.outcome.status != Status::kSlow) {
    return std::nullopt;
  }
  const TimingFigures* timing = record.outcome.timing();
  if (timing == nullptr) return std::nullopt;
  return timing->median_us;
}

bool Contains(std::string_view text, std::string_view word) {
  const auto it =
      std::search(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) ==
               std::tolower(static_cast<unsigned char>(b));
      });
  return it != text.end();
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

// Solves `a x = b` by Gaussian elimination with partial pivoting; `a` is symmetric
// positive definite here, made so by the ridge term of the caller.
std::vector<double> Solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t col = 0; col < n; ++col) {
    size_t pivot = col;
    for (size_t row = col + 1; row < n; ++row) {
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    }
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (size_t row = col + 1; row < n; ++row) {
      const double factor = a[row][col] / a[col][col];
      for (size_t k = col; k < n; ++k) a[row][k] -= factor * a[col][k];
      b[row] -= factor * b[col];
    }
  }
  std::vector<double> x(n, 0);
  for (size_t col = n; col-- > 0;) {
    double sum = b[col];
    for (size_t k = col + 1; k < n; ++k) sum -= a[col][k] * x[k];
    x[col] = sum / a[col][col];
  }
  return x;
}

// Knobs along whose domain `figure` rises: a least-squares fit of the figure against every
// knob's position in its domain at once, so each knob's slope holds the others fixed. Plain
// means per value would not: the constraints tie knobs together (8 warps are valid only with
// large BLOCK_M), and a knob would be blamed for its companions' cost. The fit is of the
// figure's logarithm: resources multiply (registers per thread times threads, stages times
// tile size), and a product is a sum in logarithms, which a linear fit follows.
std::vector<std::string> RisingKnobs(const Manifest& manifest,
                                     const std::vector<const CandidateRecord*>& compiled,
                                     const std::function<double(const CandidateRecord&)>& figure) {
  // Positions of every knob of every record; records with a value outside a domain are skipped.
  std::vector<std::vector<double>> positions;
  std::vector<double> figures;
  for (const CandidateRecord* record : compiled) {
    std::vector<double> row;
    for (const KnobSpec& knob : manifest.knobs) {
      const std::optional<int64_t> value = KnobValue(*record, knob.name);
      const size_t index = value ? DomainIndex(knob, *value) : knob.values.size();
      if (index == knob.values.size()) break;
      row.push_back(static_cast<double>(index));
    }
    if (row.size() != manifest.knobs.size()) continue;
    positions.push_back(std::move(row));
    figures.push_back(std::log1p(std::max(0.0, figure(*record))));
  }
  std::vector<std::string> rising;
  if (figures.size() < 2) return rising;
  const auto n = static_cast<double>(figures.size());
  double mean_figure = 0;
  for (double f : figures) mean_figure += f / n;

  // The knobs seen at two or more positions, with their span and mean position.
  std::vector<size_t> fitted;
  std::vector<double> span;
  std::vector<double> mean_position;
  for (size_t k = 0; k < manifest.knobs.size(); ++k) {
    double low = positions[0][k];
    double high = low;
    double sum = 0;
    for (const std::vector<double>& row : positions) {
      low = std::min(low, row[k]);
      high = std::max(high, row[k]);
      sum += row[k];
    }
    if (high == low) continue;
    fitted.push_back(k);
    span.push_back(high - low);
    mean_position.push_back(sum / n);
  }
  if (fitted.empty()) return rising;

  const size_t p = fitted.size();
  std::vector<std::vector<double>> normal(p, std::vector<double>(p, 0));
  std::vector<double> moment(p, 0);
  for (size_t r = 0; r < figures.size(); ++r) {
    for (size_t i = 0; i < p; ++i) {
      const double xi = positions[r][fitted[i]] - mean_position[i];
      moment[i] += xi * (figures[r] - mean_figure);
      for (size_t j = 0; j < p; ++j)
        normal[i][j] += xi * (positions[r][fitted[j]] - mean_position[j]);
    }
  }
  // A small ridge keeps the fit defined when few candidates leave knobs collinear; it shares
  // an effect between knobs that always moved together instead of inventing opposite slopes.
  double trace = 0;
  for (size_t i = 0; i < p; ++i) trace += normal[i][i];
  for (size_t i = 0; i < p; ++i) normal[i][i] += 1e-3 * trace / static_cast<double>(p);
  const std::vector<double> slope = Solve(normal, moment);

  // Each slope must also stand out of the scatter the fit leaves (t >= 2), or a knob with no
  // effect at all would be blamed for whatever the linear fit cannot follow.
  const double dof = n - static_cast<double>(p) - 1;
  if (dof < 1) return rising;
  double residuals = 0;
  for (size_t r = 0; r < figures.size(); ++r) {
    double fitted_value = mean_figure;
    for (size_t i = 0; i < p; ++i)
      fitted_value += slope[i] * (positions[r][fitted[i]] - mean_position[i]);
    residuals += (figures[r] - fitted_value) * (figures[r] - fitted_value);
  }
  const double scatter = residuals / dof;
  for (size_t i = 0; i < p; ++i) {
    if (slope[i] * span[i] < std::log1p(kRisingShare)) continue;
    std::vector<double> unit(p, 0);
    unit[i] = 1;
    const double variance = scatter * Solve(normal, unit)[i];
    if (variance > 0 && slope[i] < kMinTValue * std::sqrt(variance)) continue;
    rising.push_back(manifest.knobs[fitted[i]].name);
  }
  return rising;
}

// Moves `knobs` toward the start of their domains with at least this chance and weight.
void PushDown(const std::vector<std::string>& knobs, double down, double weight,
              Insights& insights) {
  for (const std::string& name : knobs) {
    KnobBias& bias = insights.knobs[name];
    bias.down = std::max(bias.down, down);
    bias.weight = std::max(bias.weight, weight);
  }
}

// "in 3 of 20 candidates (1 in generation 4)"
std::string TroubleCounts(int total, int finished, int latest, int latest_generation) {
  std::string text =
      "in " + std::to_string(total) + " of " + std::to_string(finished) + " candidates";
  if (latest > 0) {
    text +=
        " (" + std::to_string(latest) + " in generation " + std::to_string(latest_generation) + ")";
  }
  return text;
}

std::string RuleEffect(const std::vector<std::string>& knobs, std::string_view figure) {
  if (knobs.empty()) return "no knob is seen to cost " + std::string(figure) + " yet";
  return "lower " + JoinNames(knobs);
}

struct Occupancy {
  int64_t warps = 0;
  bool register_limited = false;
};

Occupancy EstimateOccupancy(const CandidateOutcome& outcome) {
  const int64_t threads = std::max<int64_t>(outcome.threads_per_block, 1);
  const int64_t warps_per_cta = (threads + kWarpSize - 1) / kWarpSize;
  const int64_t registers_per_warp =
      (outcome.resources->registers * kWarpSize + kRegisterAllocationUnit - 1) /
      kRegisterAllocationUnit * kRegisterAllocationUnit;
  const int64_t by_registers =
      registers_per_warp > 0 ? kRegistersPerSm / (registers_per_warp * warps_per_cta) : kCtasPerSm;
  const int64_t smem = outcome.resources->smem_static + outcome.dynamic_smem;
  const int64_t by_smem = smem > 0 ? kSmemPerSm / smem : kCtasPerSm;
  const int64_t by_threads = kThreadsPerSm / threads;
  const int64_t ctas = std::min({by_registers, by_smem, by_threads, kCtasPerSm});
  // Registers limit only when fewer of them would fit more CTAs: strictly below the others.
  return {ctas * warps_per_cta, by_registers < std::min({by_smem, by_threads, kCtasPerSm})};
}

}  // namespace

Insights DeriveInsights(const Manifest& manifest, const std::vector<CandidateRecord>& history) {
  Insights insights;
  for (const KnobSpec& knob : manifest.knobs) insights.knobs[knob.name] = KnobBias{};

  std::vector<const CandidateRecord*> finished;
  std::vector<const CandidateRecord*> compiled;
  int latest_generation = -1;
  for (const CandidateRecord& record : history) {
    if (record.state != CandidateState::kFinished) continue;
    finished.push_back(&record);
    if (record.outcome.resources) compiled.push_back(&record);
    latest_generation = std::max(latest_generation, record.generation);
  }
  if (finished.empty()) return insights;

  // Rule 1, the costs the other rules act on.
  const std::vector<std::string> cost_registers =
      RisingKnobs(manifest, compiled, [](const CandidateRecord& record) {
        return static_cast<double>(record.outcome.resources->registers);
      });
  const std::vector<std::string> cost_registers_per_cta =
      RisingKnobs(manifest, compiled, [](const CandidateRecord& record) {
        return static_cast<double>(record.outcome.resources->registers) *
               static_cast<double>(std::max<int64_t>(record.outcome.threads_per_block, 1));
      });
  const std::vector<std::string> cost_smem =
      RisingKnobs(manifest, compiled, [](const CandidateRecord& record) {
        return static_cast<double>(record.outcome.resources->smem_static +
                                   record.outcome.dynamic_smem);
      });

  const int finished_count = static_cast<int>(finished.size());
  auto trouble_fires = [&](int total, int latest) {
    return latest > 0 || (total > 0 && total >= kTroubleShare * finished_count);
  };

  // Rule 2: spills, or registers over the limit (the compile gate's reasons name registers).
  int spills = 0;
  int spills_latest = 0;
  for (const CandidateRecord* record : finished) {
    const CandidateOutcome& outcome = record->outcome;
    const bool spilled = outcome.resources && outcome.resources->spills();
    const bool register_reject =
        outcome.status == Status::kResourceReject && Contains(outcome.reason, "register");
    if (!spilled && !register_reject) continue;
    ++spills;
    if (record->generation == latest_generation) ++spills_latest;
  }
  if (trouble_fires(spills, spills_latest)) {
    PushDown(cost_registers, kTroubleDown, kTroubleWeight, insights);
    insights.fired.push_back(
        "spills or registers over the limit " +
        TroubleCounts(spills, finished_count, spills_latest, latest_generation) + ": " +
        RuleEffect(cost_registers, "registers"));
  }

  // Rule 3: shared memory over the budget, from the compile gate or a constraint about it.
  int smem_over = 0;
  int smem_over_latest = 0;
  for (const CandidateRecord* record : finished) {
    const CandidateOutcome& outcome = record->outcome;
    const bool mentions_smem =
        Contains(outcome.reason, "shared memory") || Contains(outcome.reason, "smem");
    if (!mentions_smem ||
        (outcome.status != Status::kResourceReject && outcome.status != Status::kInvalid)) {
      continue;
    }
    ++smem_over;
    if (record->generation == latest_generation) ++smem_over_latest;
  }
  if (trouble_fires(smem_over, smem_over_latest)) {
    PushDown(cost_smem, kTroubleDown, kTroubleWeight, insights);
    insights.fired.push_back(
        "shared memory over the budget " +
        TroubleCounts(smem_over, finished_count, smem_over_latest, latest_generation) + ": " +
        RuleEffect(cost_smem, "shared memory"));
  }

  // Rule 4: the best measured candidates all hold few warps per SM, for lack of registers.
  std::vector<std::pair<double, const CandidateRecord*>> measured;
  for (const CandidateRecord* record : compiled) {
    if (record->outcome.status != Status::kMeasured) continue;
    if (const std::optional<double> median = MedianUs(*record)) {
      measured.emplace_back(*median, record);
    }
  }
  std::stable_sort(measured.begin(), measured.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  measured.resize(std::min(measured.size(), kBestForOccupancy));
  if (!measured.empty()) {
    int64_t most_warps = 0;
    bool all_register_limited = true;
    for (const auto& [median, record] : measured) {
      const Occupancy occupancy = EstimateOccupancy(record->outcome);
      most_warps = std::max(most_warps, occupancy.warps);
      all_register_limited = all_register_limited && occupancy.register_limited;
    }
    if (most_warps <= kLowOccupancyWarps && all_register_limited) {
      PushDown(cost_registers_per_cta, kOccupancyDown, kOccupancyWeight, insights);
      insights.fired.push_back("low occupancy of the best " + std::to_string(measured.size()) +
                               " (at most " + std::to_string(most_warps) +
                               " warps per SM, limited by registers): " +
                               RuleEffect(cost_registers_per_cta, "registers per CTA"));
    }
  }

  // Rule 5: values that failed on the GPU again and again and never ran correctly.
  for (const KnobSpec& knob : manifest.knobs) {
    for (int64_t value : knob.values) {
      int failed = 0;
      int ran = 0;
      for (const CandidateRecord* record : finished) {
        if (KnobValue(*record, knob.name) != value) continue;
        const Status status = record->outcome.status;
        if (status == Status::kRuntimeError || status == Status::kTimeout ||
            status == Status::kIncorrect) {
          ++failed;
        } else if (status == Status::kMeasured || status == Status::kSlow) {
          ++ran;
        }
      }
      if (failed < kAvoidAfterFailures || ran > 0) continue;
      insights.knobs[knob.name].avoid.push_back(value);
      insights.fired.push_back("avoid " + knob.name + "=" + std::to_string(value) + ": " +
                               std::to_string(failed) +
                               " candidates failed (runtime error, timeout or incorrect), none "
                               "ran correctly");
    }
  }

  // Rule 6: single-knob children faster than their parents. Read from the genomes, not the
  // operator's name, so that repaired or hand-made children count too.
  std::map<int64_t, const CandidateRecord*> by_id;
  for (const CandidateRecord* record : finished) by_id[record->id] = record;
  std::map<std::string, std::pair<int, int>, std::less<>> faster;  // knob -> (up, down)
  for (const CandidateRecord* child : finished) {
    const Proposal& proposal = child->proposal;
    if (!proposal.parent1 || proposal.parent2) continue;
    const auto parent_it = by_id.find(*proposal.parent1);
    if (parent_it == by_id.end()) continue;
    const CandidateRecord& parent = *parent_it->second;
    const std::optional<double> child_us = MedianUs(*child);
    const std::optional<double> parent_us = MedianUs(parent);
    if (!child_us || !parent_us || *child_us >= *parent_us * (1 - kFasterShare)) continue;
    const KnobSpec* changed = nullptr;
    int changes = 0;
    for (const KnobSpec& knob : manifest.knobs) {
      if (KnobValue(*child, knob.name) == KnobValue(parent, knob.name)) continue;
      changed = &knob;
      ++changes;
    }
    if (changes != 1) continue;
    const std::optional<int64_t> from = KnobValue(parent, changed->name);
    const std::optional<int64_t> to = KnobValue(*child, changed->name);
    if (!from || !to) continue;
    auto& [up, down] = faster[changed->name];
    if (DomainIndex(*changed, *to) > DomainIndex(*changed, *from)) {
      ++up;
    } else {
      ++down;
    }
  }
  for (const auto& [name, counts] : faster) {
    const auto [up, down] = counts;
    if (up == down) continue;
    KnobBias& bias = insights.knobs[name];
    // Direct evidence of speed outweighs the resource rules' guesses, so momentum up overrides
    // their push down.
    bias.down =
        up > down ? std::min(bias.down, 1 - kMomentumToward) : std::max(bias.down, kMomentumToward);
    bias.weight = std::max(bias.weight, kMomentumWeight);
    const int n = std::max(up, down);
    insights.fired.push_back(name + (up > down ? " up" : " down") + " made " + std::to_string(n) +
                             (n == 1 ? " child" : " children") +
                             " faster than the parent by over 3%: keep moving " +
                             (up > down ? "up" : "down"));
  }
  return insights;
}

}  // namespace evo

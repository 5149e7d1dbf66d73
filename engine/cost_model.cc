#include "engine/cost_model.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "kernel_templates/configuration.h"

namespace evo {
namespace {

// The trees agree exactly wherever the data are thin in the same way for all of them; a floor
// under their spread keeps every unexplored configuration some chance of beating the best.
// In log units: 0.01 is a 1 % timing difference, the noise of one measurement.
constexpr double kMinSpread = 0.01;

// The time forest's spread is what the search reads as uncertainty, so its trees must disagree
// where the data are thin. Several features describe one resource (a knob, the bytes it
// costs, the share of the budget that is, the occupancy left), and a split that may look at
// most of them finds the same strongest one in every tree: the trees agree and are sure where
// nothing was measured. Half the features per split keeps them apart (regression forests
// commonly draw a third; on the search benchmark's recordings half needed fewer candidates than
// 0.8, see BENCHMARKS.md). The register forest is read for its mean only and keeps the default.
ForestOptions TimeForestOptions() {
  ForestOptions options;
  options.feature_share = 0.5;
  return options;
}

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

FeatureMap::FeatureMap(const SearchSpace& space) : space_(space) {
  for (const KnobSpec& knob : space.manifest().knobs) names_.push_back(knob.name);
  for (const DerivedSpec& derived : space.manifest().derived) names_.push_back(derived.name);
  threads_index_ = names_.size();
  names_.push_back("threads per block");
  names_.push_back("dynamic shared memory");
  for (auto& [name, budget] : BudgetConstraints(space.manifest())) {
    names_.push_back(name + " (share used)");
    budgets_.push_back(std::move(budget));
  }
}

std::vector<double> FeatureMap::Features(const Genome& genome) const {
  const Manifest& manifest = space_.manifest();
  std::vector<double> features;
  features.reserve(names_.size());
  for (const KnobSpec& knob : manifest.knobs) {
    const auto it = genome.find(knob.name);
    const auto position =
        it == genome.end()
            ? knob.values.size()
            : static_cast<size_t>(std::find(knob.values.begin(), knob.values.end(), it->second) -
                                  knob.values.begin());
    features.push_back(static_cast<double>(position));
  }
  Bindings bindings;
  try {
    bindings = CompileBindings(manifest, genome, space_.problem(), space_.arch());
  } catch (const std::exception&) {
    // A derived value that cannot be evaluated (a division by zero for this configuration)
    // leaves them all unknown; the knob positions still describe it.
  }
  for (const DerivedSpec& derived : manifest.derived) {
    const auto it = bindings.find(derived.name);
    features.push_back(it == bindings.end() ? -1.0 : static_cast<double>(it->second));
  }
  double threads = -1;
  double smem = -1;
  if (!manifest.kernels.empty() && !bindings.empty()) {
    const KernelSpec& kernel = manifest.main_kernel();
    try {
      threads = 1;
      for (const Expression& dim : kernel.block)
        threads *= static_cast<double>(dim.Evaluate(bindings));
    } catch (const std::exception&) {
      threads = -1;
    }
    try {
      smem = static_cast<double>(kernel.dynamic_smem.Evaluate(bindings));
    } catch (const std::exception&) {
      smem = -1;
    }
  }
  features.push_back(threads);
  features.push_back(smem);
  for (const Expression::UpperBound& budget : budgets_)
    features.push_back(BudgetShare(budget, bindings));
  return features;
}

std::vector<std::pair<std::string, Expression::UpperBound>> BudgetConstraints(
    const Manifest& manifest) {
  std::vector<std::pair<std::string, Expression::UpperBound>> budgets;
  for (const ConstraintSpec& constraint : manifest.constraints) {
    try {
      if (std::optional<Expression::UpperBound> bound = constraint.expr.AsUpperBound())
        budgets.emplace_back(constraint.name, std::move(*bound));
    } catch (const std::exception&) {
      // A side whose constant part cannot be computed: every configuration fails it alike, so
      // it tells configurations nothing.
    }
  }
  return budgets;
}

double BudgetShare(const Expression::UpperBound& budget, const Bindings& bindings) {
  if (bindings.empty()) return -1;
  try {
    const auto limit = static_cast<double>(budget.limit.Evaluate(bindings));
    if (limit <= 0) return -1;
    return static_cast<double>(budget.value.Evaluate(bindings)) / limit;
  } catch (const std::exception&) {
    return -1;
  }
}

double WarpsPerSm(double registers, double threads, double smem, double smem_per_sm) {
  constexpr double kRegistersPerSm = 64 * 1024;
  constexpr double kRegisterUnit = 256;  // registers are allocated per warp in these units
  constexpr double kThreadsPerSm = 2048;
  constexpr double kBlocksPerSm = 32;
  // A thread holds at most 255 registers: what it asks for past that is spilled, not allocated.
  constexpr double kMaxRegistersPerThread = 255;
  if (threads <= 0) return -1;
  const double warps = std::ceil(threads / 32);
  const double allocated = std::clamp(registers, 1.0, kMaxRegistersPerThread);
  const double per_warp = std::ceil(allocated * 32 / kRegisterUnit) * kRegisterUnit;
  const double by_registers = std::floor(kRegistersPerSm / (per_warp * warps));
  const double by_smem = smem > 0 ? std::floor(smem_per_sm / smem) : kBlocksPerSm;
  const double by_threads = std::floor(kThreadsPerSm / threads);
  return std::min({by_registers, by_smem, by_threads, kBlocksPerSm}) * warps;
}

double RegisterDemand(const KernelResources& resources) {
  return static_cast<double>(resources.registers) + static_cast<double>(resources.spill_stores) / 4;
}

std::vector<double> CostModel::Extend(std::vector<double> features, double register_demand) const {
  const double threads = features[features_.threads_index()];
  const double smem = features[features_.smem_index()];
  // The SM's shared memory: the opt-in limit per block and the 1 KiB the system reserves.
  const double smem_per_sm =
      static_cast<double>(features_.space().arch().max_smem_per_block_optin) + 1024;
  features.push_back(register_demand);
  features.push_back(register_demand > 0 ? WarpsPerSm(register_demand, threads, smem, smem_per_sm)
                                         : -1);
  return features;
}

double CostModel::LearnedDemand(const std::vector<double>& features) const {
  return register_demand_.empty() ? -1 : register_demand_.Predict(features).mean;
}

void CostModel::Fit(const std::vector<CandidateRecord>& history, Random& random) {
  std::vector<const CandidateRecord*> finished;
  std::vector<std::vector<double>> base;
  std::vector<std::vector<double>> compiled_rows;
  std::vector<double> demand;
  for (const CandidateRecord& record : history) {
    if (record.state != CandidateState::kFinished || !record.outcome.reached_gates()) continue;
    finished.push_back(&record);
    base.push_back(features_.Features(record.proposal.genome));
    if (record.outcome.resources) {
      compiled_rows.push_back(base.back());
      demand.push_back(RegisterDemand(*record.outcome.resources));
    }
  }
  // Learned as demand, not as ptxas's count: capped at 255, the count is the same for the fastest
  // kernels and for those spilling hundreds of bytes (sdpa_fp8: 250 against 255 with 300 bytes
  // spilled), and the model proposed flag variants of a spilling tile one after another.
  register_demand_.Fit(compiled_rows, demand, random);

  // Failed candidates enter the time model at the slowest time measured: a configuration that
  // cannot run is worth no more than the worst one that can, and its neighbourhood is where the
  // next failures are. Kept out, failures would leave their region unknown, and the trees'
  // disagreement there would draw the search into it.
  std::vector<std::vector<double>> rows;
  std::vector<double> log_us;
  std::vector<size_t> failed_rows;
  timed_ = 0;
  failed_ = 0;
  best_log_us_.reset();
  double worst = 0;
  for (size_t i = 0; i < finished.size(); ++i) {
    const CandidateRecord& record = *finished[i];
    // The learned figure, also where the compile gate's is known: the time model must read
    // the registers it will be given for configurations not compiled yet. Trained on the exact
    // ones, it split at "255 registers: failed" where the learned figure, an average of
    // neighbours, says 240 for the same configuration.
    const double learned = LearnedDemand(base[i]);
    rows.push_back(Extend(std::move(base[i]), learned));
    const TimingFigures* timing = record.outcome.timing();
    // A slow candidate was timed too: how slow it is teaches the model as much as a fast one.
    const bool timed =
        timing != nullptr && timing->median_us > 0 && PassedCorrectness(record.outcome.status);
    if (timed) {
      const double value = std::log(timing->median_us);
      log_us.push_back(value);
      best_log_us_ = best_log_us_ ? std::min(*best_log_us_, value) : value;
      worst = timed_ == 0 ? value : std::max(worst, value);
      ++timed_;
    } else {
      log_us.push_back(0);  // set below, once the slowest is known
      failed_rows.push_back(i);
      ++failed_;
    }
  }
  if (timed_ == 0) {
    time_ = RegressionForest();
    return;
  }
  for (size_t i : failed_rows) log_us[i] = worst;
  time_.Fit(rows, log_us, random, TimeForestOptions());
}

CostEstimate CostModel::Predict(const std::vector<double>& features) const {
  CostEstimate estimate;
  estimate.register_demand = LearnedDemand(features);
  const RegressionForest::Prediction time =
      time_.Predict(Extend(features, estimate.register_demand));
  estimate.log_us = time.mean;
  estimate.spread = std::max(time.spread, kMinSpread);
  return estimate;
}

double CostModel::Acquisition(const CostEstimate& estimate) const {
  if (!best_log_us_) return 0;
  return LogExpectedImprovement(*best_log_us_ - estimate.log_us, estimate.spread);
}

double LogExpectedImprovement(double gain, double spread) {
  const double z = gain / spread;
  if (z > -8) {
    return std::log(std::max(spread * (z * NormalCdf(z) + NormalPdf(z)), 1e-300));
  }
  // Far below the best the direct form underflows; its expansion phi(z) / z^2 (1 - 3 / z^2)
  // keeps configurations ordered by how far below they are.
  return std::log(spread) - 0.5 * z * z - 0.5 * std::log(2 * M_PI) - 2 * std::log(-z) +
         std::log1p(-3 / (z * z));
}

}  // namespace evo

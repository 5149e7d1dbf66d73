#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/forest.h"
#include "engine/search_space.h"
#include "kernel_templates/expression.h"
#include "kernel_templates/manifest.h"
#include "population/candidate.h"

namespace evo {

// What the cost model reads of a configuration before it is compiled: each knob's position in
// its domain (domains are ordered, so a split "BLOCK_N <= 64" is a position threshold), the
// manifest's derived values for the task (threads, shared memory bytes, tile counts: what
// kernels' speeds follow, whatever the template), the main kernel's threads per block and
// dynamic shared memory, and the share of each of the manifest's budgets the configuration
// uses (BudgetConstraints). A value that cannot be evaluated for a configuration reads -1.
class FeatureMap {
 public:
  explicit FeatureMap(const SearchSpace& space);

  std::vector<double> Features(const Genome& genome) const;
  const std::vector<std::string>& names() const { return names_; }
  const SearchSpace& space() const { return space_; }

  // Where Features puts the main kernel's threads per block and dynamic shared memory bytes.
  size_t threads_index() const { return threads_index_; }
  size_t smem_index() const { return threads_index_ + 1; }

 private:
  const SearchSpace& space_;
  std::vector<std::string> names_;
  size_t threads_index_ = 0;
  std::vector<Expression::UpperBound> budgets_;
};

// The manifest's constraints that hold one quantity under a bound ("SMEM_BYTES <=
// MAX_SMEM_PER_BLOCK", "(BLOCK_M / NUM_WARPS / 16) * (D + BLOCK_N) / 2 <= 192"), with their
// names: resource budgets. How much of a budget a configuration uses says more about its speed
// and its chance to compile and run than the knobs that make it up: the fast kernels sit near
// the register and shared-memory limits, the failures just past what the manifest's estimates
// allow, and the knobs reach either only in combination, which trees learn through many splits.
// Divisibility rules, implications and conjunctions are not budgets and are left out.
std::vector<std::pair<std::string, Expression::UpperBound>> BudgetConstraints(
    const Manifest& manifest);

// `used / limit` for these bindings: the share of the budget a configuration takes; -1 where
// either side cannot be evaluated or the limit is not positive.
double BudgetShare(const Expression::UpperBound& budget, const Bindings& bindings);

// A forecast for one configuration.
struct CostEstimate {
  double log_us = 0;  // the forecast of log(median us)
  double spread = 0;  // the trees' disagreement about it, in the same units
  // Registers per thread the configuration asks for (learned): ptxas's figure plus the 4-byte
  // words it spills past the limit (RegisterDemand); -1 unknown.
  double register_demand = 0;
};

// Registers per thread a compiled kernel asks for: ptxas's count, plus a register for each 4
// bytes it spills. ptxas stops at 255 and spills the rest, so a kernel that just fits and one far
// past the limit both report 255; their spills tell them apart.
double RegisterDemand(const KernelResources& resources);

// A model of the run's landscape, learned from its finished candidates in two stages. First a
// regression forest learns the register demand per thread from every compiled candidate (ptxas
// reports registers and spills for resource rejects too); with the threads and shared memory a
// configuration asks for, it gives its occupancy (warps per SM), which knob positions alone
// express only through many splits. Then a forest learns log time over the features plus register
// demand and occupancy (the learned ones everywhere, so that it reads what it will be given for the
// unexplored) from the timed candidates (measured and slow) and the failed ones (compile errors,
// resource rejects, runtime errors, timeouts, wrong results), which count as slow as the slowest
// timed one. The search ranks unexplored configurations by expected improvement over the best log
// time so far and measures only the most promising.
class CostModel {
 public:
  explicit CostModel(const FeatureMap& features) : features_(features) {}

  // Fits the forests on `history`'s finished candidates (pending ones are skipped). Nothing
  // is learned of time before a candidate was timed.
  void Fit(const std::vector<CandidateRecord>& history, Random& random);

  // `features`: FeatureMap::Features of the configuration.
  CostEstimate Predict(const std::vector<double>& features) const;
  CostEstimate Predict(const Genome& genome) const { return Predict(features_.Features(genome)); }

  // The logarithm of the expected improvement of `estimate` over the best measured log time
  // (how much a measurement of it is expected to lower the best, in log units): in logarithms
  // because far from the best the improvement is too small for a double, and those
  // configurations must still be ordered. 0 for all before anything was timed.
  double Acquisition(const CostEstimate& estimate) const;

  int timed() const { return timed_; }
  int failed() const { return failed_; }
  std::optional<double> best_log_us() const { return best_log_us_; }

 private:
  // `features` with the register demand and the occupancy it allows appended.
  std::vector<double> Extend(std::vector<double> features, double register_demand) const;
  // The register demand the first forest forecasts for `features`; -1 before it learned any.
  double LearnedDemand(const std::vector<double>& features) const;

  const FeatureMap& features_;
  RegressionForest register_demand_;
  RegressionForest time_;
  int timed_ = 0;
  int failed_ = 0;
  std::optional<double> best_log_us_;
};

// log E[max(0, gain + spread * N(0, 1))]: the logarithm of the expected improvement over the
// best of a forecast `gain` better than it (negative: worse) with this spread, finite however
// far below the best the forecast is.
double LogExpectedImprovement(double gain, double spread);

// Resident warps per SM of a kernel with these registers per thread (a demand past the 255 a
// thread can hold counts as 255: the rest is spilled), threads per block and shared memory per
// block (bytes), on sm_80/sm_90-like SMs: 64 K registers in units of 256 per warp,
// `smem_per_sm` bytes, 2048 threads, 32 blocks.
double WarpsPerSm(double registers, double threads, double smem, double smem_per_sm);

}  // namespace evo

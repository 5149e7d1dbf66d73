#include "engine/cost_model.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "engine/forest.h"
#include "tests/sdpa_variants.h"

namespace evo {
namespace {

// Share of the pairs (a, b) with different truths that `predicted` orders as `truth` does:
// 0.5 is chance, 1 a perfect ranking.
double Concordance(const std::vector<double>& predicted, const std::vector<double>& truth) {
  double agree = 0;
  double pairs = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    for (size_t j = i + 1; j < truth.size(); ++j) {
      if (truth[i] == truth[j]) continue;
      pairs += 1;
      const double p = (predicted[i] - predicted[j]) * (truth[i] - truth[j]);
      agree += p > 0 ? 1.0 : (p == 0 ? 0.5 : 0.0);
    }
  }
  return pairs > 0 ? agree / pairs : 0.5;
}

// Rows of three integer features in [0, 5], and a target with a step, a curve and an
// interaction, as kernel timings have (a tile size past which it is slower, an optimum in
// between, and one knob that matters only with another).
void SyntheticRows(Random& random, size_t n, std::vector<std::vector<double>>& rows,
                   std::vector<double>& targets) {
  for (size_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(random.Below(6));
    const double b = static_cast<double>(random.Below(6));
    const double c = static_cast<double>(random.Below(6));
    rows.push_back({a, b, c});
    targets.push_back(3.0 * (a > 2 ? 1 : 0) + (b - 2) * (b - 2) + (c > 3 && a < 2 ? 2.5 : 0));
  }
}

TEST_CASE("a regression forest ranks unseen rows of a synthetic function far above chance",
          "[engine][model]") {
  Random random(1);
  std::vector<std::vector<double>> rows;
  std::vector<double> targets;
  SyntheticRows(random, 120, rows, targets);
  std::vector<std::vector<double>> test_rows;
  std::vector<double> test_targets;
  SyntheticRows(random, 200, test_rows, test_targets);

  RegressionForest forest;
  Random fit(7);
  forest.Fit(rows, targets, fit);
  std::vector<double> predicted;
  for (const auto& row : test_rows) predicted.push_back(forest.Predict(row).mean);
  CHECK(Concordance(predicted, test_targets) > 0.9);

  // Trained on targets shuffled against their rows, it can only guess.
  std::vector<double> shuffled = targets;
  for (size_t i = shuffled.size(); i > 1; --i) {
    std::swap(shuffled[i - 1],
              shuffled[static_cast<size_t>(random.Below(static_cast<int64_t>(i)))]);
  }
  RegressionForest blind;
  Random fit_blind(7);
  blind.Fit(rows, shuffled, fit_blind);
  std::vector<double> guessed;
  for (const auto& row : test_rows) guessed.push_back(blind.Predict(row).mean);
  CHECK(Concordance(guessed, test_targets) < 0.7);
}

TEST_CASE("a regression forest is reproducible from its random stream", "[engine][model]") {
  Random random(3);
  std::vector<std::vector<double>> rows;
  std::vector<double> targets;
  SyntheticRows(random, 60, rows, targets);
  const auto fit = [&](uint64_t seed) {
    RegressionForest forest;
    Random stream(seed);
    forest.Fit(rows, targets, stream);
    std::vector<double> out;
    for (double a = 0; a < 6; ++a) {
      for (double b = 0; b < 6; ++b) {
        const RegressionForest::Prediction p = forest.Predict({a, b, 4});
        out.push_back(p.mean);
        out.push_back(p.spread);
      }
    }
    return out;
  };
  CHECK(fit(11) == fit(11));
  CHECK(fit(11) != fit(12));
}

TEST_CASE("a forest of constant targets predicts the constant with no spread; an empty one zero",
          "[engine][model]") {
  RegressionForest forest;
  Random random(5);
  forest.Fit({{1, 2}, {3, 4}, {5, 6}, {7, 8}}, {2.5, 2.5, 2.5, 2.5}, random);
  const RegressionForest::Prediction p = forest.Predict({4, 4});
  CHECK(p.mean == Approx(2.5));
  CHECK(p.spread == Approx(0).margin(1e-12));

  RegressionForest empty;
  empty.Fit({}, {}, random);
  CHECK(empty.empty());
  CHECK(empty.Predict({1, 2}).mean == 0);
  CHECK(empty.Predict({1, 2}).spread == 0);
}

TEST_CASE("the spread of the trees grows where the data disagree", "[engine][model]") {
  // Noisy targets at x >= 5, exact ones below.
  std::vector<std::vector<double>> rows;
  std::vector<double> targets;
  Random noise(9);
  for (int i = 0; i < 80; ++i) {
    const double x = i % 10;
    rows.push_back({x});
    targets.push_back(x < 5 ? 1.0 : 1.0 + 4 * noise.Unit());
  }
  RegressionForest forest;
  Random random(2);
  forest.Fit(rows, targets, random);
  CHECK(forest.Predict({7}).spread > 5 * forest.Predict({2}).spread);
}

TEST_CASE("expected improvement: its logarithm is exact near the best and finite far below it",
          "[engine][model]") {
  const auto direct = [](double gain, double spread) {
    const double z = gain / spread;
    const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
    return spread * (z * cdf + pdf);
  };
  for (double gain : {0.3, 0.05, 0.0, -0.02, -0.1, -0.3}) {
    INFO("gain " << gain);
    CHECK(LogExpectedImprovement(gain, 0.1) == Approx(std::log(direct(gain, 0.1))).epsilon(1e-9));
  }
  // Either side of the switch to the expansion (z = -8): continuous, ordered; far below, finite.
  const double just_above = LogExpectedImprovement(-0.79999, 0.1);
  const double just_below = LogExpectedImprovement(-0.80001, 0.1);
  CHECK(just_above > just_below);
  CHECK(just_above - just_below < 0.01);
  CHECK(std::isfinite(LogExpectedImprovement(-50, 0.01)));
  CHECK(LogExpectedImprovement(-50, 0.01) < LogExpectedImprovement(-40, 0.01));
  // More spread, more to hope for below the best.
  CHECK(LogExpectedImprovement(-0.2, 0.2) > LogExpectedImprovement(-0.2, 0.05));
}

TEST_CASE("warps per SM follow registers, threads and shared memory", "[engine][model]") {
  constexpr double kSmem = 228 * 1024;
  // 128 threads of 128 registers: 16 K registers per block, 4 blocks, 16 warps.
  CHECK(WarpsPerSm(128, 128, 0, kSmem) == 16);
  // 32 registers: threads limit, 2048 / 128 = 16 blocks of 4 warps.
  CHECK(WarpsPerSm(32, 128, 0, kSmem) == 64);
  // 100 KiB of shared memory per block: 2 blocks.
  CHECK(WarpsPerSm(32, 128, 100 * 1024, kSmem) == 8);
  // 255 registers round up to 256 per thread: 8 K per warp, 8 warps at most.
  CHECK(WarpsPerSm(255, 256, 0, kSmem) == 8);
  CHECK(WarpsPerSm(255, -1, 0, kSmem) == -1);
  // A demand past 255 is spilled: the thread still holds 255.
  CHECK(WarpsPerSm(400, 256, 0, kSmem) == 8);
}

TEST_CASE(
    "the feature map holds knob positions, derived values, threads, shared memory and budgets",
    "[engine][model]") {
  const FeatureMap features(test::SdpaSpaceWithoutSplitKnobs());
  const Manifest& manifest = test::SdpaSpaceWithoutSplitKnobs().manifest();
  const std::vector<std::string>& names = features.names();
  // sdpa_fp16's budgets: smem_fits_block, accumulators_fit_registers, splits_have_keys.
  REQUIRE(names.size() == manifest.knobs.size() + manifest.derived.size() + 2 + 3);
  CHECK(names.front() == "BLOCK_M");
  const Genome genome = DefaultGenome(manifest);  // BLOCK_M=64 NUM_WARPS=4 ... at D=64
  const std::vector<double> row = features.Features(genome);
  REQUIRE(row.size() == names.size());
  CHECK(row[0] == 2);  // 64 is the third value of BLOCK_M's domain
  const auto at = [&](const std::string& name) {
    return row[static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin())];
  };
  CHECK(at("THREADS") == 128);
  CHECK(row[features.threads_index()] == 128);
  // Q tile plus two stages of K and V, fp16.
  CHECK(row[features.smem_index()] == (64 * 64 + 2 * 2 * 64 * 64) * 2);
  // The share of each budget used: of the opt-in shared memory, of the 192 accumulator
  // registers ((64 / 4 / 16) * (64 + 64) / 2 = 64), and one split of the KV tiles.
  CHECK(at("smem_fits_block (share used)") ==
        Approx((64 * 64 + 2 * 2 * 64 * 64) * 2.0 /
               static_cast<double>(ArchByName("sm_90").max_smem_per_block_optin)));
  CHECK(at("accumulators_fit_registers (share used)") == Approx(64.0 / 192));
  CHECK(at("splits_have_keys (share used)") == Approx(1.0 / 8));  // 512 keys in tiles of 64
  CHECK(std::count(names.begin(), names.end(), "warp_rows_multiple_of_16 (share used)") == 0);
  CHECK(std::count(names.begin(), names.end(), "producer_needs_stages (share used)") == 0);
}

TEST_CASE("budgets are the constraints that hold a quantity under a bound", "[engine][model]") {
  Manifest manifest = test::SdpaSpaceWithoutSplitKnobs().manifest();
  const auto constraint = [](const char* name, const char* text) {
    return ConstraintSpec{name, Expression::Parse(text), ""};
  };
  manifest.constraints = {
      constraint("tile_budget", "X * Y <= 64"), constraint("reversed", "2 * D > X"),
      constraint("divides", "X % Y == 0"),      constraint("implication", "X == 0 || X * Y <= 64"),
      constraint("both", "X <= 64 && Y <= 8"),  constraint("cannot_fold", "X <= 1 / 0")};
  const auto budgets = BudgetConstraints(manifest);
  REQUIRE(budgets.size() == 2);
  CHECK(budgets[0].first == "tile_budget");
  CHECK(budgets[1].first == "reversed");

  const Expression::UpperBound& tile = budgets[0].second;
  CHECK(BudgetShare(tile, {{"X", 4}, {"Y", 8}}) == Approx(0.5));
  CHECK(BudgetShare(tile, {{"X", 8}, {"Y", 8}}) == Approx(1.0));
  CHECK(BudgetShare(budgets[1].second, {{"X", 32}, {"D", 64}}) == Approx(0.25));
  // Unknown: nothing bound, a name missing, a limit that is not positive.
  CHECK(BudgetShare(tile, {}) == -1);
  CHECK(BudgetShare(tile, {{"X", 4}}) == -1);
  CHECK(BudgetShare(budgets[1].second, {{"X", 4}, {"D", 0}}) == -1);
}

// A made-up landscape over sdpa_fp16's space: a time with one best configuration, a register
// demand that grows with rows per warp, tile width and stages, and, as ptxas does, at most 255
// registers with the rest spilled (a resource reject).
struct SyntheticKernel {
  double Time(const Genome& g) const {
    const auto position = [&](const std::string& knob) {
      return static_cast<double>(test::SdpaKnobPosition(knob, g));
    };
    const auto square = [](double x) { return x * x; };
    return 20 + 3 * square(position("BLOCK_M") - 3) + 2 * square(position("BLOCK_N") - 2) +
           2 * square(position("NUM_WARPS") - 2) + square(position("STAGES") - 2) +
           4.0 * static_cast<double>(1 - g.at("FAST_EXP")) +
           1.5 * static_cast<double>(g.at("PERSISTENT"));
  }
  int RegisterDemand(const Genome& g) const {
    return static_cast<int>(40 + g.at("BLOCK_M") / g.at("NUM_WARPS") * g.at("BLOCK_N") / 16 +
                            24 * g.at("STAGES"));
  }
  CandidateRecord Record(int64_t id, const Genome& genome) const {
    CandidateRecord record;
    record.id = id;
    record.proposal.genome = genome;
    record.state = CandidateState::kFinished;
    KernelResources resources;
    resources.registers = std::min(255, RegisterDemand(genome));
    resources.spill_stores = 4 * std::max(0, RegisterDemand(genome) - 255);
    record.outcome.resources = resources;
    if (resources.spills()) {
      record.outcome.status = Status::kResourceReject;
      record.outcome.reason = "spills registers";
    } else {
      record.outcome.status = Status::kMeasured;
      record.outcome.gpu = GpuVerdict{};
      record.outcome.gpu->timing = TimingFigures{};
      record.outcome.gpu->timing->median_us = Time(genome);
    }
    return record;
  }
};

TEST_CASE("the cost model learns a synthetic landscape: times, register demand and failures",
          "[engine][model]") {
  const SyntheticKernel kernel;
  const std::vector<Genome> all = test::SdpaSpaceWithoutSplitKnobs().Enumerate();
  REQUIRE(all.size() > 500);
  // 150 configurations drawn at random are the history; the rest are to be ranked.
  std::vector<Genome> order = all;
  Random random(21);
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[static_cast<size_t>(random.Below(static_cast<int64_t>(i)))]);
  }
  std::vector<CandidateRecord> history;
  constexpr size_t kHistory = 150;
  for (size_t i = 0; i < kHistory; ++i) {
    history.push_back(kernel.Record(static_cast<int64_t>(i) + 1, order[i]));
  }
  const FeatureMap features(test::SdpaSpaceWithoutSplitKnobs());
  CostModel model(features);
  model.Fit(history, random);
  CHECK(model.timed() + model.failed() == static_cast<int>(kHistory));
  CHECK(model.failed() > 0);

  std::vector<double> predicted_time;
  std::vector<double> true_time;
  std::vector<double> predicted_registers;
  std::vector<double> true_registers;
  // Of the configurations that spill, whose reported count is 255 for all.
  std::vector<double> predicted_spilling;
  std::vector<double> true_spilling;
  std::vector<std::pair<double, double>> by_forecast;  // (forecast, true time; failed: +inf)
  int failures = 0;
  int failures_predicted_slow = 0;
  double median_prediction = 0;
  {
    std::vector<double> all_predictions;
    for (size_t i = kHistory; i < order.size(); ++i)
      all_predictions.push_back(model.Predict(order[i]).log_us);
    std::nth_element(
        all_predictions.begin(),
        all_predictions.begin() + static_cast<std::ptrdiff_t>(all_predictions.size() / 2),
        all_predictions.end());
    median_prediction = all_predictions[all_predictions.size() / 2];
  }
  for (size_t i = kHistory; i < order.size(); ++i) {
    const CandidateRecord truth = kernel.Record(0, order[i]);
    const CostEstimate estimate = model.Predict(order[i]);
    predicted_registers.push_back(estimate.register_demand);
    true_registers.push_back(kernel.RegisterDemand(order[i]));
    if (kernel.RegisterDemand(order[i]) > 255) {
      predicted_spilling.push_back(estimate.register_demand);
      true_spilling.push_back(kernel.RegisterDemand(order[i]));
    }
    if (truth.outcome.status == Status::kMeasured) {
      predicted_time.push_back(estimate.log_us);
      true_time.push_back(truth.outcome.timing()->median_us);
      by_forecast.emplace_back(estimate.log_us, truth.outcome.timing()->median_us);
    } else {
      ++failures;
      // A failure teaches the model that its neighbourhood is slow (see CostModel).
      if (estimate.log_us > median_prediction) ++failures_predicted_slow;
      by_forecast.emplace_back(estimate.log_us, INFINITY);
    }
  }
  CHECK(Concordance(predicted_time, true_time) > 0.8);
  CHECK(Concordance(predicted_registers, true_registers) > 0.8);
  // The demand past 255 is learned from the spills: how far past the limit a configuration is.
  REQUIRE(predicted_spilling.size() > 10);
  CHECK(Concordance(predicted_spilling, true_spilling) > 0.8);
  REQUIRE(failures > 10);
  // Chance: half of them.
  CHECK(failures_predicted_slow * 3 > failures * 2);

  // The 20 configurations forecast fastest are far better than the average one (a failure
  // ranks last).
  std::stable_sort(by_forecast.begin(), by_forecast.end());
  std::vector<double> sorted_times = true_time;
  std::sort(sorted_times.begin(), sorted_times.end());
  double top_rank = 0;
  for (size_t i = 0; i < 20; ++i) {
    const double time = by_forecast[i].second;
    const auto rank =
        std::lower_bound(sorted_times.begin(), sorted_times.end(), time) - sorted_times.begin();
    top_rank += static_cast<double>(rank) / static_cast<double>(sorted_times.size()) / 20;
  }
  INFO("mean rank share of the 20 forecast fastest: " << top_rank);
  CHECK(top_rank < 0.1);  // chance: 0.5
}

}  // namespace
}  // namespace evo

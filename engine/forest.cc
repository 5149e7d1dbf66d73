#include "engine/forest.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace evo {
namespace {

// A split must lower the squared error by more than this share of the node's, so that trees
// stop on rounding noise instead of splitting equal targets apart.
constexpr double kMinGainShare = 1e-9;

}  // namespace

void RegressionForest::Fit(const std::vector<std::vector<double>>& rows,
                           const std::vector<double>& targets, Random& random,
                           const ForestOptions& options) {
  trees_.clear();
  const size_t n = rows.size();
  if (n == 0) return;
  trees_.reserve(static_cast<size_t>(options.trees));
  std::vector<size_t> indices(n);
  for (int t = 0; t < options.trees; ++t) {
    // A bootstrap sample: n rows drawn with replacement.
    for (size_t& index : indices)
      index = static_cast<size_t>(random.Below(static_cast<int64_t>(n)));
    Tree tree;
    Grow(rows, targets, indices, 0, n, 0, random, options, tree);
    trees_.push_back(std::move(tree));
  }
}

int32_t RegressionForest::Grow(const std::vector<std::vector<double>>& rows,
                               const std::vector<double>& targets, std::vector<size_t>& indices,
                               size_t begin, size_t end, int depth, Random& random,
                               const ForestOptions& options, Tree& tree) {
  const auto node_index = static_cast<int32_t>(tree.size());
  tree.emplace_back();
  const size_t count = end - begin;
  double sum = 0;
  double sum_squares = 0;
  for (size_t i = begin; i < end; ++i) {
    sum += targets[indices[i]];
    sum_squares += targets[indices[i]] * targets[indices[i]];
  }
  const double mean = sum / static_cast<double>(count);
  tree[static_cast<size_t>(node_index)].value = mean;
  const double node_error = sum_squares - sum * mean;
  const auto min_leaf = static_cast<size_t>(std::max(1, options.min_leaf));
  if (depth >= options.max_depth || count < 2 * min_leaf || node_error <= 0) return node_index;

  // The features this node may split on: a random subset, drawn by a partial shuffle.
  const size_t features = rows[indices[begin]].size();
  std::vector<size_t> order(features);
  std::iota(order.begin(), order.end(), 0);
  const auto tried = static_cast<size_t>(std::clamp(
      static_cast<int64_t>(std::ceil(options.feature_share * static_cast<double>(features))),
      int64_t{1}, static_cast<int64_t>(features)));
  for (size_t i = 0; i < tried; ++i) {
    const auto j = i + static_cast<size_t>(random.Below(static_cast<int64_t>(features - i)));
    std::swap(order[i], order[j]);
  }

  int best_feature = -1;
  double best_threshold = 0;
  double best_error = node_error * (1 - kMinGainShare);
  std::vector<size_t> sorted(indices.begin() + static_cast<std::ptrdiff_t>(begin),
                             indices.begin() + static_cast<std::ptrdiff_t>(end));
  for (size_t f = 0; f < tried; ++f) {
    const size_t feature = order[f];
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](size_t a, size_t b) { return rows[a][feature] < rows[b][feature]; });
    double left_sum = 0;
    double left_squares = 0;
    for (size_t i = 0; i + 1 < count; ++i) {
      const double y = targets[sorted[i]];
      left_sum += y;
      left_squares += y * y;
      const size_t left_count = i + 1;
      const size_t right_count = count - left_count;
      if (left_count < min_leaf || right_count < min_leaf) continue;
      const double here = rows[sorted[i]][feature];
      const double next = rows[sorted[i + 1]][feature];
      if (!(here < next)) continue;  // only between distinct values
      const double right_sum = sum - left_sum;
      const double right_squares = sum_squares - left_squares;
      const double error =
          (left_squares - left_sum * left_sum / static_cast<double>(left_count)) +
          (right_squares - right_sum * right_sum / static_cast<double>(right_count));
      if (error < best_error) {
        best_error = error;
        best_feature = static_cast<int>(feature);
        best_threshold = 0.5 * (here + next);
      }
    }
  }
  if (best_feature < 0) return node_index;

  const auto middle = std::stable_partition(
      indices.begin() + static_cast<std::ptrdiff_t>(begin),
      indices.begin() + static_cast<std::ptrdiff_t>(end),
      [&](size_t row) { return rows[row][static_cast<size_t>(best_feature)] <= best_threshold; });
  const auto split = static_cast<size_t>(middle - indices.begin());
  const int32_t left = Grow(rows, targets, indices, begin, split, depth + 1, random, options, tree);
  const int32_t right = Grow(rows, targets, indices, split, end, depth + 1, random, options, tree);
  Node& node = tree[static_cast<size_t>(node_index)];
  node.feature = best_feature;
  node.threshold = best_threshold;
  node.left = left;
  node.right = right;
  return node_index;
}

double RegressionForest::Evaluate(const Tree& tree, const std::vector<double>& row) {
  size_t at = 0;
  while (tree[at].feature >= 0) {
    const Node& node = tree[at];
    at = static_cast<size_t>(row[static_cast<size_t>(node.feature)] <= node.threshold ? node.left
                                                                                      : node.right);
  }
  return tree[at].value;
}

RegressionForest::Prediction RegressionForest::Predict(const std::vector<double>& row) const {
  Prediction prediction;
  if (trees_.empty()) return prediction;
  double sum = 0;
  double sum_squares = 0;
  for (const Tree& tree : trees_) {
    const double value = Evaluate(tree, row);
    sum += value;
    sum_squares += value * value;
  }
  const auto n = static_cast<double>(trees_.size());
  prediction.mean = sum / n;
  prediction.spread = std::sqrt(std::max(0.0, sum_squares / n - prediction.mean * prediction.mean));
  return prediction;
}

}  // namespace evo

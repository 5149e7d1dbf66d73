#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/random.h"

namespace evo {

struct ForestOptions {
  int trees = 32;
  // Each split looks at this share of the features (at least one), drawn per node: the trees
  // then disagree where the data do not pin the answer down, which is the spread the
  // search reads as uncertainty.
  double feature_share = 0.8;
  int min_leaf = 2;  // rows a leaf keeps at least
  int max_depth = 16;
};

// A random forest of regression trees (bagged CART trees, as SMAC uses for algorithm
// configuration): each tree is grown on a bootstrap sample of the rows by splits that minimize
// the squared error. The mean of the trees' predictions is the forecast; their spread says how
// sure it is. Deterministic for a given Random, so a search that fits one stays reproducible.
class RegressionForest {
 public:
  struct Prediction {
    double mean = 0;
    double spread = 0;  // standard deviation of the trees' predictions
  };

  // `rows`: n feature vectors of one length; `targets`: n values. Fits nothing for n = 0
  // (Predict then answers 0 with no spread).
  void Fit(const std::vector<std::vector<double>>& rows, const std::vector<double>& targets,
           Random& random, const ForestOptions& options = {});

  Prediction Predict(const std::vector<double>& row) const;
  bool empty() const { return trees_.empty(); }

 private:
  struct Node {
    int feature = -1;  // -1: a leaf holding `value`
    double threshold = 0;
    double value = 0;
    int32_t left = -1;  // rows with feature <= threshold
    int32_t right = -1;
  };
  using Tree = std::vector<Node>;

  static int32_t Grow(const std::vector<std::vector<double>>& rows,
                      const std::vector<double>& targets, std::vector<size_t>& indices,
                      size_t begin, size_t end, int depth, Random& random,
                      const ForestOptions& options, Tree& tree);
  static double Evaluate(const Tree& tree, const std::vector<double>& row);

  std::vector<Tree> trees_;
};

}  // namespace evo

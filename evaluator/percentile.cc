#include "evaluator/percentile.h"

#include <algorithm>
#include <cmath>

namespace evo {

double Percentile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(below);
  // a + (b - a) w rather than a (1 - w) + b w: the latter rounds past a when a == b (p10 came out
  // one ulp above an equal median on the H100).
  const double low = sorted[below];
  const double high = sorted[above];
  return std::clamp(low + (high - low) * weight, low, high);
}

}  // namespace evo

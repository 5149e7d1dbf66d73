#include "evaluator/percentile.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

namespace evo {
namespace {

TEST_CASE("percentiles of equal samples are the sample, and never decrease with q", "[timing]") {
  // The H100 measured p10 one ulp above an equal median with the a (1 - w) + b w form.
  const double x = 7.4390584932;
  for (size_t n = 1; n <= 64; ++n) {
    const std::vector<double> same(n, x);
    INFO("n=" << n);
    CHECK(Percentile(same, 0.1) == x);
    CHECK(Percentile(same, 0.5) == x);
    CHECK(Percentile(same, 0.9) == x);
  }
  std::vector<double> samples;
  for (int i = 0; i < 41; ++i) samples.push_back(5.0 + 0.013 * (i / 3));
  std::sort(samples.begin(), samples.end());
  double previous = Percentile(samples, 0.0);
  CHECK(previous == samples.front());
  for (int step = 1; step <= 1000; ++step) {
    const double value = Percentile(samples, step / 1000.0);
    CHECK(value >= previous);
    previous = value;
  }
  CHECK(previous == samples.back());
  // Interpolated between the two nearest ranks.
  CHECK(Percentile({1.0, 2.0, 3.0, 4.0, 5.0}, 0.5) == 3.0);
  CHECK(Percentile({1.0, 2.0}, 0.25) == 1.25);
}

}  // namespace
}  // namespace evo

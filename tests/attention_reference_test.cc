#include "tests/attention_reference.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

namespace evo {
namespace {

using test::AttentionForwardFloat64;
using test::AttentionShape;

std::vector<float> Normal(size_t n, unsigned seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(n);
  for (float& value : values) value = normal(engine);
  return values;
}

TEST_CASE("float64 attention: cases with known answers", "[reference]") {
  const AttentionShape shape{1, 2, 5, 7, 4, false};
  const size_t qn = 2 * 5 * 4;
  const size_t kn = 2 * 7 * 4;
  const std::vector<float> v = Normal(kn, 1);

  SECTION("equal scores average V") {
    const auto out = AttentionForwardFloat64(Normal(qn, 2), std::vector<float>(kn, 0.0f), v, shape);
    for (size_t h = 0; h < 2; ++h) {
      for (size_t c = 0; c < 4; ++c) {
        double mean = 0;
        for (size_t j = 0; j < 7; ++j) mean += v[(h * 7 + j) * 4 + c] / 7.0;
        for (size_t i = 0; i < 5; ++i)
          CHECK(out[(h * 5 + i) * 4 + c] == Approx(mean).epsilon(1e-12));
      }
    }
  }
  SECTION("causal: the first query sees only the first key; the scale is 1/sqrt(D)") {
    AttentionShape causal = shape;
    causal.causal = true;
    const auto q = Normal(qn, 3);
    const auto k = Normal(kn, 4);
    const auto out = AttentionForwardFloat64(q, k, v, causal);
    for (size_t h = 0; h < 2; ++h) {
      for (size_t c = 0; c < 4; ++c) CHECK(out[(h * 5) * 4 + c] == Approx(v[(h * 7) * 4 + c]));
    }
    // Row 1 of head 0 mixes keys 0 and 1 with weights from the scaled scores.
    double s0 = 0;
    double s1 = 0;
    for (size_t c = 0; c < 4; ++c) {
      s0 += static_cast<double>(q[4 + c]) * k[c] / 2.0;
      s1 += static_cast<double>(q[4 + c]) * k[4 + c] / 2.0;
    }
    const double p1 = 1.0 / (1.0 + std::exp(s0 - s1));
    for (size_t c = 0; c < 4; ++c) {
      CHECK(out[4 + c] == Approx((1 - p1) * v[c] + p1 * v[4 + c]).epsilon(1e-12));
    }
  }
  SECTION("one dominant key selects its value row") {
    std::vector<float> q(qn, 0.0f);
    std::vector<float> k(kn, 0.0f);
    for (size_t i = 0; i < 5; ++i) q[i * 4] = 100.0f;  // head 0 queries point along dim 0
    k[3 * 4] = 100.0f;                                 // head 0, key 3, along dim 0
    const auto out = AttentionForwardFloat64(q, k, v, shape);
    for (size_t i = 0; i < 5; ++i) {
      for (size_t c = 0; c < 4; ++c) CHECK(out[i * 4 + c] == Approx(v[3 * 4 + c]).epsilon(1e-9));
    }
  }
  SECTION("mismatched sizes are refused") {
    CHECK_THROWS(AttentionForwardFloat64(Normal(qn - 1, 5), Normal(kn, 6), v, shape));
  }
}

}  // namespace
}  // namespace evo

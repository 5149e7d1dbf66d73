#include "tests/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace evo::test {

std::vector<double> AttentionForwardFloat64(const std::vector<float>& q,
                                            const std::vector<float>& k,
                                            const std::vector<float>& v,
                                            const AttentionShape& shape) {
  const auto heads = static_cast<size_t>(shape.batch * shape.heads);
  const auto s_q = static_cast<size_t>(shape.s_q);
  const auto s_kv = static_cast<size_t>(shape.s_kv);
  const auto d = static_cast<size_t>(shape.head_dim);
  if (q.size() != heads * s_q * d || k.size() != heads * s_kv * d || v.size() != k.size()) {
    throw std::invalid_argument("AttentionForwardFloat64: tensor sizes do not match the shape");
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> out(q.size());
  std::vector<double> scores(s_kv);
  for (size_t h = 0; h < heads; ++h) {
    for (size_t i = 0; i < s_q; ++i) {
      const float* qi = &q[(h * s_q + i) * d];
      const size_t visible = shape.causal ? std::min(s_kv, i + 1) : s_kv;
      double max_score = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < visible; ++j) {
        const float* kj = &k[(h * s_kv + j) * d];
        double dot = 0;
        for (size_t c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0;
      for (size_t j = 0; j < visible; ++j) {
        scores[j] = std::exp(scores[j] - max_score);
        sum += scores[j];
      }
      double* oi = &out[(h * s_q + i) * d];
      for (size_t j = 0; j < visible; ++j) {
        const float* vj = &v[(h * s_kv + j) * d];
        const double p = scores[j] / sum;
        for (size_t c = 0; c < d; ++c) oi[c] += p * vj[c];
      }
    }
  }
  return out;
}

}  // namespace evo::test

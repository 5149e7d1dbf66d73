#pragma once

#include <cstdint>
#include <vector>

namespace evo::test {

struct AttentionShape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t s_q = 1;
  int64_t s_kv = 1;
  int64_t head_dim = 64;
  bool causal = false;
};

// Attention forward in float64 on the CPU, the ground truth the GPU reference kernel is tested
// against: O = softmax(Q K^T / sqrt(D), masked j > i when causal) V over [B, H, S, D] tensors.
std::vector<double> AttentionForwardFloat64(const std::vector<float>& q,
                                            const std::vector<float>& k,
                                            const std::vector<float>& v,
                                            const AttentionShape& shape);

}  // namespace evo::test

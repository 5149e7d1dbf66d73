#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace evo {

// xoshiro256** seeded through SplitMix64, with its own integer and real draws: the standard
// library's distributions differ between implementations, and a search must replay the same
// way on every machine from the seed stored with its run.
class Random {
 public:
  explicit Random(uint64_t seed);

  uint64_t Next();
  int64_t Below(int64_t n);  // uniform in [0, n) without modulo bias; n >= 1
  double Unit();             // uniform in [0, 1)
  bool Chance(double p);

  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[static_cast<size_t>(Below(static_cast<int64_t>(items.size())))];
  }

 private:
  uint64_t state_[4];
};

// An independent stream for (seed, stream): generation g of a run draws from
// Random(StreamSeed(run_seed, g)), so a resumed run continues exactly where it left off.
uint64_t StreamSeed(uint64_t seed, uint64_t stream);

}  // namespace evo

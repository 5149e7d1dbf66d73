#include "engine/random.h"

namespace evo {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function: a bijection that spreads every input bit over the output, so
// nearby seeds (42, 43) give unrelated states.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64(uint64_t& state) {
  state += kGolden;
  return Mix(state);
}

uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Random::Random(uint64_t seed) {
  // SplitMix64 never yields four zeros in a row, the one state xoshiro cannot leave.
  for (uint64_t& word : state_) word = SplitMix64(seed);
}

uint64_t Random::Next() {
  const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = RotateLeft(state_[3], 45);
  return result;
}

int64_t Random::Below(int64_t n) {
  if (n <= 1) return 0;
  // Rejects the 2^64 mod n lowest draws, so that every residue has the same number of
  // preimages; this needs no 128-bit multiply, and rejection is rare for the small n here.
  const auto bound = static_cast<uint64_t>(n);
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = Next();
    if (r >= threshold) return static_cast<int64_t>(r % bound);
  }
}

double Random::Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

bool Random::Chance(double p) { return Unit() < p; }

uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  // Each input goes through its own mix before they are combined, so (seed, stream) and
  // (seed + 1, stream - 1) do not meet.
  return Mix(Mix(seed + kGolden) ^ Mix(stream * kGolden + 0x632be59bd9b4e019ULL));
}

}  // namespace evo

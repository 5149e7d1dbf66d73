#include "common/sha256.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace evo {
namespace {

// FIPS 180-4 section 4.2.2: first 32 bits of the fractional parts of the cube roots of the first
// 64 primes.
constexpr std::array<uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

// FIPS 180-4 section 5.3.3: first 32 bits of the fractional parts of the square roots of the first
// 8 primes.
constexpr std::array<uint32_t, 8> kInitialState = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

constexpr size_t kBlockSize = 64;
// The message length is appended as a 64-bit big-endian integer, so the last block can carry at
// most 55 message bytes plus the 0x80 terminator.
constexpr size_t kLengthOffset = kBlockSize - 8;

constexpr uint32_t RotateRight(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

uint32_t LoadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void StoreBigEndian32(uint32_t value, uint8_t* p) {
  p[0] = static_cast<uint8_t>(value >> 24);
  p[1] = static_cast<uint8_t>(value >> 16);
  p[2] = static_cast<uint8_t>(value >> 8);
  p[3] = static_cast<uint8_t>(value);
}

}  // namespace

Sha256::Sha256() : state_(kInitialState) {}

Sha256& Sha256::Update(std::string_view bytes) { return Update(bytes.data(), bytes.size()); }

Sha256& Sha256::Update(const void* data, size_t size) {
  assert(!finalized_ && "Sha256::Update after Digest");
  const auto* input = static_cast<const uint8_t*>(data);
  total_bytes_ += size;

  if (buffer_size_ > 0) {
    const size_t take = std::min(size, kBlockSize - buffer_size_);
    std::memcpy(buffer_.data() + buffer_size_, input, take);
    buffer_size_ += take;
    input += take;
    size -= take;
    if (buffer_size_ < kBlockSize) return *this;
    ProcessBlock(buffer_.data());
    buffer_size_ = 0;
  }
  // Hash whole blocks straight from the caller's memory to avoid a copy per block.
  for (; size >= kBlockSize; input += kBlockSize, size -= kBlockSize) ProcessBlock(input);
  if (size > 0) {
    std::memcpy(buffer_.data(), input, size);
    buffer_size_ = size;
  }
  return *this;
}

std::array<uint8_t, 32> Sha256::Digest() {
  if (finalized_) return digest_;

  // FIPS 180-4 section 5.1.1: append a 1 bit, zeros up to 56 mod 64 bytes, then the bit length.
  const uint64_t bit_length = total_bytes_ * 8;
  buffer_[buffer_size_++] = 0x80;
  if (buffer_size_ > kLengthOffset) {
    std::memset(buffer_.data() + buffer_size_, 0, kBlockSize - buffer_size_);
    ProcessBlock(buffer_.data());
    buffer_size_ = 0;
  }
  std::memset(buffer_.data() + buffer_size_, 0, kLengthOffset - buffer_size_);
  StoreBigEndian32(static_cast<uint32_t>(bit_length >> 32), buffer_.data() + kLengthOffset);
  StoreBigEndian32(static_cast<uint32_t>(bit_length), buffer_.data() + kLengthOffset + 4);
  ProcessBlock(buffer_.data());
  buffer_size_ = 0;

  for (size_t i = 0; i < state_.size(); ++i) StoreBigEndian32(state_[i], digest_.data() + 4 * i);
  finalized_ = true;
  return digest_;
}

std::string Sha256::HexDigest() {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  const std::array<uint8_t, 32> digest = Digest();
  std::string hex;
  hex.reserve(2 * digest.size());
  for (uint8_t byte : digest) {
    hex.push_back(kHexDigits[byte >> 4]);
    hex.push_back(kHexDigits[byte & 0x0f]);
  }
  return hex;
}

void Sha256::ProcessBlock(const uint8_t* block) {
  // FIPS 180-4 section 6.2.2.
  std::array<uint32_t, 64> w;
  for (size_t t = 0; t < 16; ++t) w[t] = LoadBigEndian32(block + 4 * t);
  for (size_t t = 16; t < 64; ++t) {
    const uint32_t s0 = RotateRight(w[t - 15], 7) ^ RotateRight(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const uint32_t s1 = RotateRight(w[t - 2], 17) ^ RotateRight(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }

  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (size_t t = 0; t < 64; ++t) {
    const uint32_t sigma1 = RotateRight(e, 6) ^ RotateRight(e, 11) ^ RotateRight(e, 25);
    const uint32_t choose = (e & f) ^ (~e & g);
    const uint32_t t1 = h + sigma1 + choose + kRoundConstants[t] + w[t];
    const uint32_t sigma0 = RotateRight(a, 2) ^ RotateRight(a, 13) ^ RotateRight(a, 22);
    const uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = sigma0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

std::string Sha256Hex(std::string_view bytes) { return Sha256().Update(bytes).HexDigest(); }

}  // namespace evo

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace evo {

// SHA-256 as specified in FIPS 180-4. Used for content addressing (cache keys, artifact names), so
// it must be bit-exact and independent of any system crypto library.
class Sha256 {
 public:
  Sha256();

  Sha256& Update(std::string_view bytes);
  Sha256& Update(const void* data, size_t size);

  // Finalizes the hash. Calling Digest() or HexDigest() again returns the same value; calling
  // Update() afterwards is a logic error.
  std::array<uint8_t, 32> Digest();
  // 64 lowercase hex characters.
  std::string HexDigest();

 private:
  void ProcessBlock(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffer_size_ = 0;
  uint64_t total_bytes_ = 0;
  bool finalized_ = false;
  std::array<uint8_t, 32> digest_{};
};

// Lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

}  // namespace evo

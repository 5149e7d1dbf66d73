#include "common/sha256.h"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace evo {
namespace {

// A non-repeating-per-word pattern, so byte-order or offset bugs change the digest.
std::string Alphabet(size_t length) {
  std::string text;
  for (size_t i = 0; i < length; ++i) text.push_back(static_cast<char>('a' + i % 26));
  return text;
}

std::string HexOf(const std::array<uint8_t, 32>& digest) {
  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : digest) {
    hex.push_back(kHexDigits[byte >> 4]);
    hex.push_back(kHexDigits[byte & 0x0f]);
  }
  return hex;
}

TEST_CASE("Sha256 matches the FIPS 180-4 test vectors", "[sha256]") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Sha256Hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("Sha256 pads correctly around block boundaries", "[sha256]") {
  // Expected values from `sha256sum`. 55 bytes is the most that fits with the padding in one
  // block; 56..63 force an extra block; 64 and 65 straddle a full block.
  CHECK(Sha256Hex(Alphabet(55)) ==
        "595615dbe4f0f407ae397d08b4c2cb870cb9b0e11937416f950c5160acf9c005");
  CHECK(Sha256Hex(Alphabet(56)) ==
        "784f623b787495078e93ff28a25b581df0584055a7e71d8cd90c454716b92f51");
  CHECK(Sha256Hex(Alphabet(63)) ==
        "5ca3e1ef5207490eac01a795e5cc94d59582a5118bf9534665c8668d87aa647c");
  CHECK(Sha256Hex(Alphabet(64)) ==
        "2fcd5a0d60e4c941381fcc4e00a4bf8be422c3ddfafb93c809e8d1e2bfffae8e");
  CHECK(Sha256Hex(Alphabet(65)) ==
        "1b3cd1877ab2f2f19f7be001722554f336cb799df0329de0bb4c118dc6abc06d");
}

TEST_CASE("Sha256 incremental updates equal a one-shot hash", "[sha256]") {
  const std::string text = Alphabet(1000);
  const std::string expected = Sha256Hex(text);

  SECTION("odd-sized pieces") {
    Sha256 hasher;
    const size_t piece_sizes[] = {1, 3, 7, 13, 31, 63, 64, 65, 127, 2};
    size_t offset = 0;
    for (size_t i = 0; offset < text.size(); ++i) {
      const size_t size = std::min(piece_sizes[i % std::size(piece_sizes)], text.size() - offset);
      hasher.Update(std::string_view(text).substr(offset, size));
      offset += size;
    }
    CHECK(hasher.HexDigest() == expected);
  }

  SECTION("one byte at a time, with empty updates mixed in") {
    Sha256 hasher;
    for (char c : text) hasher.Update(&c, 1).Update("");
    CHECK(hasher.HexDigest() == expected);
  }

  SECTION("each padding edge length split in two") {
    for (size_t length : {size_t{55}, size_t{56}, size_t{63}, size_t{64}, size_t{65}}) {
      const std::string input = Alphabet(length);
      for (size_t split = 0; split <= length; ++split) {
        Sha256 hasher;
        hasher.Update(input.substr(0, split)).Update(input.substr(split));
        INFO("length " << length << " split " << split);
        CHECK(hasher.HexDigest() == Sha256Hex(input));
      }
    }
  }
}

TEST_CASE("Sha256 hashes binary data through the pointer overload", "[sha256]") {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<uint8_t>(i));
  Sha256 hasher;
  hasher.Update(bytes.data(), bytes.size());
  CHECK(hasher.HexDigest() == "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880");
}

TEST_CASE("Sha256 Digest is stable across repeated calls", "[sha256]") {
  Sha256 hasher;
  hasher.Update("abc");
  const std::array<uint8_t, 32> first = hasher.Digest();
  CHECK(hasher.Digest() == first);
  CHECK(hasher.HexDigest() == HexOf(first));
  CHECK(HexOf(first) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace evo

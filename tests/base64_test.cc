#include "common/base64.h"

#include <catch2/catch.hpp>

namespace evo {
namespace {

TEST_CASE("base64 follows RFC 4648 and round-trips binary", "[base64]") {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    CHECK(Base64Encode(plain) == encoded);
    CHECK(Base64Decode(encoded) == std::string(plain));
  }
  std::string binary;
  for (int i = 0; i < 1000; ++i) binary += static_cast<char>((i * 37) & 0xff);
  CHECK(Base64Decode(Base64Encode(binary)) == binary);
  for (const char* bad : {"Zg=", "Z===", "Zm9v!A==", "Zg==Zg==", "=Zg="}) {
    CHECK_FALSE(Base64Decode(bad).has_value());
  }
}

}  // namespace
}  // namespace evo

#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace evo {

// Standard base64 (RFC 4648, with padding), for binary payloads inside JSON lines.
std::string Base64Encode(std::string_view bytes);
// Nothing when `text` is not canonical base64.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace evo

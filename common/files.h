#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace evo {

// Reads a whole file; throws evo::Error naming the path when it cannot.
std::string ReadFile(const std::filesystem::path& path);

// Reads a whole file, or nothing when it does not exist or cannot be read.
std::optional<std::string> TryReadFile(const std::filesystem::path& path);

// Writes through a temporary file in the same folder and renames it into place, so readers
// see either the old content or the whole new one, never a torn file.
void WriteFileAtomically(const std::filesystem::path& path, std::string_view content);

}  // namespace evo

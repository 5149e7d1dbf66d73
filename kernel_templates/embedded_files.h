#pragma once

#include <span>
#include <string_view>

namespace evo {

// A file of kernel_templates/ compiled into the binary; path is relative to that folder.
struct EmbeddedFile {
  std::string_view path;
  std::string_view content;
};

std::span<const EmbeddedFile> EmbeddedTemplateFiles();

}  // namespace evo

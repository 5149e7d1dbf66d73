#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_templates/manifest.h"

namespace evo {

struct KernelTemplate {
  Manifest manifest;
  std::string origin;       // "embedded" or the folder it was read from
  std::string source_hash;  // sha256 of the manifest and every source: a template's version
};

// The templates evo knows: those embedded in the binary plus those of the user's folders.
class TemplateLibrary {
 public:
  // Throws evo::Error for an unreadable folder, a folder without templates, or a broken manifest.
  // A user's template replaces an embedded one of the same name.
  static TemplateLibrary Load(const std::vector<std::filesystem::path>& user_folders);

  // Throws evo::Error naming the known templates when there is none of that name.
  const KernelTemplate& Find(std::string_view name) const;
  const std::vector<KernelTemplate>& templates() const { return templates_; }

 private:
  void Add(KernelTemplate kernel_template, bool replace_embedded);

  std::vector<KernelTemplate> templates_;
};

}  // namespace evo

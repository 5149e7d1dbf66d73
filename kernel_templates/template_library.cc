#include "kernel_templates/template_library.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <system_error>

#include "common/error.h"
#include "common/files.h"
#include "common/sha256.h"
#include "kernel_templates/embedded_files.h"

namespace evo {
namespace {

constexpr std::string_view kManifestName = "manifest.json";
// Search hints beside the manifest, deliberately outside the template's hash.
constexpr std::string_view kStartingPointsName = "starting_points.json";

// Hashes the manifest and the sources it names, each with its length so that moving bytes from
// one file to the next changes the hash.
std::string HashTemplate(std::string_view manifest_text, const Manifest& manifest) {
  Sha256 hash;
  for (std::string_view part : {manifest_text, std::string_view(manifest.kernel.source),
                                std::string_view(manifest.reference.source)}) {
    hash.Update(std::to_string(part.size()) + ":");
    hash.Update(part);
  }
  return hash.HexDigest();
}

KernelTemplate LoadFromFolder(const std::filesystem::path& folder) {
  const std::filesystem::path manifest_path = folder / kManifestName;
  const std::string text = ReadFile(manifest_path);
  auto read_source = [&](const std::string& relative) {
    if (std::filesystem::path(relative).is_absolute() || relative.find("..") != std::string::npos) {
      throw Error("'" + relative + "' must be a path inside the template's folder");
    }
    return ReadFile(folder / relative);
  };
  KernelTemplate loaded{ParseManifest(text, manifest_path.string(), read_source), folder.string(),
                        ""};
  loaded.source_hash = HashTemplate(text, loaded.manifest);
  const std::filesystem::path starts_path = folder / kStartingPointsName;
  if (std::filesystem::exists(starts_path)) {
    loaded.manifest.starting_points =
        ParseStartingPoints(ReadFile(starts_path), starts_path.string(), loaded.manifest);
  }
  return loaded;
}

std::vector<KernelTemplate> LoadEmbedded() {
  std::map<std::string, std::map<std::string, std::string_view>> folders;
  for (const EmbeddedFile& file : EmbeddedTemplateFiles()) {
    const size_t slash = file.path.find('/');
    if (slash == std::string_view::npos) continue;
    folders[std::string(file.path.substr(0, slash))][std::string(file.path.substr(slash + 1))] =
        file.content;
  }
  std::vector<KernelTemplate> loaded;
  for (const auto& [folder, files] : folders) {
    const auto manifest = files.find(std::string(kManifestName));
    if (manifest == files.end()) continue;
    auto read_source = [&, folder_name = folder](const std::string& relative) {
      const auto it = files.find(relative);
      if (it == files.end()) {
        throw Error("'" + relative + "' is not embedded with template folder " + folder_name);
      }
      return std::string(it->second);
    };
    KernelTemplate kernel_template{
        ParseManifest(manifest->second, "embedded:" + folder + "/manifest.json", read_source),
        "embedded", ""};
    kernel_template.source_hash = HashTemplate(manifest->second, kernel_template.manifest);
    const auto starts = files.find(std::string(kStartingPointsName));
    if (starts != files.end()) {
      kernel_template.manifest.starting_points = ParseStartingPoints(
          starts->second, "embedded:" + folder + "/" + std::string(kStartingPointsName),
          kernel_template.manifest);
    }
    loaded.push_back(std::move(kernel_template));
  }
  return loaded;
}

// A folder is a template itself when it holds a manifest, else a collection of template folders.
std::vector<KernelTemplate> LoadUserFolder(const std::filesystem::path& folder) {
  std::error_code error;
  const auto status = std::filesystem::status(folder, error);
  if (error || !std::filesystem::exists(status)) {
    throw Error("templates folder '" + folder.string() + "' does not exist");
  }
  if (!std::filesystem::is_directory(status)) {
    throw Error("templates folder '" + folder.string() + "' is not a folder");
  }
  if (std::filesystem::exists(folder / kManifestName)) return {LoadFromFolder(folder)};
  std::vector<KernelTemplate> loaded;
  std::filesystem::directory_iterator it(folder, error);
  if (error) {
    throw Error("cannot read templates folder '" + folder.string() + "': " + error.message());
  }
  std::vector<std::filesystem::path> subfolders;
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    if (error) {
      throw Error("cannot read templates folder '" + folder.string() + "': " + error.message());
    }
    if (it->is_directory() && std::filesystem::exists(it->path() / kManifestName)) {
      subfolders.push_back(it->path());
    }
  }
  std::sort(subfolders.begin(), subfolders.end());
  for (const auto& subfolder : subfolders) loaded.push_back(LoadFromFolder(subfolder));
  if (loaded.empty()) {
    throw Error("templates folder '" + folder.string() + "' holds no " +
                std::string(kManifestName) + ", neither itself nor in a subfolder");
  }
  return loaded;
}

}  // namespace

TemplateLibrary TemplateLibrary::Load(const std::vector<std::filesystem::path>& user_folders) {
  TemplateLibrary library;
  for (KernelTemplate& embedded : LoadEmbedded()) library.Add(std::move(embedded), false);
  for (const auto& folder : user_folders) {
    for (KernelTemplate& user : LoadUserFolder(folder)) library.Add(std::move(user), true);
  }
  return library;
}

void TemplateLibrary::Add(KernelTemplate kernel_template, bool replace_embedded) {
  auto same_name = std::find_if(templates_.begin(), templates_.end(), [&](const auto& known) {
    return known.manifest.name == kernel_template.manifest.name;
  });
  if (same_name == templates_.end()) {
    templates_.push_back(std::move(kernel_template));
    return;
  }
  if (!replace_embedded || same_name->origin != "embedded") {
    throw Error("template " + kernel_template.manifest.name + " is defined twice: in " +
                same_name->origin + " and in " + kernel_template.origin);
  }
  spdlog::info("template {} from {} replaces the embedded one", kernel_template.manifest.name,
               kernel_template.origin);
  *same_name = std::move(kernel_template);
}

const KernelTemplate& TemplateLibrary::Find(std::string_view name) const {
  for (const KernelTemplate& known : templates_) {
    if (known.manifest.name == name) return known;
  }
  std::string names;
  for (const KernelTemplate& known : templates_) {
    names += (names.empty() ? "" : ", ") + known.manifest.name;
  }
  throw Error("unknown template '" + std::string(name) + "' (known: " + names + ")");
}

}  // namespace evo

#include "kernel_templates/template_library.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "common/error.h"
#include "common/files.h"
#include "common/sha256.h"
#include "kernel_templates/embedded_files.h"

namespace evo {
namespace {

constexpr std::string_view kManifestName = "manifest.json";
// Search hints beside the manifest, deliberately outside the template's hash.
constexpr std::string_view kStartingPointsName = "starting_points.json";
// Embedded files under this folder of kernel_templates/ form the device library.
constexpr std::string_view kDeviceLibraryFolder = "include/";

using ReadLocal = std::function<std::optional<std::string>(const std::string&)>;

// Hashes the manifest, the sources it names and the headers they include, each with its length
// (and each header with its name) so that moving bytes from one part to the next changes it.
std::string HashTemplate(std::string_view manifest_text, const Manifest& manifest,
                         const std::vector<HeaderFile>& headers) {
  Sha256 hash;
  auto update = [&](std::string_view part) {
    hash.Update(std::to_string(part.size()) + ":");
    hash.Update(part);
  };
  update(manifest_text);
  update(manifest.main_kernel().source);
  update(manifest.reference.source);
  for (const HeaderFile& header : headers) {
    update(header.name);
    update(header.content);
  }
  return hash.HexDigest();
}

bool NamesDeviceLibrary(std::string_view name) { return name.starts_with(kDeviceLibraryPrefix); }

// Whether a relative name stays inside the template's folder (no absolute path, no "..").
bool InsideTemplateFolder(const std::string& relative) {
  return !std::filesystem::path(relative).is_absolute() && relative.find("..") == std::string::npos;
}

// One #include line's name and how it was written: "name" or <name>.
struct Include {
  std::string name;
  bool quoted;
};

// The includes of `source`'s #include lines, in order.
std::vector<Include> IncludedNames(std::string_view source) {
  std::vector<Include> includes;
  size_t line_start = 0;
  while (line_start < source.size()) {
    size_t line_end = source.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = source.size();
    std::string_view line = source.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    auto skip_blanks = [&line] {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    };
    skip_blanks();
    if (!line.starts_with('#')) continue;
    line.remove_prefix(1);
    skip_blanks();
    if (!line.starts_with("include")) continue;
    line.remove_prefix(7);
    skip_blanks();
    if (line.empty() || (line.front() != '"' && line.front() != '<')) continue;
    const bool quoted = line.front() == '"';
    const size_t end = line.find(quoted ? '"' : '>', 1);
    if (end == std::string_view::npos || end == 1) continue;
    includes.push_back({std::string(line.substr(1, end - 1)), quoted});
  }
  return includes;
}

// NVRTC's built-in headers that templates are likely to name, for a hint only: a quoted include
// of one is refused like any other name outside the folder, since NVRTC may look a quoted name
// up in the current directory, where a file of that name would stand in for the built-in.
bool NamesNvrtcBuiltin(std::string_view name) {
  static constexpr std::string_view kBuiltins[] = {
      "cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp", "cuda_fp8.h", "cuda_fp8.hpp"};
  return name.starts_with("cuda/") ||
         std::find(std::begin(kBuiltins), std::end(kBuiltins), name) != std::end(kBuiltins);
}

// An include of the template's own files that evo cannot version: one that leaves the folder
// (either spelling), or a quoted one that is not in the folder, which NVRTC would look up from
// the current directory. Suggests the root-relative name when `file`'s own subfolder has it.
Error UnversionedInclude(const std::string& file, const Include& include,
                         const ReadLocal& read_local) {
  const std::string spelled =
      include.quoted ? "\"" + include.name + "\"" : "<" + include.name + ">";
  const std::string rule =
      ": quoted includes name evo's device library (\"evo/...\") or files of the folder from its "
      "root (so that evo versions them)";
  if (!InsideTemplateFolder(include.name)) {
    return Error(file + " includes " + spelled + ", which leaves the template's folder" + rule +
                 "; <...> is for NVRTC's built-in headers");
  }
  std::string message =
      file + " includes " + spelled + ", which is not in the template's folder" + rule;
  const std::string folder = std::filesystem::path(file).parent_path().string();
  if (!folder.empty() && !NamesDeviceLibrary(file) && read_local(folder + "/" + include.name)) {
    message += ", e.g. \"" + folder + "/" + include.name + "\"";
  } else if (NamesNvrtcBuiltin(include.name)) {
    message += "; NVRTC's built-in headers are included as <" + include.name + ">";
  }
  return Error(message);
}

// `location` prefixes the names of the template's files in messages ("embedded:sdpa_fp16/").
KernelTemplate LoadTemplate(std::string_view manifest_text, const std::string& location,
                            const std::string& origin, const ReadLocal& read_local) {
  const std::string manifest_origin = location + std::string(kManifestName);
  auto read_source = [&](const std::string& relative) {
    return ReadManifestSource(relative, origin, read_local);
  };
  KernelTemplate loaded{ParseManifest(manifest_text, manifest_origin, read_source), origin, {}, ""};
  const Manifest& manifest = loaded.manifest;
  try {
    loaded.headers =
        ResolveIncludes({{manifest.main_kernel().source_path, manifest.main_kernel().source},
                         {manifest.reference.source_path, manifest.reference.source}},
                        read_local);
  } catch (const Error& error) {
    throw Error(manifest_origin + ": " + error.what());
  }
  loaded.source_hash = HashTemplate(manifest_text, manifest, loaded.headers);
  const std::string starts_name(kStartingPointsName);
  if (const std::optional<std::string> starts = read_local(starts_name)) {
    loaded.manifest.starting_points =
        ParseStartingPoints(*starts, location + starts_name, manifest);
  }
  return loaded;
}

KernelTemplate LoadFromFolder(const std::filesystem::path& folder) {
  const std::string text = ReadFile(folder / kManifestName);
  return LoadTemplate(text, (folder / "").string(), folder.string(),
                      [&](const std::string& relative) -> std::optional<std::string> {
                        const std::filesystem::path path = folder / relative;
                        std::error_code error;
                        if (!std::filesystem::is_regular_file(path, error)) return std::nullopt;
                        return ReadFile(path);
                      });
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
    loaded.push_back(
        LoadTemplate(manifest->second, "embedded:" + folder + "/", "embedded",
                     [&files](const std::string& relative) -> std::optional<std::string> {
                       const auto it = files.find(relative);
                       if (it == files.end()) return std::nullopt;
                       return std::string(it->second);
                     }));
  }
  return loaded;
}

}  // namespace

const std::map<std::string, std::string, std::less<>>& DeviceLibrary() {
  static const std::map<std::string, std::string, std::less<>> library = [] {
    std::map<std::string, std::string, std::less<>> files;
    for (const EmbeddedFile& file : EmbeddedTemplateFiles()) {
      if (file.path.starts_with(kDeviceLibraryFolder)) {
        files.emplace(file.path.substr(kDeviceLibraryFolder.size()), file.content);
      }
    }
    return files;
  }();
  return library;
}

std::string ReadManifestSource(
    const std::string& relative, const std::string& origin,
    const std::function<std::optional<std::string>(const std::string&)>& read_local) {
  if (NamesDeviceLibrary(relative)) {
    const auto found = DeviceLibrary().find(relative);
    if (found == DeviceLibrary().end()) {
      throw Error("'" + relative + "' is not in evo's device library");
    }
    return found->second;
  }
  if (!InsideTemplateFolder(relative)) {
    throw Error("'" + relative + "' must be a path inside the template's folder");
  }
  std::optional<std::string> text = read_local(relative);
  if (!text) throw Error("'" + relative + "' is not in " + origin);
  return *std::move(text);
}

std::vector<HeaderFile> ResolveIncludes(
    const std::vector<std::pair<std::string, std::string>>& sources,
    const std::function<std::optional<std::string>(const std::string&)>& read_local) {
  std::map<std::string, std::string> found;
  std::vector<std::pair<std::string, std::string>> pending = sources;  // (file, its text)
  while (!pending.empty()) {
    const auto [file, text] = std::move(pending.back());
    pending.pop_back();
    for (const Include& include : IncludedNames(text)) {
      const std::string& name = include.name;
      if (found.contains(name)) continue;
      std::optional<std::string> content;
      if (NamesDeviceLibrary(name)) {
        const auto library_file = DeviceLibrary().find(name);
        if (library_file == DeviceLibrary().end()) {
          std::string known;
          for (const auto& [known_name, unused] : DeviceLibrary()) {
            known += (known.empty() ? "" : ", ") + known_name;
          }
          throw Error(file + " includes \"" + name + "\", which is not in evo's device library (" +
                      known + ")");
        }
        content = library_file->second;
      } else if (InsideTemplateFolder(name)) {
        content = read_local(name);
      }
      if (!content) {
        // Whatever evo does not hand NVRTC is outside the template's version and the compile
        // cache's key, so only NVRTC's built-in headers, named as <...>, may be left to it.
        if (include.quoted || !InsideTemplateFolder(name)) {
          throw UnversionedInclude(file, include, read_local);
        }
        continue;
      }
      found.emplace(name, *content);
      pending.emplace_back(name, *std::move(content));
    }
  }
  std::vector<HeaderFile> headers;
  for (auto& [name, content] : found) headers.push_back({name, std::move(content)});
  return headers;
}

namespace {

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
  if (same_name->origin != "embedded" && kernel_template.origin != "embedded") {
    // One folder reached twice (named twice, in two spellings, or once more through its
    // parent) is one template, not two definitions of it.
    std::error_code error;
    if (std::filesystem::equivalent(same_name->origin, kernel_template.origin, error)) return;
  }
  if (!replace_embedded || same_name->origin != "embedded") {
    throw Error("template " + kernel_template.manifest.name + " is defined twice: in " +
                same_name->origin + " and in " + kernel_template.origin);
  }
  spdlog::info("template {} from {} replaces the embedded one", kernel_template.manifest.name,
               kernel_template.origin);
  *same_name = std::move(kernel_template);
}

const KernelTemplate* TemplateLibrary::TryFind(std::string_view name) const {
  for (const KernelTemplate& known : templates_) {
    if (known.manifest.name == name) return &known;
  }
  return nullptr;
}

const KernelTemplate& TemplateLibrary::Find(std::string_view name) const {
  if (const KernelTemplate* known = TryFind(name)) return *known;
  std::string names;
  for (const KernelTemplate& known : templates_) {
    names += (names.empty() ? "" : ", ") + known.manifest.name;
  }
  // A recording or a database names a template of the user's own, not the folder it came from.
  throw Error("unknown template '" + std::string(name) + "' (known: " + names +
              "); a template of your own is found with --templates DIR");
}

}  // namespace evo

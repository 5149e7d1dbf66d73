#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_templates/manifest.h"

namespace evo {

// A header a template's sources include, by the name they include it with.
struct HeaderFile {
  std::string name;  // "evo/mma_sync.cuh" (device library) or a file of the template's folder
  std::string content;
};

struct KernelTemplate {
  Manifest manifest;
  std::string origin;  // "embedded" or the folder it was read from
  // Every header the kernel and reference sources include, directly or through other headers,
  // sorted by name: they are given to NVRTC with each compile and exported with the source.
  std::vector<HeaderFile> headers;
  // sha256 of the manifest, its sources and every header they include: a template's version,
  // so a change to a shared header is a new version of each template that includes it.
  std::string source_hash;
};

// Include names that start with this prefix name the device library, and nothing else: a
// template folder cannot put its own file in their place.
inline constexpr std::string_view kDeviceLibraryPrefix = "evo/";

// The device library: the headers and shared kernel sources under kernel_templates/include,
// embedded in the binary, by the name templates include them with ("evo/mma_sync.cuh").
const std::map<std::string, std::string, std::less<>>& DeviceLibrary();

// Reads a source file a manifest names: the device library's for "evo/..." names, else
// read_local's (the template folder's own files, nullopt when there is none). Throws evo::Error
// naming `origin` when there is no such file, or for a path that leaves the folder.
std::string ReadManifestSource(
    const std::string& relative, const std::string& origin,
    const std::function<std::optional<std::string>(const std::string&)>& read_local);

// The headers `sources` include, directly or through each other, sorted by name. An include
// name is looked up in the device library when it starts with "evo/", else with `read_local`
// (the template folder's own files by their path from its root, nullopt when there is none).
// Only <...> names found in neither are left to NVRTC (its built-in headers, cuda_fp16.h, ...):
// every other header must be one evo versions. Throws evo::Error naming the including file and
// the include for a device library name it lacks, a quoted name not in the folder, and a name
// that leaves the folder (absolute or with "..").
std::vector<HeaderFile> ResolveIncludes(
    const std::vector<std::pair<std::string, std::string>>& sources,
    const std::function<std::optional<std::string>(const std::string&)>& read_local);

// The templates evo knows: those embedded in the binary plus those of the user's folders.
class TemplateLibrary {
 public:
  // Throws evo::Error for an unreadable folder, a folder without templates, a broken manifest
  // or an include that ResolveIncludes refuses.
  // A user's template replaces an embedded one of the same name.
  static TemplateLibrary Load(const std::vector<std::filesystem::path>& user_folders);

  // Throws evo::Error naming the known templates when there is none of that name.
  const KernelTemplate& Find(std::string_view name) const;
  // Null when there is none of that name.
  const KernelTemplate* TryFind(std::string_view name) const;
  const std::vector<KernelTemplate>& templates() const { return templates_; }

 private:
  void Add(KernelTemplate kernel_template, bool replace_embedded);

  std::vector<KernelTemplate> templates_;
};

}  // namespace evo

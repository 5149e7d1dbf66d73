#include "exports/package_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "common/error.h"
#include "common/files.h"

namespace evo {
namespace {

using Json = nlohmann::json;

std::string_view RuntimeFile(std::string_view path) {
  for (const EmbeddedFile& file : EmbeddedExportFiles()) {
    if (file.path == path) return file.content;
  }
  throw Error("this evo was built without its export file " + std::string(path));
}

void Write(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::create_directories(path.parent_path());
  WriteFileAtomically(path, content);
}

std::string TableText(const DispatchPackage& package) { return package.table.dump(1) + "\n"; }

std::string ShapeText(const Json& shape) {
  return fmt::format("B={} H={} H_kv={} S_q={} S_kv={}", shape["B"].get<int64_t>(),
                     shape["H"].get<int64_t>(), shape["H_kv"].get<int64_t>(),
                     shape["S_q"].get<int64_t>(), shape["S_kv"].get<int64_t>());
}

// What a reader of the package sees first: how to call it and what was tuned.
std::string Readme(const std::string& name, const DispatchPackage& package) {
  std::string text = "# " + name + "\n\nAttention kernels tuned by evo (" +
                     package.table["generated_by"].get<std::string>() +
                     "), with their dispatch table.\n\n"
                     "```python\n"
                     "import " +
                     name + "\nout = " + name +
                     ".attention(q, k, v, causal=False)  # q [B, H, S_q, D], k, v [B, H_kv, "
                     "S_kv, D]\n" +
                     name +
                     ".pick(B=2, H=8, S_q=1000, S_kv=1000, D=64)  # which kernel, no GPU\n"
                     "```\n\n"
                     "Rule: " +
                     package.table["rule"].get<std::string>() +
                     ".\n\n| entry | key | tuned shape | target | template | run | candidate | "
                     "us |\n|---|---|---|---|---|---|---|---|\n";
  const Json& kernels = package.table["kernels"];
  size_t index = 0;
  for (const Json& entry : package.table["entries"]) {
    const Json& kernel = kernels[entry["kernel"].get<size_t>()];
    const Json& key = kernel["key"];
    text += fmt::format("| {} | D={} {} {}/{} | {} | {} | {} | {} | {} | {:.2f} |\n", index++,
                        key["D"].get<int64_t>(), key["causal"].get<int64_t>() ? "causal" : "",
                        key["q_dtype"].get<std::string>(), key["kv_dtype"].get<std::string>(),
                        ShapeText(entry["shape"]), kernel["target"].get<std::string>(),
                        entry["template"].get<std::string>(), entry["run"].get<int64_t>(),
                        entry["candidate"].get<int64_t>(), entry["score_us"].get<double>());
  }
  return text;
}

void AppendBytes(std::string& out, std::string_view bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    out += std::to_string(static_cast<unsigned char>(bytes[i]));
    out += (i + 1) % 24 == 0 ? ",\n" : ",";
  }
}

}  // namespace

void CheckExportFolder(const std::filesystem::path& folder, const std::string& option,
                       const std::string& marker, const std::string& key,
                       const std::string& kind_file) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(folder, error);
  if (status.type() == fs::file_type::not_found) return;
  if (!fs::is_directory(status)) {
    throw Error(option + " " + folder.string() + " is not a folder");
  }
  if (fs::is_empty(folder, error) && !error) return;
  if (fs::is_regular_file(folder / marker, error)) {
    try {
      const Json json = Json::parse(ReadFile(folder / marker));
      if (json.is_object() && json.contains(key)) {
        if (kind_file.empty() || fs::exists(folder / kind_file, error)) return;
        throw Error(option + " " + folder.string() + " is an export of evo's of another kind (no " +
                    kind_file + "): export into a new or empty folder");
      }
    } catch (const Error&) {
      throw;
    } catch (const std::exception&) {
      // Not evo's: refused below.
    }
  }
  throw Error(option + " " + folder.string() + " holds files that are not an export of evo's (no " +
              marker +
              " written by evo): export into a new or empty folder; evo replaces only its own "
              "earlier exports");
}

bool IsPackageName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) != 0) return false;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  static const std::set<std::string> kKeywords = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return kKeywords.count(name) == 0;
}

std::string ShadowedImport(const std::string& name) {
  // What exports/python/*.py import (cuda: cuda-python's driver bindings, where present).
  static const std::set<std::string> kImported = {"ctypes", "cuda",      "hashlib", "json",
                                                  "os",     "threading", "torch",   "typing"};
  if (kImported.count(name) == 0) return "";
  std::string listed;
  for (const std::string& module : kImported) listed += (listed.empty() ? "" : ", ") + module;
  return listed;
}

void CheckPackageFolders(const std::filesystem::path& python_folder, const std::string& name,
                         const std::filesystem::path& cpp_folder) {
  if (!python_folder.empty()) {
    CheckExportFolder(python_folder / name, "--python", "table.json", "generated_by",
                      "__init__.py");
  }
  if (!cpp_folder.empty()) {
    CheckExportFolder(cpp_folder, "--cpp", "table.json", "generated_by", "CMakeLists.txt");
  }
  if (!python_folder.empty() && !cpp_folder.empty()) {
    // Either inside the other would put one export's files among the other's.
    const auto within = [](const std::filesystem::path& inner, const std::filesystem::path& outer) {
      const auto mismatch = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
      return mismatch.first == outer.end();
    };
    const auto normal = [](const std::filesystem::path& path) {
      const std::filesystem::path full = std::filesystem::weakly_canonical(path).lexically_normal();
      return full.filename().empty() ? full.parent_path() : full;
    };
    const std::filesystem::path package = normal(python_folder / name);
    const std::filesystem::path library = normal(cpp_folder);
    if (within(package, library) || within(library, package)) {
      throw Error("--python writes " + (python_folder / name).string() + " and --cpp " +
                  cpp_folder.string() + ": one is inside the other; name two separate folders");
    }
  }
}

void WritePythonPackage(const std::filesystem::path& folder, const std::string& name,
                        const DispatchPackage& package) {
  if (!IsPackageName(name)) {
    throw Error("'" + name +
                "' is not a Python package name (letters, digits, underscores; not a keyword)");
  }
  const std::filesystem::path root = folder / name;
  CheckExportFolder(root, "--python", "table.json", "generated_by", "__init__.py");
  for (const char* file : {"__init__.py", "_rule.py", "_driver.py", "_torch_op.py"}) {
    Write(root / file, RuntimeFile(std::string("python/") + file));
  }
  // Cubins of an earlier export into this folder would otherwise stay beside the new ones; only
  // cubins go, whatever else a user keeps there stays.
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(root / "kernels", ignored)) {
    if (entry.is_regular_file(ignored) && entry.path().extension() == ".cubin") {
      std::filesystem::remove(entry.path(), ignored);
    }
  }
  for (const auto& [path, bytes] : package.cubins) Write(root / path, bytes);
  Write(root / "README.md", Readme(name, package));
  // Last: a package whose table is there is complete.
  Write(root / "table.json", TableText(package));
}

std::string CppDataSource(const std::string& table_text, const DispatchPackage& package) {
  std::string out =
      "// Generated by evo export --cpp: the dispatch table (table.json's text) and the cubins.\n"
      "// Do not edit.\n#include <cstddef>\n\nnamespace evo_attention {\nnamespace data {\n\n"
      "struct Cubin {\n  const char* path;\n  const unsigned char* bytes;\n  size_t size;\n};\n"
      "extern const char kTable[];\nextern const size_t kTableSize;\n"
      "extern const Cubin kCubins[];\nextern const size_t kCubinCount;\n\n";
  out += "const char kTable[] = {\n";
  AppendBytes(out, table_text);
  out += "0};\nconst size_t kTableSize = " + std::to_string(table_text.size()) + ";\n\n";
  for (size_t i = 0; i < package.cubins.size(); ++i) {
    out += "alignas(64) static const unsigned char kCubin" + std::to_string(i) + "[] = {\n";
    AppendBytes(out, package.cubins[i].second);
    out += "0};\n";
  }
  out += "\nconst Cubin kCubins[] = {\n";
  for (size_t i = 0; i < package.cubins.size(); ++i) {
    out += "    {\"" + package.cubins[i].first + "\", kCubin" + std::to_string(i) + ", " +
           std::to_string(package.cubins[i].second.size()) + "},\n";
  }
  if (package.cubins.empty()) out += "    {\"\", nullptr, 0},\n";
  out += "};\nconst size_t kCubinCount = " + std::to_string(package.cubins.size()) +
         ";\n\n}  // namespace data\n}  // namespace evo_attention\n";
  return out;
}

void WriteCppPackage(const std::filesystem::path& folder, const DispatchPackage& package) {
  CheckExportFolder(folder, "--cpp", "table.json", "generated_by", "CMakeLists.txt");
  const std::string table = TableText(package);
  Write(folder / "CMakeLists.txt", RuntimeFile("cpp/CMakeLists.txt"));
  Write(folder / "include" / "evo_attention.h", RuntimeFile("cpp/evo_attention.h"));
  Write(folder / "src" / "evo_attention.cc", RuntimeFile("cpp/evo_attention.cc"));
  Write(folder / "src" / "evo_attention_data.cc", CppDataSource(table, package));
  Write(folder / "example" / "example.cc", RuntimeFile("cpp/example.cc"));
  Write(folder / "table.json", table);
}

}  // namespace evo

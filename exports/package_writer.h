#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "exports/dispatch_table.h"
#include "kernel_templates/embedded_files.h"

namespace evo {

// The files of exports/python and exports/cpp compiled into evo (cmake/embed_files.cmake):
// what every exported package holds besides its table and cubins.
std::span<const EmbeddedFile> EmbeddedExportFiles();

// Refuses to write an export into `folder` (what `option` names) unless the folder is new,
// empty, or an earlier export of evo's: its `marker` file, which evo writes last, is a JSON
// object with `key`. With `kind_file`, an earlier export must hold that file too: the Python
// package and the C++ library share their marker, and one written into the other's folder
// would mix the two. An export replaces its own files and never a user's. Throws evo::Error.
void CheckExportFolder(const std::filesystem::path& folder, const std::string& option,
                       const std::string& marker, const std::string& key,
                       const std::string& kind_file = "");

// The folders `--python FOLDER --name NAME` and `--cpp FOLDER` write (either may be empty),
// checked before anything is compiled or written: each new, empty or an earlier export of its
// own kind, and not one folder for both. Throws evo::Error.
void CheckPackageFolders(const std::filesystem::path& python_folder, const std::string& name,
                         const std::filesystem::path& cpp_folder);

// A valid Python package name: letters, digits and underscores, not starting with a digit, and
// not one of Python's keywords (`import class` would not parse).
bool IsPackageName(const std::string& name);

// The modules the exported package imports, with commas: a package of one of these names,
// first on the path, would be imported in its place and fail. Empty when `name` is none.
std::string ShadowedImport(const std::string& name);

// Writes FOLDER/NAME/: the module (__init__.py, _rule.py, _driver.py, _torch_op.py), table.json,
// kernels/*.cubin and a README.md listing the table's entries. `import NAME` with FOLDER on the
// Python path. Every file is written atomically; an existing package of that name that evo
// exported is replaced file by file (the cubins of the earlier export are removed; other files
// there are kept), and any other non-empty FOLDER/NAME refused. Throws evo::Error.
void WritePythonPackage(const std::filesystem::path& folder, const std::string& name,
                        const DispatchPackage& package);

// Writes FOLDER/: CMakeLists.txt, include/evo_attention.h, src/evo_attention.cc,
// src/evo_attention_data.cc (the table's JSON text and the cubins as byte arrays),
// example/example.cc and table.json (the embedded table, for reading). FOLDER is new, empty or
// an earlier export of evo's (CheckExportFolder). Throws evo::Error.
void WriteCppPackage(const std::filesystem::path& folder, const DispatchPackage& package);

// src/evo_attention_data.cc of a package.
std::string CppDataSource(const std::string& table_text, const DispatchPackage& package);

}  // namespace evo

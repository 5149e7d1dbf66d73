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

// A valid Python package name: letters, digits and underscores, not starting with a digit.
bool IsPackageName(const std::string& name);

// Writes FOLDER/NAME/: the module (__init__.py, _rule.py, _driver.py, _torch_op.py), table.json,
// kernels/*.cubin and a README.md listing the table's entries. `import NAME` with FOLDER on the
// Python path. Every file is written atomically; an existing package of that name is replaced
// file by file (stale cubins of an earlier export are removed). Throws evo::Error.
void WritePythonPackage(const std::filesystem::path& folder, const std::string& name,
                        const DispatchPackage& package);

// Writes FOLDER/: CMakeLists.txt, include/evo_attention.h, src/evo_attention.cc,
// src/evo_attention_data.cc (the table's JSON text and the cubins as byte arrays),
// example/example.cc and table.json (the embedded table, for reading). Throws evo::Error.
void WriteCppPackage(const std::filesystem::path& folder, const DispatchPackage& package);

// src/evo_attention_data.cc of a package.
std::string CppDataSource(const std::string& table_text, const DispatchPackage& package);

}  // namespace evo

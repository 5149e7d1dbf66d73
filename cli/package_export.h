#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/command_support.h"

namespace evo::cli {

struct PackageExportOptions {
  std::string db = "runs/evo.db";
  std::vector<int64_t> runs;  // empty: every run of the database with a confirmed best
  std::string python_dir;     // where to write the Python package (empty: none)
  std::string cpp_dir;        // where to write the C++ library (empty: none)
  std::string name = "evo_attention";
  std::string cache_dir = "runs/cache";
};

// `evo export --python DIR` / `--cpp DIR`: the best kernel of each tuned run, compiled (from the
// compile cache where it can), its dispatch table, and the package(s) around them.
int ExportPackages(const GlobalOptions& global, const PackageExportOptions& options);

}  // namespace evo::cli

#include "cli/package_export.h"

#include <fmt/format.h>

#include <iostream>
#include <set>

#include "cli/commands.h"
#include "common/error.h"
#include "evaluator/compile_cache.h"
#include "evaluator/compile_gate.h"
#include "evaluator/nvrtc_compiler.h"
#include "exports/dispatch_table.h"
#include "exports/package_writer.h"
#include "population/store.h"

namespace evo::cli {

int ExportPackages(const GlobalOptions& global, const PackageExportOptions& options) {
  if (!options.python_dir.empty() && !IsPackageName(options.name)) {
    throw Error("--name '" + options.name +
                "' is not a Python package name (letters, digits, underscores)");
  }
  if (!options.python_dir.empty()) {
    if (const std::string imported = ShadowedImport(options.name); !imported.empty()) {
      throw Error("--name '" + options.name + "' is a module the package imports (" + imported +
                  "): a package of that name would be imported in its place; choose another");
    }
  }
  if (!std::filesystem::exists(options.db)) {
    throw Error("there is no database " + options.db + " (evo tune or evo run creates it)");
  }
  // Both destinations before anything is compiled or written: a refusal of the second one
  // must not leave the first written.
  CheckPackageFolders(options.python_dir, options.name, options.cpp_dir);
  PopulationStore store(options.db, PopulationStore::Access::kReadOnly);
  std::vector<RunRecord> runs;
  if (options.runs.empty()) {
    runs = store.Runs();
  } else {
    const std::set<int64_t> wanted(options.runs.begin(), options.runs.end());
    for (int64_t id : wanted) {
      std::optional<RunRecord> run = store.FindRun(id);
      if (!run) throw Error("there is no run " + std::to_string(id) + " in " + options.db);
      runs.push_back(*run);
    }
  }

  const TemplateLibrary library = LoadLibrary(global);
  NvrtcCompiler nvrtc;
  CompileCache cache(options.cache_dir);
  CachingCompiler compiler(nvrtc, cache);
  std::vector<TunedKernel> tuned;
  std::vector<std::string> skipped;
  for (const RunRecord& run : runs) {
    const std::vector<CandidateRecord> elite = store.Elite(run.id);
    if (elite.empty()) {
      // Named when asked for by id; a database's runs without a measured kernel are listed.
      if (!options.runs.empty()) {
        throw Error("run " + std::to_string(run.id) + " has no measured kernel yet");
      }
      skipped.push_back(std::to_string(run.id) + " (no measured kernel yet)");
      continue;
    }
    // A run of another template version is left out of a whole database's export (its kernel
    // cannot be rebuilt as measured), and refused when asked for by id.
    const KernelTemplate* found = nullptr;
    try {
      found = &TemplateOfRun(library, run.spec);
    } catch (const Error& error) {
      if (!options.runs.empty()) throw Error("run " + std::to_string(run.id) + ": " + error.what());
      skipped.push_back(std::to_string(run.id) + " (" + error.what() + ")");
      continue;
    }
    const KernelTemplate& kernel_template = *found;
    TunedKernel t;
    t.kernel_template = &kernel_template;
    t.run = run;
    t.best = elite.front();
    // The cubin is rebuilt from the stored configuration: NVRTC is deterministic, and the
    // compile cache usually has it.
    const CompileOutcome compiled =
        RunCompileGate(kernel_template, t.best.proposal.genome, run.spec.problem,
                       ArchByName(run.spec.arch), compiler, {true});
    if (!compiled.compiled.ok) {
      throw Error("candidate " + std::to_string(t.best.id) + " of run " + std::to_string(run.id) +
                  " does not compile: " + compiled.reason);
    }
    t.compiled = compiled.compiled;
    tuned.push_back(std::move(t));
  }
  for (const std::string& run : skipped) std::cerr << "evo: left out run " << run << "\n";
  if (tuned.empty()) {
    throw Error(options.db + " holds no run with a measured kernel that this evo can export" +
                (skipped.empty() ? "" : " (the runs left out above say why)"));
  }

  const DispatchPackage package =
      BuildDispatchPackage(tuned, std::string("evo ") + EVO_VERSION + " from " + options.db);
  const size_t entries = package.table["entries"].size();
  const size_t kernels = package.table["kernels"].size();
  if (!options.python_dir.empty()) {
    WritePythonPackage(options.python_dir, options.name, package);
    std::cout << fmt::format(
        "wrote the Python package {}/{}: {} entries, {} kernels (import {} with {} on the "
        "Python path)\n",
        options.python_dir, options.name, entries, kernels, options.name, options.python_dir);
  }
  if (!options.cpp_dir.empty()) {
    WriteCppPackage(options.cpp_dir, package);
    std::cout << fmt::format(
        "wrote the C++ library {}: {} entries, {} kernels (cmake -S {} -B {}/build && cmake "
        "--build {}/build)\n",
        options.cpp_dir, entries, kernels, options.cpp_dir, options.cpp_dir, options.cpp_dir);
  }
  return kExitOk;
}

}  // namespace evo::cli

#include "evaluator/reference_cache.h"

#include "common/sha256.h"

namespace evo {

std::string ReferenceKey(const KernelTemplate& kernel_template, const Problem& check_problem,
                         size_t problem_index, int seed, const ArchInfo& arch) {
  const Manifest& manifest = kernel_template.manifest;
  std::string key = manifest.name + "\n" + kernel_template.source_hash + "\n" + arch.name + "\n" +
                    std::to_string(problem_index) + "\n" + std::to_string(seed) + "\n";
  for (const auto& [name, value] : check_problem) key += name + "=" + std::to_string(value) + ";";
  key += "\n";
  // The reference reads problem parameters and the arch's limits only, never knobs.
  const Bindings bindings = CompileBindings(manifest, DefaultGenome(manifest), check_problem, arch);
  for (const KernelArgSpec& arg : manifest.reference.args) {
    if (!arg.is_tensor() || !arg.PresentFor(bindings)) continue;
    key += arg.name + ":" + arg.dtype + "[";
    for (const Expression& dim : arg.shape) key += std::to_string(dim.Evaluate(bindings)) + ",";
    key += "]";
    if (arg.uniform) {
      key += "U(" + std::to_string(arg.uniform->first) + "," + std::to_string(arg.uniform->second) +
             ")";
    }
    key += ";";
  }
  return Sha256Hex(key);
}

}  // namespace evo

#include "kernel_templates/configuration.h"

#include <cctype>
#include <set>

#include "common/error.h"
#include "common/sha256.h"

namespace evo {

Bindings FixedBindings(const Problem& problem, const ArchInfo& arch) {
  Bindings bindings(problem.begin(), problem.end());
  bindings["SM"] = arch.sm;
  bindings["MAX_SMEM_PER_BLOCK"] = arch.max_smem_per_block_optin;
  bindings["MAX_THREADS_PER_BLOCK"] = arch.max_threads_per_block;
  bindings["REGS_PER_BLOCK"] = arch.regs_per_block;
  return bindings;
}

Bindings CompileBindings(const Manifest& manifest, const Genome& genome, const Problem& problem,
                         const ArchInfo& arch) {
  Bindings bindings(genome.begin(), genome.end());
  // No name is both a knob and a fixed one: the manifest reader refuses a name that is taken.
  const Bindings fixed = FixedBindings(problem, arch);
  bindings.insert(fixed.begin(), fixed.end());
  for (const DerivedSpec& derived : manifest.derived) {
    try {
      bindings[derived.name] = derived.expr.Evaluate(bindings);
    } catch (const Error& error) {
      throw Error("derived value " + derived.name + " of " + manifest.name +
                  " cannot be evaluated for this configuration: " + error.what());
    }
  }
  return bindings;
}

std::optional<ConstraintViolation> FirstViolatedConstraint(const Manifest& manifest,
                                                           const Bindings& bindings) {
  for (const ConstraintSpec& constraint : manifest.constraints) {
    try {
      if (constraint.expr.Evaluate(bindings) != 0) continue;
      return ConstraintViolation{constraint.name, constraint.expr.text(), constraint.doc, ""};
    } catch (const Error& error) {
      return ConstraintViolation{constraint.name, constraint.expr.text(), constraint.doc,
                                 error.what()};
    }
  }
  return std::nullopt;
}

std::string DtypeMacro(std::string_view dtype) {
  std::string macro = "EVO_DTYPE_";
  for (const char c : dtype)
    macro += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return macro;
}

std::string InstantiateSource(const KernelTemplate& kernel_template, const KernelSpec& kernel,
                              const Genome* genome, const Problem& problem) {
  const Manifest& manifest = kernel_template.manifest;
  std::string source = "// evo: " + manifest.name + " v" + std::to_string(manifest.version) + " (" +
                       kernel_template.source_hash.substr(0, 12) + ")\n";
  if (genome != nullptr) {
    for (const KnobSpec& knob : manifest.knobs) {
      source += "#define " + knob.name + " " + std::to_string(genome->at(knob.name)) + "\n";
    }
  }
  for (const ProblemParamSpec& param : manifest.problem) {
    if (!param.compile_time()) continue;
    source += "#define " + param.define + " " + std::to_string(problem.at(param.name)) + "\n";
  }
  const Bindings problem_bindings(problem.begin(), problem.end());
  // A candidate's kernels are entries of one source: the macros of all their arguments.
  std::vector<const KernelSpec*> kernels = {&kernel};
  if (genome != nullptr) {
    kernels.clear();
    for (const KernelSpec& candidate_kernel : manifest.kernels)
      kernels.push_back(&candidate_kernel);
  }
  std::set<std::string> defined;
  for (const KernelSpec* spec : kernels) {
    for (const KernelArgSpec& arg : spec->args) {
      if (arg.define.empty() || !arg.PresentFor(problem_bindings)) continue;
      if (!defined.insert(arg.define).second) continue;
      source += "#define " + arg.define + " " + DtypeMacro(arg.dtype) + "\n";
    }
  }
  source += "#line 1 \"" + kernel.source_path + "\"\n";
  source += kernel.source;
  return source;
}

std::string ConfigurationId(const KernelTemplate& kernel_template, const Genome& genome,
                            const Problem& problem, std::string_view arch) {
  return ConfigurationId(kernel_template.manifest.name, kernel_template.source_hash, genome,
                         problem, arch);
}

std::string ConfigurationId(std::string_view template_name, std::string_view template_hash,
                            const Genome& genome, const Problem& problem, std::string_view arch) {
  std::string key;
  key.append(template_name).append("\n").append(template_hash).append("\n");
  for (const auto& [name, value] : genome) key += name + "=" + std::to_string(value) + ";";
  key += "\n";
  for (const auto& [name, value] : problem) key += name + "=" + std::to_string(value) + ";";
  key.append("\n").append(arch);
  return Sha256Hex(key);
}

}  // namespace evo

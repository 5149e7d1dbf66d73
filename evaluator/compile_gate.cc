#include "evaluator/compile_gate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "evaluator/kernel_arguments.h"
#include "kernel_templates/tensor_map.h"

namespace evo {

int64_t RegistersPerBlock(int registers_per_thread, int64_t threads_per_block) {
  constexpr int64_t kWarpSize = 32;
  constexpr int64_t kAllocationUnit = 256;
  const int64_t per_warp =
      (registers_per_thread * kWarpSize + kAllocationUnit - 1) / kAllocationUnit * kAllocationUnit;
  return per_warp * ((threads_per_block + kWarpSize - 1) / kWarpSize);
}

void RequireSupportedArch(const Manifest& manifest, const ArchInfo& arch) {
  const bool too_new = manifest.max_sm > 0 && arch.sm > manifest.max_sm;
  if (arch.sm < manifest.min_sm || too_new) {
    const std::string supported =
        manifest.max_sm == 0 ? "sm_" + std::to_string(manifest.min_sm) + " or newer"
        : manifest.max_sm == manifest.min_sm
            ? "sm_" + std::to_string(manifest.min_sm)
            : "sm_" + std::to_string(manifest.min_sm) + " to sm_" + std::to_string(manifest.max_sm);
    throw Error("template " + manifest.name + " needs " + supported + ", not " + arch.name);
  }
  CompileTarget(arch, manifest.arch_specific);  // throws when evo knows no "a" variant
}

CompileRequest TemplateCompileRequest(const KernelTemplate& kernel_template,
                                      const KernelSpec& kernel, const Genome* genome,
                                      const Problem& problem, const std::string& target) {
  CompileRequest request{InstantiateSource(kernel_template, kernel, genome, problem),
                         kernel.source_path,
                         target,
                         {},
                         {}};
  for (const HeaderFile& header : kernel_template.headers) {
    request.headers.emplace_back(header.name, header.content);
  }
  return request;
}

CompileOutcome RunCompileGate(const KernelTemplate& kernel_template, const Genome& genome,
                              const Problem& problem, const ArchInfo& arch, Compiler& compiler,
                              const CompileGateOptions& options) {
  const Manifest& manifest = kernel_template.manifest;
  CompileOutcome outcome;
  Bindings bindings;
  try {
    bindings = CompileBindings(manifest, genome, problem, arch);
  } catch (const Error& error) {
    // The template's own expressions cannot describe this configuration: not one to run.
    outcome.status = Status::kInvalid;
    outcome.reason = error.what();
    return outcome;
  }
  if (auto violation = FirstViolatedConstraint(manifest, bindings)) {
    outcome.status = Status::kInvalid;
    outcome.reason = "constraint " + violation->name + " (" + violation->expr + ") " +
                     (violation->failure.empty()
                          ? "is violated"
                          : "cannot be evaluated for this configuration: " + violation->failure);
    outcome.violation = std::move(violation);
    return outcome;
  }
  // A tensor map the accelerator cannot take for this configuration is refused before any
  // compile, like a broken constraint.
  const std::vector<const KernelSpec*> launched = LaunchedKernels(manifest, bindings);
  for (const KernelSpec* kernel : launched) {
    for (const KernelArgSpec& arg : kernel->args) {
      if (!arg.map || !arg.PresentFor(bindings)) continue;
      try {
        DescribeTensorMap(arg, *kernel, bindings);
      } catch (const Error& error) {
        outcome.status = Status::kInvalid;
        outcome.reason = error.what();
        return outcome;
      }
    }
  }
  // Each launched kernel's block and dynamic shared memory, evaluated before any compile: a
  // launch the template's expressions cannot describe (a division by zero, a block of no
  // threads, negative shared memory) is not one to compile, and would fail only on a GPU.
  struct Launch {
    int64_t threads = 1;
    int64_t dynamic_smem = 0;
  };
  std::vector<Launch> launch;  // launched[i]'s; the first kernel always runs
  for (const KernelSpec* kernel : launched) {
    try {
      int64_t threads = 1;
      for (const Expression& dim : kernel->block) {
        const int64_t extent = dim.Evaluate(bindings);
        if (extent < 1)
          throw Error("block dimension " + dim.text() + " is " + std::to_string(extent));
        threads *= extent;
      }
      const int64_t dynamic_smem = kernel->dynamic_smem.Evaluate(bindings);
      if (dynamic_smem < 0) {
        throw Error("dynamic_smem " + kernel->dynamic_smem.text() + " is " +
                    std::to_string(dynamic_smem));
      }
      launch.push_back({threads, dynamic_smem});
    } catch (const Error& error) {
      outcome.status = Status::kInvalid;
      outcome.reason = "the launch of " + kernel->entry +
                       " cannot be made for this configuration: " + error.what();
      return outcome;
    }
  }
  outcome.threads_per_block = launch.front().threads;
  outcome.dynamic_smem = launch.front().dynamic_smem;
  outcome.target = CompileTarget(arch, manifest.arch_specific).name;
  CompileRequest request = TemplateCompileRequest(kernel_template, manifest.main_kernel(), &genome,
                                                  problem, outcome.target);
  outcome.source = request.source;
  outcome.compiled = compiler.Compile(request);

  const CompileResult& compiled = outcome.compiled;
  if (!compiled.ok) {
    // ptxas fails without an error line when static shared memory is over its limit; the
    // report still carries the figure.
    for (const KernelResources& kernel : compiled.kernels) {
      if (kernel.smem_static > arch.max_static_smem_per_block) {
        outcome.status = Status::kResourceReject;
        outcome.reason = kernel.function + " uses " + std::to_string(kernel.smem_static) +
                         " bytes of static shared memory; the limit is " +
                         std::to_string(arch.max_static_smem_per_block);
        outcome.resources = kernel;
        return outcome;
      }
    }
    outcome.status = Status::kCompileError;
    outcome.reason = "compilation failed (see the log)";
    return outcome;
  }
  // Every kernel of the call must fit; the main kernel's figures are the candidate's.
  outcome.status = Status::kResourceReject;
  for (size_t i = 0; i < launched.size(); ++i) {
    const KernelSpec* kernel = launched[i];
    const KernelResources* entry = FindKernel(compiled.kernels, kernel->entry);
    if (entry == nullptr) {
      outcome.status = Status::kCompileError;
      outcome.reason = "the ptxas report has no entry function " + kernel->entry +
                       " (is it extern \"C\" __global__?)";
      return outcome;
    }
    if (kernel == launched.front()) outcome.resources = *entry;
    const auto [threads, dynamic_smem] = launch[i];
    const int64_t smem_total = entry->smem_static + dynamic_smem;
    const int64_t registers = RegistersPerBlock(entry->registers, threads);
    // Names the kernel where a template has several.
    const std::string which =
        launched.size() > 1 || manifest.kernels.size() > 1 ? kernel->entry + ": " : std::string();
    if (threads > arch.max_threads_per_block) {
      outcome.reason = which + std::to_string(threads) + " threads per block; the limit is " +
                       std::to_string(arch.max_threads_per_block);
    } else if (smem_total > arch.max_smem_per_block_optin) {
      outcome.reason = which + std::to_string(smem_total) + " bytes of shared memory (" +
                       std::to_string(entry->smem_static) + " static + " +
                       std::to_string(dynamic_smem) + " dynamic); the limit is " +
                       std::to_string(arch.max_smem_per_block_optin);
    } else if (registers > arch.regs_per_block) {
      outcome.reason = which + std::to_string(entry->registers) + " registers x " +
                       std::to_string(threads) + " threads need " + std::to_string(registers) +
                       " registers; a block has " + std::to_string(arch.regs_per_block);
    } else if (entry->spills() && !options.allow_spills) {
      outcome.reason = which + "spills registers: " + std::to_string(entry->spill_stores) +
                       " bytes stored, " + std::to_string(entry->spill_loads) + " bytes loaded";
    }
    if (!outcome.reason.empty()) return outcome;
  }
  outcome.status = Status::kCompiled;
  return outcome;
}

}  // namespace evo

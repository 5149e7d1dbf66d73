#include "evaluator/compile_gate.h"

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "evaluator/kernel_arguments.h"
#include "kernel_templates/genome.h"
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

namespace {

// What one launch of a kernel takes, as its expressions give it for a configuration.
struct LaunchFigures {
  int64_t threads = 1;
  int64_t dynamic_smem = 0;
};

bool NeedsDevice(const Expression& expression, const Bindings& bindings) {
  const std::set<std::string> names = Expression::Parse(expression.Fold(bindings)).Identifiers();
  return std::any_of(kLaunchBindings.begin(), kLaunchBindings.end(),
                     [&](std::string_view name) { return names.contains(std::string(name)); });
}

// Evaluates everything of a launch that needs no device: the block, the dynamic shared memory,
// the grid where it does not read NUM_SMS or CTAS_PER_SM, the tensors' extents and the scalars.
// Throws evo::Error naming the expression where a launch cannot be made from them (a division by
// zero, a block of no threads, a grid over CUDA's limits, an i32 out of range): such a launch
// would fail only on a GPU, or, exported, in a user's program.
LaunchFigures EvaluateLaunch(const KernelSpec& kernel, const Bindings& bindings) {
  static constexpr std::array<const char*, 3> kAxis = {"x", "y", "z"};
  auto check = [](const char* what, int axis, const Expression& dim, int64_t value, int64_t limit) {
    if (value >= 1 && value <= limit) return;
    throw Error(std::string(what) + "." + kAxis[axis] + " " + dim.text() + " is " +
                std::to_string(value) + "; CUDA takes 1 to " + std::to_string(limit));
  };
  LaunchFigures figures;
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t extent = kernel.block[axis].Evaluate(bindings);
    // Over 1024 in x or y is too many threads, which the resource check names with the arch's
    // limit; z has a limit of its own.
    check("block", axis, kernel.block[axis], extent,
          axis < 2 ? std::max(extent, kMaxBlockDim[axis]) : kMaxBlockDim[axis]);
    figures.threads *= extent;
  }
  figures.dynamic_smem = kernel.dynamic_smem.Evaluate(bindings);
  if (figures.dynamic_smem < 0) {
    throw Error("dynamic_smem " + kernel.dynamic_smem.text() + " is " +
                std::to_string(figures.dynamic_smem));
  }
  std::array<int64_t, 3> cluster{};
  int64_t cluster_ctas = 1;
  for (int axis = 0; axis < 3; ++axis) {
    cluster[axis] = kernel.cluster[axis].Evaluate(bindings);
    check("cluster", axis, kernel.cluster[axis], cluster[axis], kMaxClusterCtas);
    cluster_ctas *= cluster[axis];
  }
  if (cluster_ctas > kMaxClusterCtas) {
    throw Error("a cluster of " + std::to_string(cluster_ctas) + " CTAs; CUDA takes up to " +
                std::to_string(kMaxClusterCtas) + " without the non-portable opt-in");
  }
  if (cluster_ctas > 1 && bindings.at("SM") < 90) {
    throw Error("a cluster of " + std::to_string(cluster_ctas) + " CTAs on sm_" +
                std::to_string(bindings.at("SM")) + "; clusters need sm_90 or later");
  }
  for (int axis = 0; axis < 3; ++axis) {
    const Expression& dim = kernel.grid[axis];
    if (NeedsDevice(dim, bindings)) continue;  // checked at launch, where the device is known
    const int64_t extent = dim.Evaluate(bindings);
    check("grid", axis, dim, extent, kMaxGridDim[axis]);
    if (extent % cluster[axis] != 0) {
      throw Error(std::string("grid.") + kAxis[axis] + " " + dim.text() + " is " +
                  std::to_string(extent) + ", not a multiple of the cluster's " +
                  std::to_string(cluster[axis]));
    }
  }
  for (const KernelArgSpec& arg : kernel.args) {
    if (!arg.PresentFor(bindings)) continue;
    if (arg.kind == KernelArgSpec::Kind::kScalar) {
      const int64_t value = arg.value->Evaluate(bindings);
      if (arg.dtype == "i32" && (value < std::numeric_limits<int32_t>::min() ||
                                 value > std::numeric_limits<int32_t>::max())) {
        throw Error("argument " + arg.name + " = " + arg.value->text() + " is " +
                    std::to_string(value) + ", which does not fit an i32");
      }
    } else if (arg.is_tensor()) {
      for (const Expression& dim : arg.shape) {
        if (arg.kind == KernelArgSpec::Kind::kScratch && NeedsDevice(dim, bindings)) continue;
        const int64_t extent = dim.Evaluate(bindings);
        if (extent < 0) {
          throw Error("tensor " + arg.name + " has extent " + dim.text() + " = " +
                      std::to_string(extent));
        }
      }
    }
  }
  return figures;
}

// Why one compiled kernel of a call cannot be launched on `arch` with `launch`, or nothing.
// `which` prefixes the reason where a template has several kernels.
std::string OverLimits(const KernelResources& entry, const LaunchFigures& launch,
                       const ArchInfo& arch, const CompileGateOptions& options,
                       const std::string& which) {
  const int64_t smem_total = entry.smem_static + launch.dynamic_smem;
  const int64_t registers = RegistersPerBlock(entry.registers, launch.threads);
  if (launch.threads > arch.max_threads_per_block) {
    return which + std::to_string(launch.threads) + " threads per block; the limit is " +
           std::to_string(arch.max_threads_per_block);
  }
  if (smem_total > arch.max_smem_per_block_optin) {
    return which + std::to_string(smem_total) + " bytes of shared memory (" +
           std::to_string(entry.smem_static) + " static + " + std::to_string(launch.dynamic_smem) +
           " dynamic); the limit is " + std::to_string(arch.max_smem_per_block_optin);
  }
  if (registers > arch.regs_per_block) {
    return which + std::to_string(entry.registers) + " registers x " +
           std::to_string(launch.threads) + " threads need " + std::to_string(registers) +
           " registers; a block has " + std::to_string(arch.regs_per_block);
  }
  if (entry.spills() && !options.allow_spills) {
    return which + "spills registers: " + std::to_string(entry.spill_stores) + " bytes stored, " +
           std::to_string(entry.spill_loads) + " bytes loaded";
  }
  return {};
}

// A failed compile's status: ptxas fails without an error line when static shared memory is over
// its limit, and its report still carries the figure.
void DescribeFailedCompile(const ArchInfo& arch, CompileOutcome& outcome) {
  for (const KernelResources& kernel : outcome.compiled.kernels) {
    if (kernel.smem_static > arch.max_static_smem_per_block) {
      outcome.status = Status::kResourceReject;
      outcome.reason = kernel.function + " uses " + std::to_string(kernel.smem_static) +
                       " bytes of static shared memory; the limit is " +
                       std::to_string(arch.max_static_smem_per_block);
      outcome.resources = kernel;
      return;
    }
  }
  outcome.status = Status::kCompileError;
  outcome.reason = "compilation failed (see the log)";
}

std::string MissingEntry(const std::string& entry) {
  return "the ptxas report has no entry function " + entry + " (is it extern \"C\" __global__?)";
}

// Why the call's launches cannot be made for this configuration, or nothing, with each
// kernel's figures in `figures`: a tensor map the accelerator cannot take, or a launch
// EvaluateLaunch refuses. Both are found before any compile, like a broken constraint.
std::optional<std::string> CheckLaunches(const std::vector<const KernelSpec*>& launched,
                                         const Bindings& bindings,
                                         std::vector<LaunchFigures>* figures) {
  for (const KernelSpec* kernel : launched) {
    for (const KernelArgSpec& arg : kernel->args) {
      if (!arg.map || !arg.PresentFor(bindings)) continue;
      try {
        DescribeTensorMap(arg, *kernel, bindings);
      } catch (const Error& error) {
        return error.what();
      }
    }
  }
  for (const KernelSpec* kernel : launched) {
    try {
      figures->push_back(EvaluateLaunch(*kernel, bindings));
    } catch (const Error& error) {
      return "the launch of " + kernel->entry +
             " cannot be made for this configuration: " + error.what();
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> LaunchRefusal(const Manifest& manifest, const Genome& genome,
                                         const Problem& problem, const ArchInfo& arch) {
  try {
    const Bindings bindings = CompileBindings(manifest, genome, problem, arch);
    std::vector<LaunchFigures> figures;
    return CheckLaunches(LaunchedKernels(manifest, bindings), bindings, &figures);
  } catch (const Error& error) {
    return error.what();
  }
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
  const std::vector<const KernelSpec*> launched = LaunchedKernels(manifest, bindings);
  std::vector<LaunchFigures> launch;  // launched[i]'s; the first kernel always runs
  if (auto refusal = CheckLaunches(launched, bindings, &launch)) {
    outcome.status = Status::kInvalid;
    outcome.reason = *refusal;
    return outcome;
  }
  outcome.threads_per_block = launch.front().threads;
  outcome.dynamic_smem = launch.front().dynamic_smem;
  outcome.target = CompileTarget(arch, manifest.arch_specific).name;
  CompileRequest request = TemplateCompileRequest(kernel_template, manifest.main_kernel(), &genome,
                                                  problem, outcome.target);
  outcome.source = request.source;
  outcome.compiled = compiler.Compile(request);
  if (!outcome.compiled.ok) {
    DescribeFailedCompile(arch, outcome);
    return outcome;
  }
  // Every kernel of the call must fit; the main kernel's figures are the candidate's.
  outcome.status = Status::kResourceReject;
  for (size_t i = 0; i < launched.size(); ++i) {
    const KernelSpec* kernel = launched[i];
    const KernelResources* entry = FindKernel(outcome.compiled.kernels, kernel->entry);
    if (entry == nullptr) {
      outcome.status = Status::kCompileError;
      outcome.reason = MissingEntry(kernel->entry);
      return outcome;
    }
    if (kernel == launched.front()) outcome.resources = *entry;
    // Names the kernel where a template has several.
    const std::string which =
        launched.size() > 1 || manifest.kernels.size() > 1 ? kernel->entry + ": " : std::string();
    outcome.reason = OverLimits(*entry, launch[i], arch, options, which);
    if (!outcome.reason.empty()) return outcome;
  }
  outcome.status = Status::kCompiled;
  return outcome;
}

CompileOutcome CompileReference(const KernelTemplate& kernel_template, const Problem& problem,
                                const ArchInfo& arch, Compiler& compiler) {
  const Manifest& manifest = kernel_template.manifest;
  const KernelSpec& reference = manifest.reference;
  CompileOutcome outcome;
  LaunchFigures launch;
  try {
    // The reference reads problem parameters and the arch only; the knobs' defaults bind the
    // names a template's derived values need.
    const Bindings bindings = CompileBindings(manifest, DefaultGenome(manifest), problem, arch);
    launch = EvaluateLaunch(reference, bindings);
  } catch (const Error& error) {
    outcome.status = Status::kInvalid;
    outcome.reason =
        "the launch of " + reference.entry + " cannot be made for this problem: " + error.what();
    return outcome;
  }
  outcome.threads_per_block = launch.threads;
  outcome.dynamic_smem = launch.dynamic_smem;
  // The gates compile the reference for the arch itself, never its "a" variant.
  outcome.target = arch.name;
  CompileRequest request =
      TemplateCompileRequest(kernel_template, reference, nullptr, problem, outcome.target);
  outcome.source = request.source;
  outcome.compiled = compiler.Compile(request);
  if (!outcome.compiled.ok) {
    DescribeFailedCompile(arch, outcome);
    return outcome;
  }
  const KernelResources* entry = FindKernel(outcome.compiled.kernels, reference.entry);
  if (entry == nullptr) {
    outcome.status = Status::kCompileError;
    outcome.reason = MissingEntry(reference.entry);
    return outcome;
  }
  outcome.resources = *entry;
  // A reference may spill: it is measured once per task, for its outputs, not its speed.
  outcome.reason = OverLimits(*entry, launch, arch, {true}, "");
  outcome.status = outcome.reason.empty() ? Status::kCompiled : Status::kResourceReject;
  return outcome;
}

}  // namespace evo

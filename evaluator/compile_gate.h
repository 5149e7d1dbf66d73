#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "evaluator/compiler.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/configuration.h"

namespace evo {

struct CompileGateOptions {
  bool allow_spills = false;
};

// Gate 1. Status is kInvalid, kCompileError, kResourceReject or kCompiled; `reason` says why in
// one line for every status but kCompiled.
struct CompileOutcome {
  Status status = Status::kInvalid;
  std::string reason;
  std::optional<ConstraintViolation> violation;
  std::string source;  // the instantiated source (empty when a constraint rejected it)
  std::string target;  // what NVRTC compiled for: the arch, or its "a" variant
  CompileResult compiled;
  std::optional<KernelResources> resources;  // the entry function's
  int64_t threads_per_block = 0;
  int64_t dynamic_smem = 0;
};

// What NVRTC compiles for one kernel of a template (the candidate with `genome`, or the
// reference with none) on `target`: the instantiated source with the template's headers.
CompileRequest TemplateCompileRequest(const KernelTemplate& kernel_template,
                                      const KernelSpec& kernel, const Genome* genome,
                                      const Problem& problem, const std::string& target);

CompileOutcome RunCompileGate(const KernelTemplate& kernel_template, const Genome& genome,
                              const Problem& problem, const ArchInfo& arch, Compiler& compiler,
                              const CompileGateOptions& options);

// Why a configuration that keeps the constraints still cannot be launched on `problem` (a tensor
// map the accelerator cannot take, a launch past CUDA's limits, a tensor of negative extent, an
// i32 scalar out of range), as the compile gate finds before compiling; nothing where it can.
std::optional<std::string> LaunchRefusal(const Manifest& manifest, const Genome& genome,
                                         const Problem& problem, const ArchInfo& arch);

// The reference kernel of the template on `problem`, through the same checks as a candidate
// (its launch's expressions, the compile, the entry function, the arch's limits; spills are
// allowed). The GPU gates need it to compile: `evo compile` checks it, so that a broken reference
// is found before a run starts on a GPU.
CompileOutcome CompileReference(const KernelTemplate& kernel_template, const Problem& problem,
                                const ArchInfo& arch, Compiler& compiler);

// Throws evo::Error, naming the arches the template supports, when it cannot run on `arch`
// (below min_sm, above max_sm, or arch-specific without a known "a" variant of `arch`).
void RequireSupportedArch(const Manifest& manifest, const ArchInfo& arch);

// Registers a block needs: the hardware hands them out per warp, in units of 256.
int64_t RegistersPerBlock(int registers_per_thread, int64_t threads_per_block);

}  // namespace evo

#pragma once

#include <string>

#include "evaluator/compiler.h"

namespace evo::cli {

// Compiles a small kernel for `target` ("sm_90", or "sm_90a", where the kernel also issues a
// wgmma fence, an instruction only the arch-specific target has); throws evo::Error with
// NVRTC's log when it does not compile. Returns the cubin.
std::string CompileProbe(Compiler& compiler, const std::string& target);

// Loads that cubin on GPU `ordinal`, runs one block of 128 threads and checks what each wrote;
// throws evo::Error (or CudaError) saying what failed.
void RunProbe(int ordinal, const std::string& cubin);

}  // namespace evo::cli

#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evaluator/compiler.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"

namespace evo {

// The format the exported evaluators (Python's _rule.py, C++'s evo_attention.cc) read.
inline constexpr const char* kDispatchTableFormat = "evo-dispatch-1";

// The problem parameters an attention call gives at run time, in the table's order.
inline constexpr const char* kRuntimeParams[] = {"B", "H", "H_kv", "S_q", "S_kv"};

// How one compiled kernel is launched for any run-time sizes: every expression of its launches
// (grids, scalar values, tensor shapes, tensor-map boxes, scratch sizes) folded over what the
// compile fixed (knobs, compile-time problem parameters such as D and CAUSAL, the arch's
// limits and the derived values those determine), so that only B, H, H_kv, S_q, S_kv, the
// derived values that follow them and the device's NUM_SMS / CTAS_PER_SM remain (in grids; NUM_SMS
// also in scratch shapes, which then carry "shape_bindings" saying what it is). Also the
// kernel's compile-time key (D, causal, the dtypes of q, k, v and out), its constraints on the
// run-time sizes and which argument is which tensor of attention(q, k, v).
//
// Throws evo::Error when the template cannot be called as attention(q, k, v): an argument the
// call has no tensor for, block or shared memory that depend on run-time sizes.
nlohmann::json KernelPlan(const KernelTemplate& kernel_template, const Genome& genome,
                          const Problem& tuned_problem, const ArchInfo& arch,
                          const CompileResult& compiled);

// One tuned run's best kernel: the run, its elite's first and that candidate's compile.
struct TunedKernel {
  const KernelTemplate* kernel_template = nullptr;
  RunRecord run;
  CandidateRecord best;
  CompileResult compiled;
};

struct DispatchPackage {
  nlohmann::json table;
  // (path relative to the package, cubin bytes), one per kernel of the table.
  std::vector<std::pair<std::string, std::string>> cubins;
};

// The dispatch table of a set of tuned runs: for every compile-time key, arch measured on and
// tuned shape the fastest kernel (by its confirmed score; several templates or runs may have
// tuned the same case), entries sorted by key, arch and shape (the order the rule breaks ties by),
// identical kernels (one configuration tuned at several shapes) stored once. Throws evo::Error
// when `tuned` is empty or a kernel cannot be planned.
DispatchPackage BuildDispatchPackage(const std::vector<TunedKernel>& tuned,
                                     const std::string& generated_by);

}  // namespace evo

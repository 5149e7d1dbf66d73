#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernel_templates/expression.h"

namespace evo {

// A tunable parameter of a template; it reaches the source as `#define NAME value`.
struct KnobSpec {
  std::string name;
  std::vector<int64_t> values;  // the domain, in the order the manifest gives it
  int64_t default_value = 0;
  std::string doc;
};

// A parameter of the problem the kernel solves (B, H, S_q, ...). Those with a define are
// compile-time (the source is specialized on them) and have a finite domain.
struct ProblemParamSpec {
  std::string name;
  std::vector<int64_t> values;  // empty: any integer >= min
  int64_t min = 1;
  int64_t default_value = 1;
  // A default that follows earlier parameters (H_kv defaults to H): where the parameter is not
  // given, it takes this expression's value over the others, not default_value.
  std::optional<Expression> default_expr;
  // What must hold between this parameter and earlier ones (H % H_kv == 0); a problem where it
  // does not is refused with check_doc.
  std::optional<Expression> check;
  std::string check_doc;
  std::string define;  // empty: a run-time parameter only
  std::string doc;

  bool compile_time() const { return !define.empty(); }
};

// A value computed from knobs, problem and arch, usable by later expressions.
struct DerivedSpec {
  std::string name;
  Expression expr;
};

struct ConstraintSpec {
  std::string name;
  Expression expr;
  std::string doc;
};

// A descriptor for the Hopper tensor memory accelerator (cp.async.bulk.tensor) of one tensor
// argument of the same kernel: the worker builds it with cuTensorMapEncodeTiled from that
// tensor (its dims and strides from the tensor's shape, innermost first) and passes it by value
// (a __grid_constant__ parameter of 128 bytes); launch.json describes it completely.
struct TensorMapSpec {
  std::string tensor;                 // the tensor argument it describes
  std::vector<Expression> box;        // the copy's extent per dimension, innermost first
  std::string swizzle = "128B";       // none, 32B, 64B, 128B
  std::string interleave = "none";    // none, 16B, 32B
  std::string l2_promotion = "128B";  // none, 64B, 128B, 256B
  std::string fill = "zero";          // what elements outside the tensor read as: zero or nan
};

// When the gates (and an exported launch sequence) zero a scratch tensor.
enum class ScratchZero {
  kNever,     // its contents on entry are whatever the last call left
  kOnce,      // zeroed when allocated; every call must leave it zero again (self-resetting
              // counters), which the correctness gate checks
  kEachCall,  // zeroed before every call, as part of the call (timed with it)
};
// As a manifest writes it: "never", "once" or "each_call".
const char* ScratchZeroName(ScratchZero zero);

// Rows of an input the correctness gate scales up at each seed but the last (whose plain N(0,1)
// inputs the timing reads): each row of the innermost extent is chosen with probability 1/every and
// multiplied by `scale`. Keys of attention made this way give some queries scores far above those
// of the tiles before them, which a kernel that rescales its running sums wrongly, or not at all,
// gets wrong.
struct OutlierRows {
  int64_t every = 0;
  double scale = 1;
  bool operator==(const OutlierRows&) const = default;
};

struct KernelArgSpec {
  // Scratch: device memory the kernels of one call share (partial outputs, counters), neither
  // read from the user nor compared, sized by expressions like any tensor.
  enum class Kind { kInput, kOutput, kScalar, kTensorMap, kScratch };
  std::string name;
  Kind kind = Kind::kInput;
  std::string dtype;                 // f16, f32, fp8e4m3, i32, ...
  std::vector<Expression> shape;     // tensors
  std::optional<Expression> value;   // scalars
  std::optional<TensorMapSpec> map;  // tensor maps
  // Inputs the gates fill uniformly in [lo, hi) instead of with N(0,1) (e.g. positive scales).
  std::optional<std::pair<double, double>> uniform;
  std::optional<OutlierRows> outlier_rows;  // candidate kernels' normally filled inputs only
  // The argument exists only where this is non-zero. It reads compile-time problem parameters
  // only, which the kernel's signature follows with #if (Q stored as fp16 or as e4m3 + Q_scale).
  std::optional<Expression> when;
  // Tensors only: a macro that instantiation defines, where the argument is present, as its
  // dtype (`#define REF_Q EVO_DTYPE_F16`, the codes of evo/dtype.cuh), so that one shared kernel
  // (the attention reference) serves templates whose arguments differ in dtype, or in whether
  // they exist at all (`#ifdef REF_Q_SCALE`).
  std::string define;
  ScratchZero zero = ScratchZero::kNever;  // scratch only

  bool PresentFor(const Bindings& bindings) const { return !when || when->Evaluate(bindings) != 0; }
  // The kind as a manifest writes it: "input", "output", "scratch", "scalar" or "tensor_map".
  static const char* KindName(Kind kind);
  bool is_tensor() const {
    return kind == Kind::kInput || kind == Kind::kOutput || kind == Kind::kScratch;
  }
};

// One kernel of a template (a candidate's or the reference): its source and how to launch it.
struct KernelSpec {
  // Relative to the template's folder, or a shared source of the device library ("evo/...").
  std::string source_path;
  std::string source;
  std::string entry;
  std::array<Expression, 3> grid;
  std::array<Expression, 3> block;
  // Thread-block cluster extents (sm_90 and later), over knobs and problem; "1" where the
  // manifest names none, which launches without clusters. The grid must be a multiple of them.
  std::array<Expression, 3> cluster = {Expression::Parse("1"), Expression::Parse("1"),
                                       Expression::Parse("1")};
  Expression dynamic_smem;
  std::vector<KernelArgSpec> args;
  // Launched only where non-zero (knobs and problem): a combine step that exists for some
  // configurations only. The first kernel of a template always runs.
  std::optional<Expression> when;

  bool LaunchedFor(const Bindings& bindings) const {
    return !when || when->Evaluate(bindings) != 0;
  }
};

// An element of a candidate's output passes when |out - ref| <= atol + rtol * |ref|.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// A tolerance for the configurations where `when` (over knobs and problem) is non-zero: a knob
// that trades accuracy for speed (Q quantized to fp8) is held to its own bound, and the others
// keep the tight default.
struct ToleranceOverride {
  Expression when;
  Tolerance tolerance;
  std::string doc;
};

// How the correctness gate checks a candidate: on the task's problem and on each of `problems`
// (run-time parameters given as expressions of the task's problem, the others inherited), each
// with `seeds` fresh random inputs, against `tolerance` or the first override that applies.
struct CorrectnessSpec {
  int seeds = 3;
  // Whether a call must write the same bits every time from the same inputs. The gates call a
  // candidate again on each check problem and after its timing, and reject one whose bits
  // changed: a race that only moves the last bits hides inside any tolerance. A template that
  // sums with floating-point atomics (an order that changes from call to call) sets it false.
  bool deterministic = true;
  Tolerance tolerance;
  std::vector<ToleranceOverride> overrides;
  std::vector<std::vector<std::pair<std::string, Expression>>> problems;

  // The tolerance of the first override whose `when` holds for these bindings (a candidate's
  // knobs and problem), else the default.
  const Tolerance& ToleranceFor(const Bindings& bindings) const;
};

// Some knobs set to values of their domains (a starting point names only the knobs it fixes).
using KnobSettings = std::map<std::string, int64_t, std::less<>>;

struct Manifest {
  std::string name;
  int version = 0;
  std::string description;
  int min_sm = 0;
  // 0: no upper bound. Arch-specific instructions end with their arch (sm_100 has no wgmma).
  int max_sm = 0;
  // Compiled for the arch-specific target ("sm_90a"): the kernel uses instructions (wgmma) that
  // exist on that arch only.
  bool arch_specific = false;
  std::vector<KnobSpec> knobs;
  std::vector<ProblemParamSpec> problem;
  std::vector<DerivedSpec> derived;
  std::vector<ConstraintSpec> constraints;
  // One call of a candidate: these kernels, launched in order on one stream, all entries of one
  // source compiled once. Tensors (scratch included) of one name are the same memory in each.
  // The first is the candidate's main kernel: its ptxas figures are the candidate's.
  std::vector<KernelSpec> kernels;
  KernelSpec reference;
  CorrectnessSpec correctness;
  std::optional<Expression> flops;  // floating-point operations of one call, for TFLOP/s
  // Bytes one call reads and writes in global memory (each input read once, each output written
  // once, for a kernel that does no better), for GB/s: the figure of bandwidth-bound kernels.
  std::optional<Expression> bytes;
  // Known-good configurations a search tries right after the defaults (its first generation),
  // each naming some knobs; the others keep their defaults. A large problem gives a search few
  // candidates per minute, so where it starts matters. They come from the template folder's
  // starting_points.json (ParseStartingPoints), outside the manifest, so that the template's
  // version (its hash) covers only what is compiled and measured.
  std::vector<KnobSettings> starting_points;

  const KernelSpec& main_kernel() const { return kernels.front(); }
  const KnobSpec* FindKnob(std::string_view knob) const;
  const ProblemParamSpec* FindProblemParam(std::string_view param) const;
};

// Names an expression may use besides knobs, problem parameters and derived values.
// Bound from the target arch before compiling:
inline constexpr std::array<std::string_view, 4> kArchBindings = {
    "SM", "MAX_SMEM_PER_BLOCK", "MAX_THREADS_PER_BLOCK", "REGS_PER_BLOCK"};
// Bound from the device at launch time only: the multiprocessor count and the occupancy of the
// kernel being launched. Grids may use both; block size and shared memory may not (the compile
// gate checks them before any device is involved).
inline constexpr std::array<std::string_view, 2> kLaunchBindings = {"NUM_SMS", "CTAS_PER_SM"};
// The launch bindings a scratch shape may use, bound to the figure the grid sees: a persistent
// kernel keeps per-CTA partial results in scratch of NUM_SMS rows. CTAS_PER_SM is not among
// them: it is one kernel's occupancy, and scratch is shared by name by every kernel of a call.
inline constexpr std::array<std::string_view, 1> kScratchBindings = {"NUM_SMS"};
// What each launch binding stands for, as exports write it beside an expression that keeps it.
inline constexpr std::string_view kNumSmsDoc = "the device's multiprocessor count";
inline constexpr std::string_view kCtasPerSmDoc =
    "cuOccupancyMaxActiveBlocksPerMultiprocessor of the entry with block and dynamic_smem_bytes";

// Reads a manifest's JSON text; `read_source` returns the text of a file of the template's
// folder. Every expression is parsed and every name it uses checked here, so a broken manifest
// fails when it is loaded, with `origin` and the offending field in the message.
Manifest ParseManifest(std::string_view json_text, std::string_view origin,
                       const std::function<std::string(const std::string&)>& read_source);

// Reads a starting_points.json ({"doc": ..., "starting_points": [{KNOB: VALUE, ...}, ...]}) for
// `manifest`; every knob must exist and every value be in its domain. Throws evo::Error naming
// `origin` and the offending field.
std::vector<KnobSettings> ParseStartingPoints(std::string_view json_text, std::string_view origin,
                                              const Manifest& manifest);

// `manifest` with each knob of `fixed` held at its value: its domain that value alone, its
// default that value, and the starting points taking it (a point that named another value keeps
// its other knobs; duplicates go). What `evo sweep --fix` and `evo run --fix` search. Every knob
// must exist and every value be in its domain, as ApplyKnobSettings checks on the command line;
// a knob or value that does not throws evo::Error.
Manifest WithKnobsFixed(Manifest manifest, const KnobSettings& fixed);

}  // namespace evo

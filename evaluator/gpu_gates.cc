#include "evaluator/gpu_gates.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "common/error.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/cuda_errors.h"
#include "evaluator/cuda_objects.h"
#include "evaluator/kernel_arguments.h"
#include "evaluator/percentile.h"
#include "evaluator/reference_cache.h"

namespace evo {
namespace {

// Inputs depend on the check problem, the seed and the input's position only, so every
// candidate of a search is checked on the same data.
uint64_t InputSeed(size_t problem_index, int seed, size_t input_index) {
  return 0x5eed000000000000ull ^ (problem_index << 32) ^ (static_cast<uint64_t>(seed) << 16) ^
         input_index;
}

void Merge(ComparisonStats& worst, const ComparisonStats& stats) {
  worst.max_abs_error = std::max(worst.max_abs_error, stats.max_abs_error);
  const int64_t elements = worst.elements + stats.elements;
  worst.mean_abs_error = elements > 0
                             ? (worst.mean_abs_error * static_cast<double>(worst.elements) +
                                stats.mean_abs_error * static_cast<double>(stats.elements)) /
                                   static_cast<double>(elements)
                             : 0;
  worst.elements = elements;
  worst.over_tolerance += stats.over_tolerance;
  worst.non_finite += stats.non_finite;
  worst.fraction_over_tolerance =
      elements > 0 ? static_cast<double>(worst.over_tolerance) / static_cast<double>(elements) : 0;
  worst.max_abs_reference = std::max(worst.max_abs_reference, stats.max_abs_reference);
}

// Where an input's bytes come from: its name's place among the inputs of every kernel of the
// template (launched or not), so that a configuration launching fewer kernels reads the same
// inputs and the reference cache serves it.
uint64_t InputIndex(const Manifest& manifest, const Bindings& bindings, const std::string& name) {
  std::vector<std::string> names;
  for (const KernelSpec& kernel : manifest.kernels) {
    for (const KernelArgSpec& arg : kernel.args) {
      if (arg.kind != KernelArgSpec::Kind::kInput || !arg.PresentFor(bindings)) continue;
      if (arg.name == name) return names.size();
      if (std::find(names.begin(), names.end(), arg.name) == names.end()) {
        names.push_back(arg.name);
      }
    }
  }
  throw Error("template " + manifest.name + " has no input " + name);
}

// The correctness gate's inputs: with the manifest's outlier rows but at the manifest's last seed,
// whose plain N(0,1) inputs the timed calls read (timings comparable with any other benchmark's).
// TimingOptions::outlier_inputs adds one seed after it, with outlier rows again, which the timed
// calls read instead.
bool WithOutliers(const Manifest& manifest, int seed) {
  return seed != manifest.correctness.seeds - 1;
}

void FillInputs(const DeviceKernels& kernels, const Manifest& manifest, const Bindings& bindings,
                const KernelArguments& args, size_t problem_index, int seed, const Stream& stream) {
  for (DeviceTensor* input : args.Inputs()) {
    kernels.FillInput(*input,
                      InputSeed(problem_index, seed, InputIndex(manifest, bindings, input->name)),
                      stream, WithOutliers(manifest, seed));
  }
}

// Scratch before a call whose contents nobody may rely on: NaN (all ones for integers), so that
// a kernel reading scratch no kernel of the call wrote fails the gate.
void PoisonScratch(const DeviceKernels& kernels, const KernelArguments& args,
                   const Stream& stream) {
  for (const DeviceTensor* scratch : args.Scratch()) {
    if (scratch->zero != ScratchZero::kNever) continue;
    if (scratch->dtype == "i32") {
      CheckCuda(Driver().MemsetD32Async(scratch->data().pointer, 0xffffffffu,
                                        static_cast<size_t>(scratch->elements), stream.get()),
                "cuMemsetD32Async");
    } else {
      kernels.PoisonWithNaN(scratch->data(), scratch->dtype, scratch->elements, stream);
    }
  }
}

void ZeroScratch(const DeviceTensor& scratch, const Stream& stream) {
  CheckCuda(Driver().MemsetD8Async(scratch.data().pointer, 0, scratch.bytes(), stream.get()),
            "cuMemsetD8Async");
}

// The reference outputs of one check problem and seed, kept on the GPU between candidates.
struct ReferenceOutputs {
  std::map<std::string, std::shared_ptr<DeviceTensor>> tensors;  // by output name
  double ms = 0;                                                 // the run that made them
};

size_t OutputBytes(const KernelArguments& args) {
  size_t bytes = 0;
  for (const DeviceTensor* output : args.Outputs()) bytes += output->allocation.bytes();
  return bytes;
}

// "O: 2 bytes after it changed" for each tensor whose guards changed, joined; empty when none.
std::string GuardReport(const std::vector<DeviceTensor*>& tensors,
                        const std::vector<std::pair<uint64_t, uint64_t>>& changed) {
  std::string report;
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (const auto& [bytes, side] :
         {std::pair{changed[t].first, "before"}, std::pair{changed[t].second, "after"}}) {
      if (bytes == 0) continue;
      report += (report.empty() ? "" : "; ") + tensors[t]->name + ": " + std::to_string(bytes) +
                " byte" + (bytes == 1 ? "" : "s") + " of the guard zone " + side +
                " it changed (a write outside the tensor)";
    }
  }
  return report;
}

// The names of the outputs whose bits differ from `sums` (their earlier checksums), joined by
// ", "; empty when none.
std::string ChangedOutputs(const DeviceKernels& kernels, const std::vector<DeviceTensor*>& outputs,
                           const std::vector<uint64_t>& sums, const Stream& stream) {
  const std::vector<uint64_t> now = kernels.Checksums(outputs, stream);
  std::string names;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (now[i] != sums[i]) names += (names.empty() ? "" : ", ") + outputs[i]->name;
  }
  return names;
}

}  // namespace

std::vector<Problem> CheckProblems(const Manifest& manifest, const Problem& task) {
  Problem given;
  for (const ProblemParamSpec& param : manifest.problem) {
    const auto it = task.find(param.name);
    if (!param.default_expr && it != task.end()) given[param.name] = it->second;
  }
  std::vector<Problem> problems;
  for (size_t i = 0; i < manifest.correctness.problems.size(); ++i) {
    const auto& overrides = manifest.correctness.problems[i];
    Problem problem;
    try {
      problem = given;
      for (const auto& [name, expr] : overrides) {
        SetProblemParam(manifest, name, expr.Evaluate(task), problem);
      }
      problem = CompleteProblem(manifest, problem);
      CheckProblem(manifest, problem);
    } catch (const Error& error) {
      std::string settings;
      for (const auto& [name, expr] : overrides) {
        settings += (settings.empty() ? "" : ", ") + name + " = " + expr.text();
      }
      throw Error("check problem correctness.problems[" + std::to_string(i) + "] (" + settings +
                  ") of template " + manifest.name + " is invalid for the task " +
                  FormatProblem(manifest, task) + ": " + error.what());
    }
    if (std::find(problems.begin(), problems.end(), problem) == problems.end() && problem != task) {
      problems.push_back(problem);
    }
  }
  problems.push_back(task);
  return problems;
}

struct GpuGates::State {
  State(int ordinal, Compiler& compiler, const std::string& arch, size_t reference_budget)
      : context(ordinal), kernels(compiler, arch), references(reference_budget) {}
  Context context;  // first: everything below needs it current
  DeviceKernels kernels;
  Stream stream;
  DeviceBuffer l2_flush;
  DeviceBuffer clock;
  CycleStamps cycles_before;  // around the timed batches
  CycleStamps cycles_after;
  LruCache<ReferenceOutputs> references;
};

// One call of a candidate on one problem: its launched kernels, resolved for the device, and the
// arguments they share.
struct GpuGates::Call {
  std::vector<CUfunction> functions;  // in launch order
  std::vector<LaunchShape> shapes;
  std::unique_ptr<KernelArguments> args;

  Call(const Module& module, const Manifest& manifest, const Bindings& bindings, int sm_count) {
    const std::vector<const KernelSpec*> launched = LaunchedKernels(manifest, bindings);
    args = std::make_unique<KernelArguments>(launched, bindings, sm_count);
    for (const KernelSpec* kernel : launched) {
      functions.push_back(module.Function(kernel->entry));
      shapes.push_back(ResolveLaunch(*kernel, bindings, functions.back(), sm_count));
    }
  }

  // The scratch a call zeroes, then the kernels in order: all of it is the call, and timed.
  void Enqueue(const Stream& stream) {
    for (const DeviceTensor* scratch : args->Scratch()) {
      if (scratch->zero == ScratchZero::kEachCall) ZeroScratch(*scratch, stream);
    }
    for (size_t k = 0; k < functions.size(); ++k) {
      Launch(functions[k], shapes[k], stream, args->pointers(k));
    }
  }
};

GpuGates::GpuGates(int device_ordinal, Compiler& compiler)
    : device_(QueryDevices().at(static_cast<size_t>(device_ordinal))), compiler_(compiler) {
  // A quarter of the GPU's memory holds reference outputs; the rest is the candidates'.
  state_ = std::make_unique<State>(device_ordinal, compiler, device_.arch(),
                                   static_cast<size_t>(device_.global_memory_bytes / 4));
}

GpuGates::~GpuGates() = default;

void GpuGates::HealthCheck(const KernelTemplate& kernel_template) {
  const Manifest& manifest = kernel_template.manifest;
  const ArchInfo arch = device_.arch_info();
  const Problem problem = DefaultProblem(manifest);
  const CompileResult compiled = compiler_.Compile(
      TemplateCompileRequest(kernel_template, manifest.reference, nullptr, problem, arch.name));
  if (!compiled.ok) throw Error("the reference kernel does not compile:\n" + compiled.log);
  State& state = *state_;
  const Module module(compiled.cubin);
  const CUfunction function = module.Function(manifest.reference.entry);
  const Bindings bindings = CompileBindings(manifest, DefaultGenome(manifest), problem, arch);
  KernelArguments args(manifest.reference, bindings, device_.sm_count);
  const auto inputs = args.Inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    state.kernels.FillInput(*inputs[i], i, state.stream);
  }
  for (DeviceTensor* output : args.Outputs()) {
    state.kernels.PoisonWithNaN(output->data(), output->dtype, output->elements, state.stream);
  }
  Launch(function, ResolveLaunch(manifest.reference, bindings, function, device_.sm_count),
         state.stream, args.pointers());
  state.stream.Synchronize();
  for (DeviceTensor* output : args.Outputs()) {
    // Compared with itself, an output passes exactly when every element is finite.
    const ComparisonStats stats = state.kernels.Compare(
        output->data(), output->dtype, output->data(), output->elements, 1, 0, state.stream);
    if (!stats.passed()) {
      throw Error("health check: the reference kernel left " + std::to_string(stats.non_finite) +
                  " elements of " + output->name + " not finite");
    }
  }
}

// The reference kernel of one task, compiled when first needed: a candidate whose reference
// outputs are all cached never loads it.
class GpuGates::Reference {
 public:
  Reference(GpuGates& gates, const KernelTemplate& kernel_template, const Problem& problem)
      : gates_(gates), kernel_template_(kernel_template), problem_(problem) {}

  // The reference outputs for check problem `index` and `seed`, whose inputs `args` holds
  // (filled for that seed): from the cache, or made now by running the reference kernel.
  const ReferenceOutputs& Outputs(const KernelArguments& args, const Problem& check_problem,
                                  size_t index, int seed) {
    const Manifest& manifest = kernel_template_.manifest;
    const ArchInfo arch = gates_.device_.arch_info();
    State& state = *gates_.state_;
    const std::string key = ReferenceKey(kernel_template_, check_problem, index, seed, arch);
    if (const ReferenceOutputs* cached = state.references.Find(key)) return *cached;
    if (!module_) {
      const CompileResult compiled = gates_.compiler_.Compile(TemplateCompileRequest(
          kernel_template_, manifest.reference, nullptr, problem_, arch.name));
      if (!compiled.ok) {
        throw Error("the reference kernel of " + manifest.name + " does not compile:\n" +
                    compiled.log);
      }
      module_ = std::make_unique<Module>(compiled.cubin);
      function_ = module_->Function(manifest.reference.entry);
    }
    const Bindings bindings =
        CompileBindings(manifest, DefaultGenome(manifest), check_problem, arch);
    KernelArguments reference_args(manifest.reference, bindings, gates_.device_.sm_count, &args);
    for (DeviceTensor* output : reference_args.Outputs()) {
      state.kernels.PoisonWithNaN(output->data(), output->dtype, output->elements, state.stream);
    }
    Event start;
    Event stop;
    start.Record(state.stream);
    Launch(function_,
           ResolveLaunch(manifest.reference, bindings, function_, gates_.device_.sm_count),
           state.stream, reference_args.pointers());
    stop.Record(state.stream);
    stop.Synchronize();
    ReferenceOutputs made;
    made.ms = stop.ElapsedSince(start);
    for (DeviceTensor* output : reference_args.Outputs()) {
      made.tensors[output->name] = reference_args.Shared(output->name);
    }
    ReferenceOutputs* kept = state.references.Insert(key, made, OutputBytes(reference_args));
    if (kept != nullptr) return *kept;
    // Too large to keep: valid until the next call, which is all the caller needs.
    uncached_ = std::move(made);
    return uncached_;
  }

 private:
  GpuGates& gates_;
  const KernelTemplate& kernel_template_;
  Problem problem_;
  std::unique_ptr<Module> module_;
  CUfunction function_ = nullptr;
  ReferenceOutputs uncached_;
};

ReferenceTiming GpuGates::PrepareReference(const KernelTemplate& kernel_template,
                                           const Problem& problem) {
  const Manifest& manifest = kernel_template.manifest;
  const ArchInfo arch = device_.arch_info();
  State& state = *state_;
  Reference reference(*this, kernel_template, problem);
  const std::vector<Problem> problems = CheckProblems(manifest, problem);
  ReferenceTiming timing;
  for (size_t p = 0; p < problems.size(); ++p) {
    const Bindings bindings = CompileBindings(manifest, DefaultGenome(manifest), problems[p], arch);
    // The inputs of a call, for the reference to read; no candidate runs.
    const KernelArguments args(LaunchedKernels(manifest, bindings), bindings, device_.sm_count);
    for (int seed = 0; seed < manifest.correctness.seeds; ++seed) {
      FillInputs(state.kernels, manifest, bindings, args, p, seed, state.stream);
      const double ms = reference.Outputs(args, problems[p], p, seed).ms;
      timing.all_ms += ms;
      ++timing.runs;
      if (p + 1 == problems.size()) timing.task_ms = std::max(timing.task_ms, ms);
    }
  }
  return timing;
}

GpuVerdict GpuGates::Evaluate(const KernelTemplate& kernel_template, const Genome& genome,
                              const Problem& problem, const std::string& cubin, bool verify_only,
                              const TimingOptions& timing_options) {
  const Manifest& manifest = kernel_template.manifest;
  const ArchInfo arch = device_.arch_info();
  State& state = *state_;
  // Outside the candidate's verdict: a check problem the manifest makes invalid is evo's input.
  const std::vector<Problem> problems = CheckProblems(manifest, problem);
  Reference reference(*this, kernel_template, problem);
  GpuVerdict verdict;
  try {
    const Module candidate(cubin);
    std::unique_ptr<Call> task_call;
    std::map<std::string, std::shared_ptr<DeviceTensor>> task_reference;
    std::vector<uint64_t> task_input_sums;
    std::vector<uint64_t> task_output_sums;  // the task's outputs, when the manifest asks for
                                             // the same bits every call
    CorrectnessFigures& correctness = verdict.correctness;
    const int seeds = manifest.correctness.seeds + (timing_options.outlier_inputs ? 1 : 0);
    // A write outside a tensor or into an input, or a counter a call did not reset, fails the
    // gate by name, whatever the output.
    auto tampering = [&](const KernelArguments& args, const std::vector<uint64_t>& input_sums) {
      const std::vector<DeviceTensor*> tensors = args.Tensors();
      std::string report =
          GuardReport(tensors, state.kernels.ChangedGuardBytes(tensors, state.stream));
      const auto add = [&report](const std::string& line) {
        report += (report.empty() ? "" : "; ") + line;
      };
      const std::vector<DeviceTensor*> inputs = args.Inputs();
      const std::vector<uint64_t> sums = state.kernels.Checksums(inputs, state.stream);
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (sums[i] != input_sums[i]) {
          add("input " + inputs[i]->name + " changed (the kernel wrote into it)");
        }
      }
      std::vector<DeviceTensor*> zeroed;
      for (DeviceTensor* scratch : args.Scratch()) {
        if (scratch->zero == ScratchZero::kOnce) zeroed.push_back(scratch);
      }
      if (zeroed.empty()) return report;
      const std::vector<uint64_t> non_zero = state.kernels.NonZeroElements(zeroed, state.stream);
      for (size_t i = 0; i < zeroed.size(); ++i) {
        if (non_zero[i] == 0) continue;
        add("scratch " + zeroed[i]->name + " was not left zero (" + std::to_string(non_zero[i]) +
            " of " + std::to_string(zeroed[i]->elements) + " elements non-zero)");
      }
      return report;
    };
    for (size_t p = 0; p < problems.size(); ++p) {
      const Bindings bindings = CompileBindings(manifest, genome, problems[p], arch);
      const Tolerance tolerance = manifest.correctness.ToleranceFor(bindings);
      auto call = std::make_unique<Call>(candidate, manifest, bindings, device_.sm_count);
      KernelArguments& args = *call->args;
      state.kernels.FillGuards(args.Tensors(), state.stream);
      for (const DeviceTensor* scratch : args.Scratch()) {
        if (scratch->zero == ScratchZero::kOnce) ZeroScratch(*scratch, state.stream);
      }
      std::vector<uint64_t> input_sums;
      for (int seed = 0; seed < seeds; ++seed) {
        FillInputs(state.kernels, manifest, bindings, args, p, seed, state.stream);
        input_sums = state.kernels.Checksums(args.Inputs(), state.stream);
        const ReferenceOutputs& expected = reference.Outputs(args, problems[p], p, seed);
        for (DeviceTensor* output : args.Outputs()) {
          state.kernels.PoisonWithNaN(output->data(), output->dtype, output->elements,
                                      state.stream);
        }
        PoisonScratch(state.kernels, args, state.stream);
        call->Enqueue(state.stream);
        state.stream.Synchronize();
        const std::string where =
            " on " + FormatProblem(manifest, problems[p]) + ", seed " + std::to_string(seed);
        if (const std::string tampered = tampering(args, input_sums); !tampered.empty()) {
          if (correctness.failure.empty()) correctness.failure = tampered + where;
        }
        for (DeviceTensor* output : args.Outputs()) {
          const auto reference_output = expected.tensors.find(output->name);
          if (reference_output == expected.tensors.end()) {
            throw Error("the reference of " + manifest.name + " has no output " + output->name);
          }
          const ComparisonStats stats =
              state.kernels.Compare(output->data(), output->dtype, reference_output->second->data(),
                                    output->elements, tolerance.atol, tolerance.rtol, state.stream);
          Merge(correctness.worst, stats);
          if (!stats.passed() && correctness.failure.empty()) {
            correctness.failure = output->name + where + ": " +
                                  std::to_string(stats.over_tolerance) + " of " +
                                  std::to_string(stats.elements) + " elements over tolerance, " +
                                  std::to_string(stats.non_finite) + " not finite";
          }
        }
        ++correctness.checks;
        if (p + 1 == problems.size() && seed + 1 == seeds) {
          task_reference = expected.tensors;
        }
      }
      // The last seed's call again, from the same start (outputs and scratch poisoned alike):
      // every output must come back with the same bits.
      if (manifest.correctness.deterministic && correctness.failure.empty()) {
        const std::vector<DeviceTensor*> outputs = args.Outputs();
        const std::vector<uint64_t> first = state.kernels.Checksums(outputs, state.stream);
        for (DeviceTensor* output : outputs) {
          state.kernels.PoisonWithNaN(output->data(), output->dtype, output->elements,
                                      state.stream);
        }
        PoisonScratch(state.kernels, args, state.stream);
        call->Enqueue(state.stream);
        state.stream.Synchronize();
        const std::string changed = ChangedOutputs(state.kernels, outputs, first, state.stream);
        if (!changed.empty()) {
          correctness.failure = changed + " on " + FormatProblem(manifest, problems[p]) +
                                ", seed " + std::to_string(seeds - 1) +
                                ": a second call on the same inputs wrote other bits (the "
                                "kernel is not deterministic)";
        }
        if (p + 1 == problems.size()) task_output_sums = first;
      }
      if (p + 1 == problems.size()) {
        correctness.tolerance = tolerance;
        task_call = std::move(call);
        task_input_sums = input_sums;
      }
    }
    correctness.passed = correctness.failure.empty();
    if (!correctness.passed) {
      verdict.status = Status::kIncorrect;
      return verdict;
    }
    if (verify_only) return verdict;

    verdict.timing = TimeLaunches(*task_call, timing_options);
    TimingFigures& timing = *verdict.timing;
    if (manifest.flops) {
      const double flops = static_cast<double>(manifest.flops->Evaluate(problem));
      timing.tflops = flops / (timing.median_us * 1e-6) / 1e12;
    }
    if (manifest.bytes) {
      const double bytes = static_cast<double>(manifest.bytes->Evaluate(problem));
      timing.gbps = bytes / (timing.median_us * 1e-6) / 1e9;
    }
    // The timed calls rewrote the output from unchanged inputs: it must still match, and
    // nothing outside the output (or scratch) may have changed.
    timing.recheck_passed = true;
    for (DeviceTensor* output : task_call->args->Outputs()) {
      const ComparisonStats stats = state.kernels.Compare(
          output->data(), output->dtype, task_reference.at(output->name)->data(), output->elements,
          correctness.tolerance.atol, correctness.tolerance.rtol, state.stream);
      timing.recheck_passed = timing.recheck_passed && stats.passed();
    }
    const std::string tampered = tampering(*task_call->args, task_input_sums);
    // Thousands of calls from the same inputs: a race that shows only now and then has had its
    // chance to move a bit.
    const std::string changed = task_output_sums.empty()
                                    ? std::string()
                                    : ChangedOutputs(state.kernels, task_call->args->Outputs(),
                                                     task_output_sums, state.stream);
    if (!timing.recheck_passed || !tampered.empty() || !changed.empty()) {
      timing.recheck_passed = false;
      verdict.status = Status::kIncorrect;
      verdict.correctness.passed = false;
      verdict.correctness.failure =
          !tampered.empty() ? tampered + " while it was timed"
          : !changed.empty()
              ? changed +
                    " changed bits while it was timed, from the same inputs (the kernel "
                    "is not deterministic)"
              : "the output changed while it was timed";
    }
  } catch (const CudaError& error) {
    verdict.status = Status::kRuntimeError;
    verdict.error = error.what();
    verdict.poisoned = PoisonsContext(error.result());
  } catch (const Error& error) {
    // A launch this candidate cannot make (a grid of zero CTAs when not even one fits an SM,
    // an argument out of range) is the candidate's failure, not evo's.
    verdict.status = Status::kRuntimeError;
    verdict.error = error.what();
  }
  if (verdict.poisoned) state.references.Clear();
  return verdict;
}

TimingFigures GpuGates::TimeLaunches(Call& call, const TimingOptions& options) {
  State& state = *state_;
  TimingFigures timing;
  timing.l2_flushed = options.flush_l2;
  if (timing.l2_flushed && state.l2_flush.bytes() == 0) {
    state.l2_flush = DeviceBuffer(static_cast<size_t>(std::max<int64_t>(device_.l2_bytes, 1) * 2));
  }
  if (state.clock.bytes() == 0) state.clock = DeviceBuffer(sizeof(double));
  state.cycles_before.Clear(state.stream);
  state.cycles_after.Clear(state.stream);

  // One call alone estimates a call's time, to size the warm-up and the batches.
  double estimate_us = 0;
  {
    Event start;
    Event stop;
    for (int i = 0; i < 2; ++i) {
      start.Record(state.stream);
      call.Enqueue(state.stream);
      stop.Record(state.stream);
      stop.Synchronize();
      estimate_us = std::max<double>(stop.ElapsedSince(start) * 1000.0, 1.0);
    }
  }
  timing.launches_per_repetition =
      timing.l2_flushed
          ? 1
          : std::clamp(static_cast<int>(std::ceil(options.target_repetition_us / estimate_us)), 1,
                       1000);

  // A batch is launches_per_repetition calls (each its scratch memsets and its kernels) captured
  // into one CUDA graph: back to back without the host's launch gaps, as in a CUDA graph of a
  // user's program (with the L2 flushed, one call after a memset instead). Everything from here is
  // enqueued back to back: the warm-up, then the measured batches, each between two events, at most
  // kAhead in flight ahead of the one being read. The GPU never waits for the host, so it runs as
  // it does in sustained use.
  constexpr int kAhead = 8;
  std::unique_ptr<CapturedGraph> graph;
  if (!timing.l2_flushed) {
    graph = std::make_unique<CapturedGraph>(state.stream, [&] {
      for (int i = 0; i < timing.launches_per_repetition; ++i) call.Enqueue(state.stream);
    });
  }
  // The L2 flush precedes a batch, outside its events.
  auto flush = [&] {
    if (!timing.l2_flushed) return;
    CheckCuda(Driver().MemsetD32Async(state.l2_flush.get(), 0x5a5a5a5au, state.l2_flush.bytes() / 4,
                                      state.stream.get()),
              "cuMemsetD32Async");
  };
  auto launch_batch = [&] {
    if (graph) {
      graph->Launch(state.stream);
    } else {
      call.Enqueue(state.stream);
    }
  };
  const double batch_us = estimate_us * timing.launches_per_repetition;
  const int warm_batches =
      std::max(1, static_cast<int>(std::ceil(options.warmup_ms * 1000.0 / batch_us)));
  for (int i = 0; i < warm_batches; ++i) {
    flush();
    launch_batch();
  }
  // The timed batches follow the warm-up and this stamp without a pause.
  state.kernels.EnqueueCycleStamp(state.cycles_before, device_.sm_count, state.stream);
  std::vector<Event> starts;
  std::vector<Event> stops;
  auto enqueue_batch = [&] {
    flush();
    starts.emplace_back().Record(state.stream);
    launch_batch();
    stops.emplace_back().Record(state.stream);
  };
  std::vector<double> samples;
  double total_ms = 0;
  bool enough = false;
  size_t read = 0;
  while (true) {
    while (!enough && stops.size() < read + kAhead) enqueue_batch();
    if (read == stops.size()) break;
    stops[read].Synchronize();
    const double us = static_cast<double>(stops[read].ElapsedSince(starts[read])) * 1000.0 /
                      timing.launches_per_repetition;
    ++read;
    samples.push_back(us);
    total_ms += us * timing.launches_per_repetition / 1000.0;
    if (enough || static_cast<int>(samples.size()) < options.min_repetitions) continue;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    const double spread =
        (Percentile(sorted, 0.9) - Percentile(sorted, 0.1)) / Percentile(sorted, 0.5);
    timing.settled = spread <= options.target_spread;
    enough = timing.settled || static_cast<int>(samples.size()) >= options.max_repetitions ||
             total_ms >= options.max_total_ms;
    // Right behind the last batch, before the GPU has had a pause: the clock it ran them at.
    if (enough) {
      state.kernels.EnqueueCycleStamp(state.cycles_after, device_.sm_count, state.stream);
      state.kernels.EnqueueClockProbe(state.clock, 100, state.stream);
    }
  }
  state.stream.Synchronize();
  timing.sm_clock_mhz = DeviceKernels::ReadClockMhz(state.clock);
  timing.mean_sm_clock_mhz = MeanClockMhz(state.cycles_before.Read(), state.cycles_after.Read());

  std::sort(samples.begin(), samples.end());
  timing.repetitions = static_cast<int>(samples.size());
  timing.median_us = Percentile(samples, 0.5);
  timing.p10_us = Percentile(samples, 0.1);
  timing.p90_us = Percentile(samples, 0.9);
  timing.min_us = samples.front();
  return timing;
}

}  // namespace evo

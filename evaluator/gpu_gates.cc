#include "evaluator/gpu_gates.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_errors.h"
#include "evaluator/cuda_objects.h"
#include "evaluator/kernel_arguments.h"

namespace evo {
namespace {

// Inputs depend on the check problem, the seed and the input's position only, so every
// candidate of a search is checked on the same data.
uint64_t InputSeed(size_t problem_index, int seed, size_t input_index) {
  return 0x5eed000000000000ull ^ (problem_index << 32) ^ (static_cast<uint64_t>(seed) << 16) ^
         input_index;
}

double Percentile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = position - static_cast<double>(below);
  return sorted[below] * (1 - weight) + sorted[above] * weight;
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

// The check problems: each manifest override applied to the task's problem, then the task's
// problem itself last, so its buffers are the ones timed.
std::vector<Problem> CheckProblems(const Manifest& manifest, const Problem& task) {
  std::vector<Problem> problems;
  for (const auto& overrides : manifest.correctness.problems) {
    Problem problem = task;
    for (const auto& [name, expr] : overrides) {
      SetProblemParam(manifest, name, expr.Evaluate(task), problem);
    }
    if (std::find(problems.begin(), problems.end(), problem) == problems.end() && problem != task) {
      problems.push_back(problem);
    }
  }
  problems.push_back(task);
  return problems;
}

}  // namespace

struct GpuGates::State {
  State(int ordinal, Compiler& compiler, const std::string& arch)
      : context(ordinal), kernels(compiler, arch) {}
  Context context;  // first: everything below needs it current
  DeviceKernels kernels;
  Stream stream;
  DeviceBuffer l2_flush;
};

GpuGates::GpuGates(int device_ordinal, Compiler& compiler)
    : device_(QueryDevices().at(static_cast<size_t>(device_ordinal))), compiler_(compiler) {
  state_ = std::make_unique<State>(device_ordinal, compiler, device_.arch());
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
  KernelArguments args(manifest.reference, bindings);
  const auto inputs = args.Inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    state.kernels.FillInput(*inputs[i], i, state.stream);
  }
  for (DeviceTensor* output : args.Outputs()) {
    state.kernels.PoisonWithNaN(output->buffer, output->dtype, output->elements, state.stream);
  }
  Launch(function, ResolveLaunch(manifest.reference, bindings, function, device_.sm_count),
         state.stream, args.pointers());
  state.stream.Synchronize();
  for (DeviceTensor* output : args.Outputs()) {
    // Compared with itself, an output passes exactly when every element is finite.
    const ComparisonStats stats = state.kernels.Compare(
        output->buffer, output->dtype, output->buffer, output->elements, 1, 0, state.stream);
    if (!stats.passed()) {
      throw Error("health check: the reference kernel left " + std::to_string(stats.non_finite) +
                  " elements of " + output->name + " not finite");
    }
  }
}

GpuVerdict GpuGates::Evaluate(const KernelTemplate& kernel_template, const Genome& genome,
                              const Problem& problem, const std::string& cubin, bool verify_only,
                              const TimingOptions& timing_options) {
  const Manifest& manifest = kernel_template.manifest;
  const ArchInfo arch = device_.arch_info();
  const CompileResult reference_compiled = compiler_.Compile(
      TemplateCompileRequest(kernel_template, manifest.reference, nullptr, problem, arch.name));
  if (!reference_compiled.ok) {
    throw Error("the reference kernel of " + manifest.name + " does not compile:\n" +
                reference_compiled.log);
  }
  State& state = *state_;
  GpuVerdict verdict;
  try {
    const Module candidate(cubin);
    const CUfunction kernel = candidate.Function(manifest.kernel.entry);
    const Module reference(reference_compiled.cubin);
    const CUfunction reference_kernel = reference.Function(manifest.reference.entry);

    const std::vector<Problem> problems = CheckProblems(manifest, problem);
    std::unique_ptr<KernelArguments> task_args;
    std::unique_ptr<KernelArguments> task_reference_args;
    LaunchShape task_shape;
    CorrectnessFigures& correctness = verdict.correctness;
    for (size_t p = 0; p < problems.size(); ++p) {
      const Bindings bindings = CompileBindings(manifest, genome, problems[p], arch);
      const Tolerance tolerance = manifest.correctness.ToleranceFor(bindings);
      auto args = std::make_unique<KernelArguments>(manifest.kernel, bindings);
      auto reference_args =
          std::make_unique<KernelArguments>(manifest.reference, bindings, args.get());
      const LaunchShape shape = ResolveLaunch(manifest.kernel, bindings, kernel, device_.sm_count);
      const LaunchShape reference_shape =
          ResolveLaunch(manifest.reference, bindings, reference_kernel, device_.sm_count);
      for (int seed = 0; seed < manifest.correctness.seeds; ++seed) {
        const auto inputs = args->Inputs();
        for (size_t i = 0; i < inputs.size(); ++i) {
          state.kernels.FillInput(*inputs[i], InputSeed(p, seed, i), state.stream);
        }
        for (auto* set : {args.get(), reference_args.get()}) {
          for (DeviceTensor* output : set->Outputs()) {
            state.kernels.PoisonWithNaN(output->buffer, output->dtype, output->elements,
                                        state.stream);
          }
        }
        Launch(reference_kernel, reference_shape, state.stream, reference_args->pointers());
        Launch(kernel, shape, state.stream, args->pointers());
        state.stream.Synchronize();
        for (DeviceTensor* output : args->Outputs()) {
          const DeviceTensor& expected = reference_args->Tensor(output->name);
          const ComparisonStats stats =
              state.kernels.Compare(output->buffer, output->dtype, expected.buffer,
                                    output->elements, tolerance.atol, tolerance.rtol, state.stream);
          Merge(correctness.worst, stats);
          if (!stats.passed() && correctness.failure.empty()) {
            correctness.failure = output->name + " on " + FormatProblem(manifest, problems[p]) +
                                  ", seed " + std::to_string(seed) + ": " +
                                  std::to_string(stats.over_tolerance) + " of " +
                                  std::to_string(stats.elements) + " elements over tolerance, " +
                                  std::to_string(stats.non_finite) + " not finite";
          }
        }
        ++correctness.checks;
      }
      if (p + 1 == problems.size()) {
        correctness.tolerance = tolerance;
        task_args = std::move(args);
        task_reference_args = std::move(reference_args);
        task_shape = shape;
      }
    }
    correctness.passed = correctness.failure.empty();
    if (!correctness.passed) {
      verdict.status = Status::kIncorrect;
      return verdict;
    }
    if (verify_only) return verdict;

    TimingFigures timing;
    Event start;
    Event stop;
    auto time_launches = [&](int launches, bool flush) {
      if (flush) {
        CheckCuda(Driver().MemsetD32Async(state.l2_flush.get(), 0x5a5a5a5au,
                                          state.l2_flush.bytes() / 4, state.stream.get()),
                  "cuMemsetD32Async");
      }
      start.Record(state.stream);
      for (int i = 0; i < launches; ++i) {
        Launch(kernel, task_shape, state.stream, task_args->pointers());
      }
      stop.Record(state.stream);
      stop.Synchronize();
      return static_cast<double>(stop.ElapsedSince(start)) * 1000.0 / launches;
    };
    // Warm-up, which also estimates one launch's time for batching.
    double warm_us = 0;
    double warm_total_ms = 0;
    for (int i = 0; i < 3 || warm_total_ms < timing_options.warmup_ms; ++i) {
      warm_us = time_launches(1, false);
      warm_total_ms += warm_us / 1000.0;
      if (i > 10000) break;
    }
    timing.l2_flushed = timing_options.flush_l2;
    if (timing.l2_flushed && state.l2_flush.bytes() == 0) {
      state.l2_flush =
          DeviceBuffer(static_cast<size_t>(std::max<int64_t>(device_.l2_bytes, 1) * 2));
    }
    timing.launches_per_repetition =
        timing.l2_flushed
            ? 1
            : std::clamp(static_cast<int>(std::ceil(timing_options.target_repetition_us / warm_us)),
                         1, 1000);
    std::vector<double> samples;
    double total_ms = 0;
    while (true) {
      const double us = time_launches(timing.launches_per_repetition, timing.l2_flushed);
      samples.push_back(us);
      total_ms += us * timing.launches_per_repetition / 1000.0;
      if (static_cast<int>(samples.size()) < timing_options.min_repetitions) continue;
      std::vector<double> sorted = samples;
      std::sort(sorted.begin(), sorted.end());
      const double spread =
          (Percentile(sorted, 0.9) - Percentile(sorted, 0.1)) / Percentile(sorted, 0.5);
      timing.settled = spread <= timing_options.target_spread;
      if (timing.settled || static_cast<int>(samples.size()) >= timing_options.max_repetitions ||
          total_ms >= timing_options.max_total_ms) {
        break;
      }
    }
    std::sort(samples.begin(), samples.end());
    timing.repetitions = static_cast<int>(samples.size());
    timing.median_us = Percentile(samples, 0.5);
    timing.p10_us = Percentile(samples, 0.1);
    timing.p90_us = Percentile(samples, 0.9);
    timing.min_us = samples.front();
    if (manifest.flops) {
      const double flops = static_cast<double>(manifest.flops->Evaluate(problem));
      timing.tflops = flops / (timing.median_us * 1e-6) / 1e12;
    }
    // The timed launches rewrote the output from unchanged inputs: it must still match.
    timing.recheck_passed = true;
    for (DeviceTensor* output : task_args->Outputs()) {
      const ComparisonStats stats = state.kernels.Compare(
          output->buffer, output->dtype, task_reference_args->Tensor(output->name).buffer,
          output->elements, correctness.tolerance.atol, correctness.tolerance.rtol, state.stream);
      timing.recheck_passed = timing.recheck_passed && stats.passed();
    }
    if (!timing.recheck_passed) {
      verdict.status = Status::kIncorrect;
      verdict.correctness.passed = false;
      verdict.correctness.failure = "the output changed while it was timed";
    }
    verdict.timing = timing;
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
  return verdict;
}

}  // namespace evo

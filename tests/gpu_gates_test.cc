#include "evaluator/gpu_gates.h"

#include <catch2/catch.hpp>

#include "common/half.h"
#include "evaluator/compile_gate.h"
#include "evaluator/kernel_arguments.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/template_library.h"
#include "tests/attention_reference.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("every broken sdpa variant applies to the real template and still compiles", "[nvrtc]") {
  for (const test::SdpaBreakage& breakage : test::SdpaBreakages()) {
    INFO(breakage.name);
    test::TempDir dir;
    test::WriteBrokenSdpa(dir.path(), breakage);
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& broken = library.Find(test::BrokenSdpaName(breakage));
    Problem problem = DefaultProblem(broken.manifest);
    problem["CAUSAL"] = 1;
    NvrtcCompiler compiler;
    const CompileOutcome outcome = RunCompileGate(broken, DefaultGenome(broken.manifest), problem,
                                                  ArchByName("sm_90"), compiler, {});
    INFO(outcome.reason << outcome.compiled.log);
    CHECK(outcome.status == Status::kCompiled);
  }
}

TEST_CASE("the FP32 reference kernel agrees with float64 attention", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  const Manifest& manifest = sdpa.manifest;
  Context context(0);
  const DeviceInfo device = QueryDevices().at(0);
  NvrtcCompiler compiler;
  const DeviceKernels kernels(compiler, device.arch());
  Stream stream;
  for (int64_t d : {64, 128}) {
    for (int64_t causal : {0, 1}) {
      for (auto [s_q, s_kv] : {std::pair<int64_t, int64_t>{67, 45}, {1, 300}, {130, 130}}) {
        INFO("D=" << d << " causal=" << causal << " S_q=" << s_q << " S_kv=" << s_kv);
        const Problem problem = test::AttentionProblem(manifest, 2, 3, s_q, s_kv, d, causal);
        const CompileResult compiled = compiler.Compile(
            TemplateCompileRequest(sdpa, manifest.reference, nullptr, problem, device.arch()));
        REQUIRE(compiled.ok);
        const Module module(compiled.cubin);
        const CUfunction function = module.Function(manifest.reference.entry);
        const Bindings bindings =
            CompileBindings(manifest, DefaultGenome(manifest), problem, device.arch_info());
        KernelArguments args(manifest.reference, bindings, device.sm_count);
        std::vector<std::vector<float>> inputs;
        uint64_t seed = 7;
        for (DeviceTensor* input : args.Inputs()) {
          kernels.FillNormal(input->data(), input->dtype, input->elements, ++seed, stream);
          stream.Synchronize();
          std::vector<uint16_t> halves(static_cast<size_t>(input->elements));
          input->data().Download(halves.data(), halves.size() * 2);
          std::vector<float> values;
          for (uint16_t h : halves) values.push_back(HalfToFloat(h));
          inputs.push_back(std::move(values));
        }
        DeviceTensor& out = args.Tensor("O");
        kernels.PoisonWithNaN(out.data(), out.dtype, out.elements, stream);
        Launch(function, ResolveLaunch(manifest.reference, bindings, function, device.sm_count),
               stream, args.pointers());
        stream.Synchronize();
        std::vector<float> gpu(static_cast<size_t>(out.elements));
        out.data().Download(gpu.data(), gpu.size() * 4);
        const std::vector<double> expected = test::AttentionForwardFloat64(
            inputs[0], inputs[1], inputs[2], {2, 3, s_q, s_kv, d, causal == 1});
        double max_error = 0;
        for (size_t i = 0; i < gpu.size(); ++i) {
          REQUIRE(std::isfinite(gpu[i]));
          max_error = std::max(max_error, std::abs(gpu[i] - expected[i]));
        }
        CHECK(max_error < 2e-5);
      }
    }
  }
}

// Gates 2 (and 3 unless verify_only) for a template's default knobs at B=2, H=4, S=512, D=64.
GpuVerdict EvaluateDefaults(GpuGates& gates, Compiler& compiler,
                            const KernelTemplate& kernel_template, int64_t causal,
                            bool verify_only) {
  const Problem problem =
      test::AttentionProblem(kernel_template.manifest, 2, 4, 512, 512, 64, causal);
  const Genome genome = DefaultGenome(kernel_template.manifest);
  const CompileOutcome compiled =
      RunCompileGate(kernel_template, genome, problem, gates.device().arch_info(), compiler, {});
  REQUIRE(compiled.status == Status::kCompiled);
  return gates.Evaluate(kernel_template, genome, problem, compiled.compiled.cubin, verify_only, {});
}

TEST_CASE("the correctness gate rejects broken sdpa kernels and passes the real one", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const TemplateLibrary good_library = TemplateLibrary::Load({});
  const KernelTemplate& good = good_library.Find("sdpa_fp16");
  auto evaluate = [&](const KernelTemplate& kernel_template, int64_t causal) {
    return EvaluateDefaults(gates, compiler, kernel_template, causal, true);
  };
  for (const char* name :
       {"skips_last_kv_tile", "skips_tail_rows", "drops_causal_mask", "wrong_scale"}) {
    INFO(name);
    test::TempDir dir;
    test::WriteBrokenSdpa(dir.path(), test::FindSdpaBreakage(name));
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const GpuVerdict broken =
        evaluate(library.Find(test::BrokenSdpaName(test::FindSdpaBreakage(name))), 1);
    INFO(broken.correctness.failure);
    CHECK(broken.status == Status::kIncorrect);
    CHECK_FALSE(broken.correctness.passed);
    CHECK_FALSE(broken.correctness.failure.empty());
    for (int64_t causal : {0, 1}) {
      const GpuVerdict fine = evaluate(good, causal);
      INFO(fine.correctness.failure << fine.error);
      CHECK(fine.status == Status::kMeasured);
      CHECK(fine.correctness.passed);
      // The task and each check problem (all distinct from it at this shape), every seed.
      CHECK(fine.correctness.checks ==
            static_cast<int>(1 + good.manifest.correctness.problems.size()) *
                good.manifest.correctness.seeds);
      CHECK(fine.correctness.worst.max_abs_error < 0.01);
    }
  }
}

TEST_CASE(
    "guard zones and input checksums reject a write outside O or into K, whatever the output; "
    "the good kernel right after each is measured",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const TemplateLibrary good_library = TemplateLibrary::Load({});
  const KernelTemplate& good = good_library.Find("sdpa_fp16");
  auto evaluate = [&](const KernelTemplate& kernel_template) {
    return EvaluateDefaults(gates, compiler, kernel_template, 0, false);
  };
  const std::pair<const char*, const char*> expectations[] = {
      {"writes_past_end_on_partial_tile", "O: 2 bytes of the guard zone after it changed"},
      {"writes_before_start", "O: 2 bytes of the guard zone before it changed"},
      {"writes_into_k", "input K changed (the kernel wrote into it)"},
  };
  for (const auto& [name, failure] : expectations) {
    INFO(name);
    test::TempDir dir;
    test::WriteBrokenSdpa(dir.path(), test::FindSdpaBreakage(name));
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const GpuVerdict broken =
        evaluate(library.Find(test::BrokenSdpaName(test::FindSdpaBreakage(name))));
    INFO(broken.correctness.failure << broken.error);
    CHECK(broken.status == Status::kIncorrect);
    CHECK(broken.correctness.failure.find(failure) != std::string::npos);
    // Caught by the guards or the checksums: the output itself is within tolerance.
    CHECK(broken.correctness.worst.over_tolerance == 0);
    CHECK(broken.correctness.worst.non_finite == 0);
    const GpuVerdict fine = evaluate(good);
    INFO(fine.correctness.failure << fine.error);
    CHECK(fine.status == Status::kMeasured);
    REQUIRE(fine.timing);
    CHECK(fine.timing->recheck_passed);
  }
}

TEST_CASE("the performance gate times the real kernel and rechecks its output", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  const Problem problem = test::AttentionProblem(sdpa.manifest, 2, 8, 512, 512, 64, 0);
  const Genome genome = DefaultGenome(sdpa.manifest);
  const CompileOutcome compiled =
      RunCompileGate(sdpa, genome, problem, gates.device().arch_info(), compiler, {});
  REQUIRE(compiled.status == Status::kCompiled);
  for (bool flush : {false, true}) {
    TimingOptions options;
    options.flush_l2 = flush;
    const GpuVerdict verdict =
        gates.Evaluate(sdpa, genome, problem, compiled.compiled.cubin, false, options);
    REQUIRE(verdict.status == Status::kMeasured);
    REQUIRE(verdict.timing);
    const TimingFigures& t = *verdict.timing;
    CHECK(t.median_us > 1.0);
    CHECK(t.p10_us <= t.median_us);
    CHECK(t.median_us <= t.p90_us);
    CHECK(t.min_us <= t.p10_us);
    CHECK(t.repetitions >= 10);
    CHECK(t.recheck_passed);
    CHECK(t.l2_flushed == flush);
    CHECK(t.launches_per_repetition == (flush ? 1 : t.launches_per_repetition));
    if (!flush) CHECK(t.launches_per_repetition > 1);
    // 4 * B * H * S^2 * D flops at the median time.
    CHECK(t.tflops == Approx(4.0 * 2 * 8 * 512 * 512 * 64 / (t.median_us * 1e-6) / 1e12));
    // The SM clock right after the timed launches, within what GPUs run at.
    CHECK(t.sm_clock_mhz > 200);
    CHECK(t.sm_clock_mhz < 4000);
    // The clock averaged over the timed launches (every SM's cycle counter against the global
    // timer) is a clock too, and near the one read right after them.
    CHECK(t.mean_sm_clock_mhz > 200);
    CHECK(t.mean_sm_clock_mhz < 4000);
    CHECK(t.mean_sm_clock_mhz == Approx(t.sm_clock_mhz).epsilon(0.25));
  }
}

}  // namespace
}  // namespace evo

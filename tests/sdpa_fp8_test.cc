// sdpa_fp8: NVRTC compiles on any machine; the gates on a GPU, with a deliberately broken variant
// that the correctness gate must reject.
#include <catch2/catch.hpp>

#include "common/files.h"
#include "engine/configuration.h"
#include "engine/template_library.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/nvrtc_compiler.h"
#include "tests/test_support.h"

namespace evo {
namespace {

Problem Fp8Problem(const Manifest& manifest, int64_t b, int64_t h, int64_t s, int64_t d,
                   int64_t causal) {
  Problem problem = DefaultProblem(manifest);
  problem["B"] = b;
  problem["H"] = h;
  problem["S_q"] = s;
  problem["S_kv"] = s;
  problem["D"] = d;
  problem["CAUSAL"] = causal;
  return problem;
}

TEST_CASE("sdpa_fp8: e4m3 K and V with per-head fp32 scales, from sm_89", "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_fp8").manifest;
  CHECK(manifest.min_sm == 89);
  REQUIRE(manifest.kernel.args.size() == 10);
  CHECK(manifest.kernel.args[1].dtype == "fp8e4m3");
  CHECK(manifest.kernel.args[2].dtype == "fp8e4m3");
  REQUIRE(manifest.kernel.args[3].uniform);
  CHECK(manifest.kernel.args[3].uniform->first > 0);
  // The reference reads the very same inputs.
  for (size_t i = 0; i < 5; ++i) {
    CHECK(manifest.reference.args[i].name == manifest.kernel.args[i].name);
    CHECK(manifest.reference.args[i].dtype == manifest.kernel.args[i].dtype);
  }
  CHECK(manifest.correctness.atol <= 0.06);
}

TEST_CASE("sdpa_fp8 and its reference compile for sm_89 and sm_90", "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& fp8 = library.Find("sdpa_fp8");
  NvrtcCompiler compiler;
  const char* configs[] = {"", "BLOCK_M=128 NUM_WARPS=8 STAGES=3 PERSISTENT=1",
                           "BLOCK_N=32 STAGES=1 FAST_EXP=0", "BLOCK_N=128 STAGES=3"};
  for (const char* arch : {"sm_89", "sm_90"}) {
    for (int64_t d : {64, 128, 256}) {
      const Problem problem = Fp8Problem(fp8.manifest, 2, 8, 512, d, d == 128 ? 1 : 0);
      for (const char* settings : configs) {
        INFO(arch << " D=" << d << " " << settings);
        const CompileOutcome outcome =
            RunCompileGate(fp8, test::GenomeFromSettings(fp8.manifest, settings), problem,
                           ArchByName(arch), compiler, {});
        INFO(outcome.reason << "\n" << outcome.compiled.log);
        // Large tiles at D=256 may not fit; they are refused by name, never miscompiled.
        CHECK((outcome.status == Status::kCompiled || outcome.status == Status::kInvalid ||
               outcome.status == Status::kResourceReject));
        if (d == 64) CHECK(outcome.status == Status::kCompiled);
      }
      const CompileResult reference =
          compiler.Compile({InstantiateSource(fp8, fp8.manifest.reference, nullptr, problem),
                            fp8.manifest.reference.source_path,
                            arch,
                            {}});
      INFO(reference.log);
      CHECK(reference.ok);
    }
  }
}

TEST_CASE("sdpa_fp8 passes the gates on a GPU; one that forgets V_scale does not", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  const std::filesystem::path original = test::SourceDir() / "kernel_templates" / "sdpa_fp8";
  std::string source = ReadFile(original / "sdpa_fp8.cu");
  const std::string normalize = "inv_sum[mf][h] = l > 0.f ? v_scale / l : 0.f;";
  REQUIRE(source.find(normalize) != std::string::npos);
  source.replace(source.find(normalize), normalize.size(),
                 "inv_sum[mf][h] = l > 0.f ? 1.f / l : 0.f;");
  std::string manifest = ReadFile(original / "manifest.json");
  manifest.replace(manifest.find("\"name\": \"sdpa_fp8\""), 18,
                   "\"name\": \"sdpa_fp8_no_v_scale\"");
  test::WriteFile(dir.path() / "broken" / "sdpa_fp8.cu", source);
  test::WriteFile(dir.path() / "broken" / "reference.cu", ReadFile(original / "reference.cu"));
  test::WriteFile(dir.path() / "broken" / "manifest.json", manifest);

  const TemplateLibrary library = TemplateLibrary::Load({dir.path() / "broken"});
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const ArchInfo arch = gates.device().arch_info();
  if (arch.sm < 89) {
    WARN("skipped: sdpa_fp8 needs sm_89, this GPU is " + arch.name);
    return;
  }
  int evaluated = 0;
  for (const char* name : {"sdpa_fp8", "sdpa_fp8_no_v_scale"}) {
    const KernelTemplate& kernel_template = library.Find(name);
    const char* configs[] = {"", "BLOCK_M=128 NUM_WARPS=8 STAGES=3 PERSISTENT=1",
                             "BLOCK_N=32 STAGES=1 FAST_EXP=0", "BLOCK_N=128 STAGES=3"};
    const int64_t shapes[][3] = {{1, 2, 17}, {2, 4, 509}, {2, 8, 512}, {1, 3, 1000}};
    size_t shape_index = 0;
    for (const char* settings : configs) {
      const Genome genome = test::GenomeFromSettings(kernel_template.manifest, settings);
      for (int64_t d : {64, 128, 256}) {
        for (int64_t causal : {0, 1}) {
          const auto& shape = shapes[shape_index++ % std::size(shapes)];
          const Problem problem =
              Fp8Problem(kernel_template.manifest, shape[0], shape[1], shape[2], d, causal);
          INFO(name << " " << settings << " D=" << d << " causal=" << causal << " S=" << shape[2]);
          const CompileOutcome compiled =
              RunCompileGate(kernel_template, genome, problem, arch, compiler, {});
          if (compiled.status != Status::kCompiled) continue;
          const GpuVerdict verdict =
              gates.Evaluate(kernel_template, genome, problem, compiled.compiled.cubin, true, {});
          INFO(verdict.correctness.failure << verdict.error);
          if (std::string(name) == "sdpa_fp8") {
            CHECK(verdict.status == Status::kMeasured);
            CHECK(verdict.correctness.worst.max_abs_error < 0.06);  // the ceiling for fp8
            ++evaluated;
          } else {
            CHECK(verdict.status == Status::kIncorrect);
          }
        }
      }
    }
  }
  CHECK(evaluated >= 16);
}

}  // namespace
}  // namespace evo

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
  // Q_FP8 quantizes Q in the kernel and is held to the bound for fp8 attention (max abs
  // error 0.06); with Q in fp16 only the accumulation order differs from the reference.
  const auto tolerance_with = [&manifest](int64_t q_fp8) {
    Problem problem = DefaultProblem(manifest);
    Genome genome = test::GenomeFromSettings(manifest, q_fp8 ? "Q_FP8=1" : "Q_FP8=0");
    return manifest.correctness.ToleranceFor(
        CompileBindings(manifest, genome, problem, ArchByName("sm_90")));
  };
  CHECK(tolerance_with(0).atol <= 0.004);
  CHECK(tolerance_with(1).atol == 0.06);
  CHECK(tolerance_with(1).rtol == 0);
}

TEST_CASE("sdpa_fp8 and its reference compile for sm_89 and sm_90", "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& fp8 = library.Find("sdpa_fp8");
  NvrtcCompiler compiler;
  const char* configs[] = {"",
                           "BLOCK_M=128 NUM_WARPS=8 STAGES=3 PERSISTENT=1",
                           "BLOCK_N=32 STAGES=1 FAST_EXP=0",
                           "BLOCK_N=128 STAGES=3",
                           "Q_FP8=1",
                           "BLOCK_M=128 NUM_WARPS=4 BLOCK_N=32 STAGES=3 Q_FP8=1 PERSISTENT=1",
                           "BLOCK_N=128 FAST_EXP=0 Q_FP8=1"};
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

// A copy of sdpa_fp8 under another name with one line of its kernel replaced.
void WriteBrokenFp8(const std::filesystem::path& folder, const std::string& name,
                    const std::string& line, const std::string& replacement) {
  const std::filesystem::path original = test::SourceDir() / "kernel_templates" / "sdpa_fp8";
  std::string source = ReadFile(original / "sdpa_fp8.cu");
  REQUIRE(source.find(line) != std::string::npos);
  source.replace(source.find(line), line.size(), replacement);
  std::string manifest = ReadFile(original / "manifest.json");
  const std::string original_name = "\"name\": \"sdpa_fp8\"";
  manifest.replace(manifest.find(original_name), original_name.size(),
                   "\"name\": \"" + name + "\"");
  test::WriteFile(folder / name / "sdpa_fp8.cu", source);
  test::WriteFile(folder / name / "reference.cu", ReadFile(original / "reference.cu"));
  test::WriteFile(folder / name / "manifest.json", manifest);
}

TEST_CASE(
    "sdpa_fp8 passes the gates on a GPU, Q in fp16 and in fp8; one that forgets V_scale or the "
    "row scale of the fp8 Q does not",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  WriteBrokenFp8(dir.path(), "sdpa_fp8_no_v_scale", "inv_sum[mf][h] = l > 0.f ? v_scale / l : 0.f;",
                 "inv_sum[mf][h] = l > 0.f ? 1.f / l : 0.f;");
  // Without the row's scale, scores come out 448 / amax times too large: a far sharper softmax.
  WriteBrokenFp8(dir.path(), "sdpa_fp8_no_q_scale",
                 "q_dequant[mf][h] = amax > 0.f ? amax / 448.f : 1.f;", "q_dequant[mf][h] = 1.f;");
  const TemplateLibrary library = TemplateLibrary::Load(
      {dir.path() / "sdpa_fp8_no_v_scale", dir.path() / "sdpa_fp8_no_q_scale"});
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const ArchInfo arch = gates.device().arch_info();
  if (arch.sm < 89) {
    WARN("skipped: sdpa_fp8 needs sm_89, this GPU is " + arch.name);
    return;
  }
  const std::vector<const char*> fp16_q_configs = {
      "", "BLOCK_M=128 NUM_WARPS=8 STAGES=3 PERSISTENT=1", "BLOCK_N=32 STAGES=1 FAST_EXP=0",
      "BLOCK_N=128 STAGES=3"};
  const std::vector<const char*> fp8_q_configs = {
      "Q_FP8=1", "BLOCK_M=128 NUM_WARPS=4 BLOCK_N=32 STAGES=3 Q_FP8=1 PERSISTENT=1",
      "BLOCK_N=128 FAST_EXP=0 Q_FP8=1", "BLOCK_M=16 NUM_WARPS=1 STAGES=2 Q_FP8=1"};
  std::vector<const char*> all_configs = fp16_q_configs;
  all_configs.insert(all_configs.end(), fp8_q_configs.begin(), fp8_q_configs.end());
  const int64_t shapes[][3] = {{1, 2, 17}, {2, 4, 509}, {2, 8, 512}, {1, 3, 1000}};
  struct Variant {
    const char* name;
    const std::vector<const char*>& configs;
    bool broken;
  };
  const Variant variants[] = {{"sdpa_fp8", all_configs, false},
                              {"sdpa_fp8_no_v_scale", all_configs, true},
                              {"sdpa_fp8_no_q_scale", fp8_q_configs, true}};
  int measured_fp16_q = 0;
  int measured_fp8_q = 0;
  int rejected = 0;
  for (const Variant& variant : variants) {
    const KernelTemplate& kernel_template = library.Find(variant.name);
    size_t shape_index = 0;
    for (const char* settings : variant.configs) {
      const Genome genome = test::GenomeFromSettings(kernel_template.manifest, settings);
      const bool q_fp8 = genome.at("Q_FP8") == 1;
      for (int64_t d : {64, 128, 256}) {
        for (int64_t causal : {0, 1}) {
          const auto& shape = shapes[shape_index++ % std::size(shapes)];
          const Problem problem =
              Fp8Problem(kernel_template.manifest, shape[0], shape[1], shape[2], d, causal);
          INFO(variant.name << " " << settings << " D=" << d << " causal=" << causal
                            << " S=" << shape[2]);
          const CompileOutcome compiled =
              RunCompileGate(kernel_template, genome, problem, arch, compiler, {});
          if (compiled.status != Status::kCompiled) continue;
          const GpuVerdict verdict =
              gates.Evaluate(kernel_template, genome, problem, compiled.compiled.cubin, true, {});
          INFO(verdict.correctness.failure << verdict.error << " max abs error "
                                           << verdict.correctness.worst.max_abs_error);
          if (variant.broken) {
            CHECK(verdict.status == Status::kIncorrect);
            ++rejected;
            continue;
          }
          CHECK(verdict.status == Status::kMeasured);
          CHECK(verdict.correctness.worst.max_abs_error < 0.06);  // the ceiling for fp8
          if (q_fp8) {
            CHECK(verdict.correctness.tolerance.atol == 0.06);
            // Q really went through e4m3: fp16 Q stays within the tight default tolerance.
            CHECK(verdict.correctness.worst.max_abs_error > 0.004);
            ++measured_fp8_q;
          } else {
            CHECK(verdict.correctness.tolerance.atol <= 0.004);
            ++measured_fp16_q;
          }
        }
      }
    }
  }
  CHECK(measured_fp16_q >= 16);
  CHECK(measured_fp8_q >= 16);
  CHECK(rejected >= 32);
}

}  // namespace
}  // namespace evo

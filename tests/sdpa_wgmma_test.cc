// sdpa_fp16_wgmma: compiled for sm_90a from an sm_90 device (NVRTC, any machine); the gates on a
// GPU, with deliberately mis-addressed variants that the correctness gate must reject.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("an arch-specific template compiles for the arch's \"a\" variant", "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_fp16_wgmma").manifest;
  CHECK(manifest.arch_specific);
  CHECK(manifest.min_sm == 90);
  CHECK(manifest.max_sm == 90);
  CHECK_FALSE(library.Find("sdpa_fp16").manifest.arch_specific);
  CHECK_NOTHROW(RequireSupportedArch(manifest, ArchByName("sm_90")));
  CHECK_NOTHROW(RequireSupportedArch(manifest, ArchByName("sm_90a")));
  CHECK_THROWS_WITH(RequireSupportedArch(manifest, ArchByName("sm_89")),
                    Catch::Contains("needs sm_90, not sm_89"));
  CHECK_THROWS_WITH(RequireSupportedArch(manifest, ArchByName("sm_100")),
                    Catch::Contains("needs sm_90, not sm_100"));
  // Arch-specific without an upper bound: evo must know the "a" variant to compile at all.
  Manifest unbounded = manifest;
  unbounded.max_sm = 0;
  CHECK_THROWS_WITH(RequireSupportedArch(unbounded, ArchByName("sm_100")),
                    Catch::Contains("unknown arch 'sm_100a'"));
  const Manifest& plain = library.Find("sdpa_fp16").manifest;
  CHECK_NOTHROW(RequireSupportedArch(plain, ArchByName("sm_120")));
  CHECK_THROWS_WITH(RequireSupportedArch(plain, ArchInfo{"sm_75", 75, 65536}),
                    Catch::Contains("needs sm_80 or newer, not sm_75"));
  CHECK(CompileTarget(ArchByName("sm_90"), true).name == "sm_90a");
  CHECK(CompileTarget(ArchByName("sm_90a"), true).name == "sm_90a");
  CHECK(CompileTarget(ArchByName("sm_90"), false).name == "sm_90");
  CHECK_THROWS_WITH(CompileTarget(ArchByName("sm_89"), true),
                    Catch::Contains("unknown arch 'sm_89a'"));
}

TEST_CASE("sdpa_fp16_wgmma compiles for sm_90a, and its source refuses plain sm_90",
          "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& wgmma = library.Find("sdpa_fp16_wgmma");
  NvrtcCompiler compiler;
  const char* configs[] = {"", "NUM_WG=2", "BLOCK_N=64 STAGES=3", "BLOCK_N=64 STAGES=1 NUM_WG=2",
                           "FAST_EXP=0 STAGES=1"};
  for (int64_t d : {64, 128, 256}) {
    for (int64_t causal : {0, 1}) {
      const Problem problem = test::AttentionProblem(wgmma.manifest, 2, 8, 512, 512, d, causal);
      for (const char* settings : configs) {
        INFO("D=" << d << " causal=" << causal << " " << settings);
        const CompileOutcome outcome =
            RunCompileGate(wgmma, test::GenomeFromSettings(wgmma.manifest, settings), problem,
                           ArchByName("sm_90"), compiler, {});
        INFO(outcome.reason << "\n" << outcome.compiled.log);
        CHECK((outcome.status == Status::kCompiled || outcome.status == Status::kInvalid ||
               outcome.status == Status::kResourceReject));
        if (d == 64) CHECK(outcome.status == Status::kCompiled);
        if (outcome.status == Status::kCompiled) CHECK(outcome.target == "sm_90a");
      }
    }
  }
  const Problem problem = test::AttentionProblem(wgmma.manifest, 2, 8, 512, 512, 64, 0);
  const Genome defaults = DefaultGenome(wgmma.manifest);
  const CompileResult plain = compiler.Compile(
      TemplateCompileRequest(wgmma, wgmma.manifest.main_kernel(), &defaults, problem, "sm_90"));
  CHECK_FALSE(plain.ok);
  CHECK(plain.log.find("needs sm_90a") != std::string::npos);
}

// A copy of sdpa_fp16_wgmma under another name with one piece of its kernel replaced.
void WriteBrokenWgmma(const std::filesystem::path& folder, const std::string& name,
                      const std::string& text, const std::string& replacement) {
  // The MMA addressing lives in the device library, shared with sdpa_hopper.
  test::WriteTemplateVariantWithBrokenHeader(folder / name, "sdpa_fp16_wgmma", name,
                                             "wgmma_attention.cuh", text, replacement);
}

TEST_CASE(
    "sdpa_fp16_wgmma passes the gates on a GPU; variants with a wrong k16 step or a wrong "
    "stride between V's column blocks do not",
    "[gpu]") {
  // The variants are written and compiled on any machine, so that a change to the code they
  // break fails here and not only on the GPU.
  test::TempDir dir;
  // Q's k16 step of 16 bytes instead of 32: every score mixes the wrong columns of Q.
  WriteBrokenWgmma(dir.path(), "wgmma_half_k_step",
                   "q_tile + (ks / 4) * QRows * 128 + q_row0 * 128 + (ks % 4) * 32",
                   "q_tile + (ks / 4) * QRows * 128 + q_row0 * 128 + (ks % 4) * 16");
  // V's 64-column blocks read as if adjacent: wrong from D = 128 on (one block at D = 64).
  WriteBrokenWgmma(dir.path(), "wgmma_v_block_stride",
                   "smem_desc_sw128(v_tile + kk * 16 * 128, BlockN * 128)",
                   "smem_desc_sw128(v_tile + kk * 16 * 128, 1024)");
  const TemplateLibrary library = TemplateLibrary::Load(
      {dir.path() / "wgmma_half_k_step", dir.path() / "wgmma_v_block_stride"});
  NvrtcCompiler compiler;
  for (const char* name : {"wgmma_half_k_step", "wgmma_v_block_stride"}) {
    const KernelTemplate& variant = library.Find(name);
    INFO(name);
    const CompileOutcome compiled =
        RunCompileGate(variant, DefaultGenome(variant.manifest),
                       test::AttentionProblem(variant.manifest, 1, 2, 200, 200, 128, 0),
                       ArchByName("sm_90"), compiler, {});
    INFO(compiled.compiled.log);
    REQUIRE(compiled.status == Status::kCompiled);
  }
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  GpuGates gates(0, compiler);
  const ArchInfo arch = gates.device().arch_info();
  if (arch.name != "sm_90") {
    WARN("skipped: sdpa_fp16_wgmma needs an sm_90 GPU, this one is " + arch.name);
    return;
  }
  const char* configs[] = {"", "NUM_WG=2", "BLOCK_N=64 STAGES=3", "BLOCK_N=64 STAGES=1 NUM_WG=2",
                           "FAST_EXP=0 STAGES=1"};
  const int64_t shapes[][3] = {{1, 2, 17}, {2, 4, 509}, {2, 8, 512}, {1, 3, 1000}};
  std::map<std::string, int> measured;
  std::map<std::string, int> rejected;
  for (const char* name : {"sdpa_fp16_wgmma", "wgmma_half_k_step", "wgmma_v_block_stride"}) {
    const KernelTemplate& kernel_template = library.Find(name);
    size_t shape_index = 0;
    for (const char* settings : configs) {
      const Genome genome = test::GenomeFromSettings(kernel_template.manifest, settings);
      for (int64_t d : {64, 128, 256}) {
        for (int64_t causal : {0, 1}) {
          const auto& shape = shapes[shape_index++ % std::size(shapes)];
          const Problem problem = test::AttentionProblem(kernel_template.manifest, shape[0],
                                                         shape[1], shape[2], shape[2], d, causal);
          INFO(name << " " << settings << " D=" << d << " causal=" << causal << " S=" << shape[2]);
          const CompileOutcome compiled =
              RunCompileGate(kernel_template, genome, problem, arch, compiler, {});
          if (compiled.status != Status::kCompiled) continue;
          const GpuVerdict verdict =
              gates.Evaluate(kernel_template, genome, problem, compiled.compiled.cubin, true, {});
          INFO(verdict.correctness.failure << verdict.error << " max abs error "
                                           << verdict.correctness.worst.max_abs_error);
          const std::string variant = name;
          if (variant == "sdpa_fp16_wgmma") {
            CHECK(verdict.status == Status::kMeasured);
            ++measured[variant];
          } else if (variant == "wgmma_v_block_stride" && d == 64) {
            CHECK(verdict.status == Status::kMeasured);  // one column block: nothing to stride
          } else {
            CHECK(verdict.status == Status::kIncorrect);
            ++rejected[variant];
          }
        }
      }
    }
  }
  WARN("sdpa_fp16_wgmma: measured " << measured["sdpa_fp16_wgmma"] << ", rejected "
                                    << rejected["wgmma_half_k_step"] << " with a half k step and "
                                    << rejected["wgmma_v_block_stride"]
                                    << " with V's blocks adjacent");
  CHECK(measured["sdpa_fp16_wgmma"] >= 20);
  CHECK(rejected["wgmma_half_k_step"] >= 20);
  CHECK(rejected["wgmma_v_block_stride"] >= 10);
}

}  // namespace
}  // namespace evo

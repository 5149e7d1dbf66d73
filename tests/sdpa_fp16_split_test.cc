// sdpa_fp16's split-KV (SPLITS, LAST_CTA_COMBINES) and grouped-query attention (H_kv, PACK_GQA):
// the manifest's kernels, scratch and constraints, compiles on any machine, and on a GPU the
// gates' verdicts on the real kernel and on the broken variants of tests/sdpa_variants.cc.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "evaluator/compile_gate.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

struct Shape {
  int64_t b, h, h_kv, s_q, s_kv, d, causal;
};

Problem SdpaProblem(const Manifest& manifest, const Shape& s) {
  Problem problem = CompleteProblem(manifest, {{"B", s.b},
                                               {"H", s.h},
                                               {"H_kv", s.h_kv},
                                               {"S_q", s.s_q},
                                               {"S_kv", s.s_kv},
                                               {"D", s.d},
                                               {"CAUSAL", s.causal}});
  CheckProblem(manifest, problem);
  return problem;
}

// A decode tile (one warp, 16 rows) that the broken variants' settings are added to, and a task
// where every breakage matters: query heads 4 to a KV head, one query, 16 KV tiles of 64.
constexpr const char* kDecodeTile = "BLOCK_M=16 NUM_WARPS=1 BLOCK_N=64 STAGES=3";
constexpr Shape kBreakageTask = {2, 8, 2, 1, 1000, 128, 0};

std::string Settings(const std::string& base, const std::string& more) {
  return more.empty() ? base : base + " " + more;
}

// The check problems of `task` as the correctness gate derives them (correctness.problems):
// overrides evaluated over the task, H_kv following H unless it is overridden.
std::vector<Problem> DerivedCheckProblems(const Manifest& manifest, const Problem& task) {
  std::vector<Problem> problems;
  for (const auto& overrides : manifest.correctness.problems) {
    Problem given;
    for (const ProblemParamSpec& param : manifest.problem) {
      if (!param.default_expr) given[param.name] = task.at(param.name);
    }
    for (const auto& [name, expr] : overrides) {
      SetProblemParam(manifest, name, expr.Evaluate(task), given);
    }
    Problem problem = CompleteProblem(manifest, given);
    CheckProblem(manifest, problem);
    problems.push_back(problem);
  }
  return problems;
}

TEST_CASE(
    "sdpa_fp16's K and V have H_kv heads; a second kernel combines splits unless the last "
    "CTA does; scratch is one element where unused",
    "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_fp16").manifest;
  REQUIRE(manifest.kernels.size() == 2);
  CHECK(manifest.kernels[1].entry == "sdpa_fp16_combine");
  REQUIRE(manifest.FindProblemParam("H_kv") != nullptr);
  CHECK(DefaultProblem(manifest).at("H_kv") == DefaultProblem(manifest).at("H"));
  Problem uneven = SdpaProblem(manifest, {2, 8, 8, 1, 64, 64, 0});
  uneven["H_kv"] = 3;
  CHECK_THROWS_WITH(CheckProblem(manifest, uneven), Catch::Contains("each KV head serves"));

  const Problem problem = SdpaProblem(manifest, {4, 32, 8, 3, 4096, 128, 0});
  const ArchInfo& arch = ArchByName("sm_90");
  const auto bindings = [&](const char* settings) {
    return CompileBindings(manifest, test::GenomeFromSettings(manifest, settings), problem, arch);
  };
  const auto elements = [&](const Bindings& b, const std::string& name) {
    for (const KernelArgSpec& arg : manifest.main_kernel().args) {
      if (arg.name != name) continue;
      int64_t n = 1;
      for (const Expression& dim : arg.shape) n *= dim.Evaluate(b);
      return n;
    }
    FAIL("no argument " << name);
    return int64_t{0};
  };
  struct Case {
    const char* settings;
    bool combine_kernel;
    int64_t o_partial, lse_partial, arrivals;
  };
  const Case cases[] = {
      {"SPLITS=1", false, 1, 1, 1},
      {"SPLITS=4", true, 4 * 4 * 32 * 3 * 128, 4 * 4 * 32 * 3, 1},
      // One arrival counter per (batch, head, m-tile): 3 queries, one 64-row tile.
      {"SPLITS=4 LAST_CTA_COMBINES=1", false, 4 * 4 * 32 * 3 * 128, 4 * 4 * 32 * 3, 4 * 32 * 1},
      // Packed: per (batch, KV head, m-tile of 3 * 4 = 12 rows of 16).
      {"BLOCK_M=16 NUM_WARPS=1 SPLITS=8 LAST_CTA_COMBINES=1 PACK_GQA=1", false,
       8 * 4 * 32 * 3 * 128, 8 * 4 * 32 * 3, 4 * 8 * 1},
      {"BLOCK_M=16 NUM_WARPS=1 SPLITS=2 PACK_GQA=0 LAST_CTA_COMBINES=1", false,
       2 * 4 * 32 * 3 * 128, 2 * 4 * 32 * 3, 4 * 32 * 1},
  };
  for (const Case& c : cases) {
    INFO(c.settings);
    const Bindings b = bindings(c.settings);
    CHECK(manifest.main_kernel().LaunchedFor(b));
    CHECK(manifest.kernels[1].LaunchedFor(b) == c.combine_kernel);
    CHECK(elements(b, "O_partial") == c.o_partial);
    CHECK(elements(b, "LSE_partial") == c.lse_partial);
    CHECK(elements(b, "arrivals") == c.arrivals);
  }
  for (const KernelArgSpec& arg : manifest.main_kernel().args) {
    if (arg.name == "arrivals") CHECK(arg.zero == ScratchZero::kOnce);
  }
}

TEST_CASE(
    "sdpa_fp16's check problems include S_q = 1, S_kv not a multiple of any split, and "
    "H_kv < H, whatever the task",
    "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const Manifest& manifest = library.Find("sdpa_fp16").manifest;
  // The decode targets, a prefill task, and the recording's shape.
  const Shape tasks[] = {{1, 16, 16, 1, 4096, 128, 0}, {16, 32, 32, 1, 4096, 128, 0},
                         {64, 32, 8, 1, 8192, 128, 0}, {8, 32, 8, 16, 8192, 128, 1},
                         {1, 32, 8, 1, 32768, 128, 0}, {2, 8, 8, 512, 512, 64, 1},
                         {2, 8, 2, 1, 1000, 128, 0}};
  for (const Shape& shape : tasks) {
    const Problem task = SdpaProblem(manifest, shape);
    INFO(FormatProblem(manifest, task));
    bool decode = false;
    bool uneven = false;
    bool grouped = false;
    bool grouped_not_multi_query = false;
    for (const Problem& problem : DerivedCheckProblems(manifest, task)) {
      decode |= problem.at("S_q") == 1;
      // Not a multiple of a 16-key tile times 2: every split count leaves a short last tile.
      uneven |= problem.at("S_kv") % 32 != 0 && problem.at("S_kv") > 512;
      grouped |= problem.at("H_kv") < problem.at("H");
      grouped_not_multi_query |= problem.at("H_kv") > 1 && problem.at("H_kv") < problem.at("H");
    }
    CHECK(decode);
    CHECK(uneven);
    CHECK(grouped);
    // h % H_kv and h / (H / H_kv) agree where H_kv = 1: a check with two KV heads tells them apart.
    CHECK(grouped_not_multi_query);
  }
}

TEST_CASE("sdpa_fp16's split-KV and packing constraints refuse what cannot help, by name",
          "[compile]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  NvrtcCompiler compiler;
  struct Case {
    const char* settings;
    Shape shape;
    const char* constraint;
  };
  const Case cases[] = {
      {"LAST_CTA_COMBINES=1", {2, 8, 2, 1, 4096, 128, 0}, "last_cta_combines_needs_splits"},
      {"PACK_GQA=1", {2, 8, 8, 1, 4096, 128, 0}, "pack_gqa_needs_shared_heads"},
      // 16 tiles of 64 keys for 32 splits; under causal masking 16 queries see one tile.
      {"BLOCK_N=64 SPLITS=32", {2, 8, 2, 1, 1000, 128, 0}, "splits_have_keys"},
      {"BLOCK_N=64 SPLITS=2", {2, 8, 2, 16, 8192, 128, 1}, "splits_have_keys"},
  };
  for (const Case& c : cases) {
    INFO(c.settings);
    const CompileOutcome outcome =
        RunCompileGate(sdpa, test::GenomeFromSettings(sdpa.manifest, c.settings),
                       SdpaProblem(sdpa.manifest, c.shape), ArchByName("sm_90"), compiler, {});
    CHECK(outcome.status == Status::kInvalid);
    REQUIRE(outcome.violation);
    CHECK(outcome.violation->name == c.constraint);
  }
}

// Decode tiles (one warp of 16 rows, deep pipelines), packed or not, both ways of combining, and
// larger tiles with the producer warp, persistence and the lazy rescale, at D = 64 and 128.
const struct {
  const char* settings;
  int64_t d;
  int64_t causal;
} kSplitSample[] = {
    {"BLOCK_M=16 NUM_WARPS=1 BLOCK_N=64 STAGES=4 SPLITS=8", 128, 0},
    {"BLOCK_M=16 NUM_WARPS=1 BLOCK_N=64 STAGES=3 SPLITS=4 PACK_GQA=1", 128, 0},
    {"BLOCK_M=16 NUM_WARPS=1 BLOCK_N=128 STAGES=2 SPLITS=4 PACK_GQA=1 LAST_CTA_COMBINES=1", 128, 0},
    {"BLOCK_M=16 NUM_WARPS=1 BLOCK_N=64 STAGES=4 SPLITS=32 LAST_CTA_COMBINES=1 PERSISTENT=1", 128,
     0},
    {"BLOCK_M=16 NUM_WARPS=1 BLOCK_N=32 STAGES=4 SPLITS=16 PACK_GQA=1", 128, 1},
    {"BLOCK_M=32 NUM_WARPS=2 BLOCK_N=64 STAGES=3 SPLITS=4 PACK_GQA=1 WARP_SPECIALIZED=1", 128, 0},
    {"BLOCK_M=64 NUM_WARPS=4 BLOCK_N=64 STAGES=2 SPLITS=2 PACK_GQA=1 LAZY_RESCALE=1", 128, 1},
    {"BLOCK_M=16 NUM_WARPS=1 BLOCK_N=128 STAGES=4 SPLITS=8 PACK_GQA=1 LAST_CTA_COMBINES=1", 64, 0},
    {"BLOCK_M=64 NUM_WARPS=4 BLOCK_N=64 STAGES=2 SPLITS=4 PACK_GQA=1 PERSISTENT=1 "
     "WARP_SPECIALIZED=1 LAST_CTA_COMBINES=1",
     64, 1},
    {"BLOCK_M=128 NUM_WARPS=8 BLOCK_N=64 STAGES=3 SPLITS=2 LAST_CTA_COMBINES=1 FAST_EXP=0", 64, 1},
};

TEST_CASE(
    "split-KV and grouped-query configurations of sdpa_fp16 compile without spills on "
    "sm_80 and sm_90",
    "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  NvrtcCompiler compiler;
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (const auto& config : kSplitSample) {
      // Four query heads per KV head, 8192 keys: every constraint holds for every config
      // (under causal masking with as many queries: a short query only sees the first tiles).
      const Problem problem = SdpaProblem(
          sdpa.manifest, {8, 32, 8, config.causal ? 8192 : 16, 8192, config.d, config.causal});
      INFO(arch << " D=" << config.d << " causal=" << config.causal << " " << config.settings);
      const CompileOutcome outcome =
          RunCompileGate(sdpa, test::GenomeFromSettings(sdpa.manifest, config.settings), problem,
                         ArchByName(arch), compiler, {});
      INFO(outcome.reason << "\n" << outcome.compiled.log);
      REQUIRE(outcome.status == Status::kCompiled);
      REQUIRE(outcome.resources);
      CHECK(outcome.resources->function == "sdpa_fp16_fwd");
      CHECK_FALSE(outcome.resources->spills());
      const KernelResources* combine = FindKernel(outcome.compiled.kernels, "sdpa_fp16_combine");
      REQUIRE(combine != nullptr);
      CHECK_FALSE(combine->spills());
    }
  }
}

TEST_CASE(
    "the broken split-KV and grouped-query variants compile on any machine, where they "
    "matter",
    "[compile][nvrtc]") {
  NvrtcCompiler compiler;
  int compiled = 0;
  for (const test::SdpaBreakage& breakage : test::SdpaBreakages()) {
    if (breakage.settings.empty()) continue;
    test::TempDir dir;
    test::WriteBrokenSdpa(dir.path(), breakage);
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& broken = library.Find(test::BrokenSdpaName(breakage));
    for (const std::string& settings : breakage.settings) {
      INFO(breakage.name << " " << settings);
      const CompileOutcome outcome = RunCompileGate(
          broken, test::GenomeFromSettings(broken.manifest, Settings(kDecodeTile, settings)),
          SdpaProblem(broken.manifest, kBreakageTask), ArchByName("sm_80"), compiler, {});
      INFO(outcome.reason << "\n" << outcome.compiled.log);
      CHECK(outcome.status == Status::kCompiled);
      ++compiled;
    }
  }
  CHECK(compiled >= 8);
}

GpuVerdict Verify(GpuGates& gates, Compiler& compiler, const KernelTemplate& kernel_template,
                  const Genome& genome, const Problem& problem) {
  const CompileOutcome compiled =
      RunCompileGate(kernel_template, genome, problem, gates.device().arch_info(), compiler, {});
  INFO(compiled.reason << "\n" << compiled.compiled.log);
  REQUIRE(compiled.status == Status::kCompiled);
  return gates.Evaluate(kernel_template, genome, problem, compiled.compiled.cubin, true, {});
}

TEST_CASE(
    "sdpa_fp16 passes the gates on decode and short prefill problems with split KV and "
    "grouped query heads",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const char* configs[] = {
      "",
      "PACK_GQA=1",
      "BLOCK_M=16 NUM_WARPS=1 BLOCK_N=64 STAGES=4 SPLITS=4",
      "BLOCK_M=16 NUM_WARPS=1 BLOCK_N=64 STAGES=3 SPLITS=8 PACK_GQA=1",
      "BLOCK_M=16 NUM_WARPS=1 BLOCK_N=128 STAGES=3 SPLITS=4 PACK_GQA=1 LAST_CTA_COMBINES=1",
      "BLOCK_M=16 NUM_WARPS=1 BLOCK_N=32 STAGES=4 SPLITS=2 LAST_CTA_COMBINES=1 PERSISTENT=1",
      "BLOCK_M=32 NUM_WARPS=2 BLOCK_N=64 STAGES=2 SPLITS=4 PACK_GQA=1 PERSISTENT=1 "
      "LAST_CTA_COMBINES=1",
      "BLOCK_M=64 NUM_WARPS=4 BLOCK_N=32 STAGES=3 SPLITS=2 WARP_SPECIALIZED=1 PACK_GQA=1",
      "BLOCK_M=64 NUM_WARPS=4 BLOCK_N=32 STAGES=2 SPLITS=4 WARP_SPECIALIZED=1 PERSISTENT=1 "
      "LAST_CTA_COMBINES=1 LAZY_RESCALE=1",
      "BLOCK_M=32 NUM_WARPS=2 BLOCK_N=16 STAGES=1 SPLITS=16 FAST_EXP=0 PACK_GQA=1",
  };
  // Decode (one query, or five) with 4, 8 and 1 query heads per KV head, and causal prefills with
  // fewer queries than keys (top-left aligned) and as many, short and long enough for 8 splits of
  // 64 keys. The check problems run each under the same causal masking.
  const Shape shapes[] = {{2, 8, 2, 1, 1000, 128, 0},  {3, 8, 1, 1, 777, 64, 0},
                          {2, 8, 8, 1, 513, 128, 0},   {2, 4, 2, 40, 300, 64, 1},
                          {1, 8, 4, 130, 130, 128, 1}, {1, 16, 2, 5, 2000, 128, 0},
                          {1, 8, 2, 520, 520, 64, 1}};
  int evaluated = 0;
  int split = 0;
  int packed = 0;
  int last_cta = 0;
  for (const char* settings : configs) {
    const Genome genome = test::GenomeFromSettings(sdpa.manifest, settings);
    for (const Shape& shape : shapes) {
      const Problem problem = SdpaProblem(sdpa.manifest, shape);
      INFO(settings << " | " << FormatProblem(sdpa.manifest, problem));
      const CompileOutcome compiled =
          RunCompileGate(sdpa, genome, problem, gates.device().arch_info(), compiler, {});
      if (compiled.status == Status::kInvalid) {
        // Packing without shared heads, or more splits than the keys' tiles: refused by name.
        REQUIRE(compiled.violation);
        const std::string& name = compiled.violation->name;
        CHECK((name == "pack_gqa_needs_shared_heads" || name == "splits_have_keys" ||
               name == "smem_fits_block"));
        continue;
      }
      INFO(compiled.reason << "\n" << compiled.compiled.log);
      REQUIRE(compiled.status == Status::kCompiled);
      const GpuVerdict verdict =
          gates.Evaluate(sdpa, genome, problem, compiled.compiled.cubin, true, {});
      INFO(verdict.correctness.failure << verdict.error);
      CHECK(verdict.status == Status::kMeasured);
      CHECK(verdict.correctness.passed);
      CHECK(verdict.correctness.worst.max_abs_error < 0.005);
      ++evaluated;
      split += genome.at("SPLITS") > 1;
      packed += genome.at("PACK_GQA");
      last_cta += genome.at("LAST_CTA_COMBINES");
    }
  }
  CHECK(evaluated >= 50);
  CHECK(split >= 35);
  CHECK(packed >= 25);
  CHECK(last_cta >= 18);
}

TEST_CASE(
    "the gates reject a combine that drops a split or ignores the log-sum-exps, and query "
    "heads reading the wrong KV head, packed or not; the real kernel passes each",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const TemplateLibrary good_library = TemplateLibrary::Load({});
  const KernelTemplate& good = good_library.Find("sdpa_fp16");
  int rejected = 0;
  for (const test::SdpaBreakage& breakage : test::SdpaBreakages()) {
    if (breakage.settings.empty()) continue;
    test::TempDir dir;
    test::WriteBrokenSdpa(dir.path(), breakage);
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& broken = library.Find(test::BrokenSdpaName(breakage));
    for (const std::string& settings : breakage.settings) {
      const std::string all = Settings(kDecodeTile, settings);
      INFO(breakage.name << " " << all);
      const GpuVerdict verdict =
          Verify(gates, compiler, broken, test::GenomeFromSettings(broken.manifest, all),
                 SdpaProblem(broken.manifest, kBreakageTask));
      INFO(verdict.correctness.failure << verdict.error);
      CHECK(verdict.status == Status::kIncorrect);
      CHECK_FALSE(verdict.correctness.passed);
      CHECK(verdict.correctness.worst.over_tolerance > 0);
      rejected += verdict.status == Status::kIncorrect;
      const GpuVerdict fine =
          Verify(gates, compiler, good, test::GenomeFromSettings(good.manifest, all),
                 SdpaProblem(good.manifest, kBreakageTask));
      INFO(fine.correctness.failure << fine.error);
      CHECK(fine.status == Status::kMeasured);
      CHECK(fine.correctness.passed);
    }
  }
  CHECK(rejected >= 8);
}

}  // namespace
}  // namespace evo

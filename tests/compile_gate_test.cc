#include "evaluator/compile_gate.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "engine/search_space.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/template_library.h"
#include "tests/test_support.h"

namespace evo {
namespace {

struct SdpaConfig {
  const char* settings;  // space-separated KNOB=VALUE
  int64_t head_dim;
  int64_t causal;
};

CompileOutcome CompileSdpa(const SdpaConfig& config, const std::string& arch,
                           bool allow_spills = false) {
  static const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  Problem problem = DefaultProblem(sdpa.manifest);
  problem["D"] = config.head_dim;
  problem["CAUSAL"] = config.causal;
  NvrtcCompiler compiler;
  return RunCompileGate(sdpa, test::GenomeFromSettings(sdpa.manifest, config.settings), problem,
                        ArchByName(arch), compiler, {allow_spills});
}

// A sample across the knob space: tile shapes, warp counts, pipeline depths, both exp paths,
// persistent and not, both head dimensions, causal and not.
const SdpaConfig kValidSample[] = {
    {"", 64, 0},
    {"", 128, 1},
    {"BLOCK_M=128 BLOCK_N=64 NUM_WARPS=8 STAGES=2 FAST_EXP=0 PERSISTENT=1", 128, 1},
    {"BLOCK_M=64 BLOCK_N=32 NUM_WARPS=4 STAGES=3 PERSISTENT=1", 128, 1},
    {"BLOCK_M=64 BLOCK_N=32 NUM_WARPS=4 STAGES=1", 128, 0},
    {"BLOCK_M=16 BLOCK_N=16 NUM_WARPS=1 STAGES=4 FAST_EXP=0", 64, 1},
    {"BLOCK_M=128 BLOCK_N=128 NUM_WARPS=8 STAGES=2 PERSISTENT=1", 64, 0},
    {"BLOCK_M=32 BLOCK_N=64 NUM_WARPS=2 STAGES=3", 64, 0},
};

TEST_CASE(
    "a sample of valid sdpa_fp16 configurations passes the compile gate on sm_80, sm_89 "
    "and sm_90",
    "[compile][nvrtc]") {
  for (const char* arch : {"sm_80", "sm_89", "sm_90"}) {
    for (const SdpaConfig& config : kValidSample) {
      INFO(arch << " D=" << config.head_dim << " causal=" << config.causal << " "
                << config.settings);
      const CompileOutcome outcome = CompileSdpa(config, arch);
      INFO(outcome.reason << "\n" << outcome.compiled.log);
      CHECK(outcome.status == Status::kCompiled);
      REQUIRE(outcome.resources);
      CHECK(outcome.resources->arch == arch);
      CHECK(outcome.resources->registers > 0);
      CHECK(outcome.resources->registers <= 255);
      CHECK_FALSE(outcome.resources->spills());
      CHECK(outcome.dynamic_smem > 0);
      CHECK_FALSE(outcome.compiled.cubin.empty());
    }
  }
}

TEST_CASE(
    "invalid sdpa_fp16 configurations are rejected by the named constraint before any "
    "compile",
    "[compile]") {
  struct Case {
    SdpaConfig config;
    const char* arch;
    const char* constraint;
  };
  const Case cases[] = {
      {{"BLOCK_M=16 NUM_WARPS=4", 64, 0}, "sm_90", "warp_rows_multiple_of_16"},
      {{"BLOCK_M=64 NUM_WARPS=8", 128, 1}, "sm_80", "warp_rows_multiple_of_16"},
      {{"BLOCK_M=256 BLOCK_N=128 NUM_WARPS=8 STAGES=4", 128, 0}, "sm_90", "smem_fits_block"},
      // 160 KiB fits an H100 and an A100 block but not an sm_89 one.
      {{"BLOCK_M=128 BLOCK_N=128 NUM_WARPS=8 STAGES=2", 128, 0}, "sm_89", "smem_fits_block"},
      // Four m16 tiles of S and O per warp: 4 * (128 + 128) / 2 = 512 fp32 accumulators.
      {{"BLOCK_M=128 BLOCK_N=128 NUM_WARPS=2 STAGES=1", 128, 0},
       "sm_90",
       "accumulators_fit_registers"},
  };
  for (const Case& c : cases) {
    INFO(c.arch << " " << c.config.settings);
    const CompileOutcome outcome = CompileSdpa(c.config, c.arch);
    CHECK(outcome.status == Status::kInvalid);
    REQUIRE(outcome.violation);
    CHECK(outcome.violation->name == c.constraint);
    CHECK(outcome.reason.find(c.constraint) != std::string::npos);
    CHECK(outcome.source.empty());
    CHECK(outcome.compiled.log.empty());
  }
  CHECK(CompileSdpa({"BLOCK_M=128 BLOCK_N=128 NUM_WARPS=8 STAGES=2", 128, 0}, "sm_80").status !=
        Status::kInvalid);
}

TEST_CASE("an sdpa_fp16 configuration that spills is rejected with its figures",
          "[compile][nvrtc]") {
  // Two m16 tiles of S (128 keys) and O (64 dims) per warp: 192 fp32 accumulators, at the
  // manifest's limit, and more than ptxas can keep beside the addresses and fragments.
  const SdpaConfig spilling = {"BLOCK_M=64 BLOCK_N=128 NUM_WARPS=2 STAGES=1", 64, 0};
  const CompileOutcome rejected = CompileSdpa(spilling, "sm_90");
  CHECK(rejected.status == Status::kResourceReject);
  REQUIRE(rejected.resources);
  CHECK(rejected.resources->spill_stores > 0);
  CHECK(rejected.resources->spill_loads > 0);
  CHECK(rejected.resources->registers == 255);
  CHECK(rejected.reason.find("spills registers") != std::string::npos);

  const CompileOutcome allowed = CompileSdpa(spilling, "sm_90", true);
  CHECK(allowed.status == Status::kCompiled);
  CHECK(allowed.resources->spill_stores == rejected.resources->spill_stores);
}

const char* kStaticSmemSource = R"(extern "C" __global__ void tiny(float* x, int n) {
  __shared__ float hoard[TILE * 20000];
  hoard[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = hoard[(threadIdx.x * 7 + n) % (TILE * 20000)];
}
extern "C" __global__ void tiny_reference(float* x, int n) {}
)";

TEST_CASE("user templates: static shared memory over the limit and compile errors",
          "[compile][nvrtc]") {
  test::TempDir dir;
  test::WriteTinyTemplate(dir.path() / "hoard", "hoard", kStaticSmemSource);
  test::WriteTinyTemplate(dir.path() / "typo", "typo",
                          "extern \"C\" __global__ void tiny(float* x, int n) {\n"
                          "  x[0] = TILE +;\n}\n");
  const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
  NvrtcCompiler compiler;
  const ArchInfo& sm90 = ArchByName("sm_90");

  const KernelTemplate& hoard = library.Find("hoard");
  const CompileOutcome over = RunCompileGate(hoard, DefaultGenome(hoard.manifest),
                                             DefaultProblem(hoard.manifest), sm90, compiler, {});
  CHECK(over.status == Status::kResourceReject);
  REQUIRE(over.resources);
  CHECK(over.resources->smem_static == 80000);
  CHECK(over.reason.find("80000 bytes of static shared memory") != std::string::npos);

  Genome tile4 = DefaultGenome(hoard.manifest);
  tile4["TILE"] = 4;
  const CompileOutcome invalid =
      RunCompileGate(hoard, tile4, DefaultProblem(hoard.manifest), sm90, compiler, {});
  CHECK(invalid.status == Status::kInvalid);
  CHECK(invalid.violation->name == "tile_below_four");

  const KernelTemplate& typo = library.Find("typo");
  const CompileOutcome broken = RunCompileGate(typo, DefaultGenome(typo.manifest),
                                               DefaultProblem(typo.manifest), sm90, compiler, {});
  CHECK(broken.status == Status::kCompileError);
  CHECK_FALSE(broken.compiled.ok);
  // The #line directive makes NVRTC point at the template's own line 2.
  CHECK(broken.compiled.log.find("tiny.cu(2)") != std::string::npos);
  CHECK(broken.compiled.log.find("error") != std::string::npos);
}

TEST_CASE("a user template compiles with the device library's headers and its own",
          "[compile][nvrtc]") {
  test::TempDir dir;
  test::WriteTinyTemplate(dir.path(), "tiny_library", R"(#include "evo/core.cuh"
#include "scale.cuh"
extern "C" __global__ void tiny(float* x, int n) {
  const int i = (blockIdx.x * blockDim.x + evo::thread_index()) * TILE;
  for (int t = 0; t < TILE; ++t) if (i + t < n) x[i + t] = evo::exp2_approx(kScale);
}
extern "C" __global__ void tiny_reference(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = exp2f(kScale);
}
)");
  test::WriteFile(dir.path() / "scale.cuh", "#pragma once\nconstexpr float kScale = 0.f;\n");
  const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
  const KernelTemplate& tiny = library.Find("tiny_library");
  REQUIRE(tiny.headers.size() == 2);
  NvrtcCompiler compiler;
  const CompileOutcome outcome =
      RunCompileGate(tiny, DefaultGenome(tiny.manifest), DefaultProblem(tiny.manifest),
                     ArchByName("sm_80"), compiler, {});
  INFO(outcome.compiled.log);
  CHECK(outcome.status == Status::kCompiled);
  // The same source without the headers does not compile: they reach NVRTC with the request.
  const Genome defaults = DefaultGenome(tiny.manifest);
  CompileRequest bare = TemplateCompileRequest(tiny, tiny.manifest.main_kernel(), &defaults,
                                               DefaultProblem(tiny.manifest), "sm_80");
  REQUIRE(bare.headers.size() == 2);
  bare.headers.clear();
  CHECK_FALSE(compiler.Compile(bare).ok);
}

TEST_CASE(
    "a configuration a template's expressions cannot evaluate is invalid, naming the expression",
    "[compile]") {
  test::TempDir dir;
  const auto folder = dir.path() / "sdpa_fp16";
  std::filesystem::create_directories(folder);
  for (const char* file : {"manifest.json", "sdpa_fp16.cu", "starting_points.json"}) {
    std::filesystem::copy_file(test::SourceDir() / "kernel_templates" / "sdpa_fp16" / file,
                               folder / file);
  }
  nlohmann::json manifest = nlohmann::json::parse(ReadFile(folder / "manifest.json"));
  manifest["constraints"].push_back({{"name", "divides"},
                                     {"expr", "64 / (BLOCK_M - 32) != 99"},
                                     {"doc", "a rule that cannot judge BLOCK_M = 32"}});
  manifest["derived"].push_back({{"name", "PER_WARP"}, {"expr", "256 / (NUM_WARPS - 1)"}});
  // Launches no GPU could make: a block of no threads where NUM_WARPS is 2, a grid over CUDA's
  // 65535 in y with STAGES=4, an i32 scalar out of range without FAST_EXP, a tensor of negative
  // extent with BLOCK_N=32.
  nlohmann::json& kernel = manifest["kernels"][0];
  kernel["block"][1] = "NUM_WARPS == 2 ? 0 : 1";
  kernel["grid"][1] = "PERSISTENT ? 1 : (STAGES == 4 ? 65536 : GROUPS)";
  // Clusters: of 16 CTAs (over the portable 8) with BLOCK_N=128, of 3 (not dividing the grid's
  // 8 query tiles) with BLOCK_N=64, of 2 with BLOCK_N=16; only with LAZY_RESCALE.
  kernel["cluster"] = {"LAZY_RESCALE ? (BLOCK_N == 128 ? 16 : (BLOCK_N == 16 ? 2 : 3)) : 1", "1",
                       "1"};
  bool edited_scalar = false, edited_scratch = false;
  for (nlohmann::json& arg : kernel["args"]) {
    if (arg["name"] == "S_q" && arg["kind"] == "scalar") {
      arg["value"] = "FAST_EXP == 0 ? 4294967296 : S_q";
      edited_scalar = true;
    }
    if (arg["name"] == "arrivals") {
      arg["shape"][0] = "LAST_CTA_COMBINES ? B * GROUPS * M_TILES : (BLOCK_N == 32 ? -4 : 1)";
      edited_scratch = true;
    }
  }
  REQUIRE(edited_scalar);
  REQUIRE(edited_scratch);
  test::WriteFile(folder / "manifest.json", manifest.dump(2));
  const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
  const KernelTemplate& sdpa = library.Find("sdpa_fp16");
  const Problem problem = DefaultProblem(sdpa.manifest);
  const ArchInfo& arch = ArchByName("sm_90");
  NvrtcCompiler compiler;
  const auto gate = [&](const char* settings) {
    return RunCompileGate(sdpa, test::GenomeFromSettings(sdpa.manifest, settings), problem, arch,
                          compiler, {});
  };
  // Each an invalid configuration with its reason.
  const auto invalid_because = [&](const char* settings) {
    const CompileOutcome outcome = gate(settings);
    INFO(settings);
    CHECK(outcome.status == Status::kInvalid);
    return outcome.reason;
  };
  const std::string launch = "the launch of sdpa_fp16_fwd cannot be made for this configuration: ";
  CHECK(invalid_because("BLOCK_M=32 BLOCK_N=64 NUM_WARPS=2 STAGES=3") ==
        "constraint divides (64 / (BLOCK_M - 32) != 99) cannot be evaluated for this "
        "configuration: division by zero in '64 / (BLOCK_M - 32) != 99'");
  CHECK(invalid_because("BLOCK_M=16 NUM_WARPS=1") ==
        "derived value PER_WARP of sdpa_fp16 cannot be evaluated for this "
        "configuration: division by zero in '256 / (NUM_WARPS - 1)'");
  CHECK(gate("BLOCK_M=64 NUM_WARPS=4").status == Status::kCompiled);
  CHECK(invalid_because("BLOCK_M=64 BLOCK_N=64 NUM_WARPS=2 STAGES=2") ==
        launch + "block.y NUM_WARPS == 2 ? 0 : 1 is 0; CUDA takes 1 to 1024");
  CHECK(invalid_because("BLOCK_M=64 NUM_WARPS=4 STAGES=4") ==
        launch +
            "grid.y PERSISTENT ? 1 : (STAGES == 4 ? 65536 : GROUPS) is 65536; CUDA takes 1 "
            "to 65535");
  CHECK(invalid_because("BLOCK_M=64 NUM_WARPS=4 LAZY_RESCALE=1 BLOCK_N=128") ==
        launch +
            "cluster.x LAZY_RESCALE ? (BLOCK_N == 128 ? 16 : (BLOCK_N == 16 ? 2 : 3)) : 1 is 16; "
            "CUDA takes 1 to 8");
  CHECK(invalid_because("BLOCK_M=64 NUM_WARPS=4 LAZY_RESCALE=1") ==
        launch +
            "grid.x PERSISTENT ? min(B * GROUPS * M_TILES * SPLITS, NUM_SMS * CTAS_PER_SM) : "
            "M_TILES * SPLITS is 8, not a multiple of the cluster's 3");
  CHECK(gate("BLOCK_M=64 NUM_WARPS=4 LAZY_RESCALE=1 BLOCK_N=16").status == Status::kCompiled);
  {
    const CompileOutcome ampere = RunCompileGate(
        sdpa,
        test::GenomeFromSettings(sdpa.manifest, "BLOCK_M=64 NUM_WARPS=4 LAZY_RESCALE=1 BLOCK_N=16"),
        problem, ArchByName("sm_80"), compiler, {});
    CHECK(ampere.status == Status::kInvalid);
    CHECK(ampere.reason == launch + "a cluster of 2 CTAs on sm_80; clusters need sm_90 or later");
  }
  // A grid that reads the device's figures is left to the launch, where they are known.
  CHECK(gate("BLOCK_M=64 NUM_WARPS=4 STAGES=4 PERSISTENT=1").status == Status::kCompiled);
  CHECK(invalid_because("BLOCK_M=64 NUM_WARPS=4 FAST_EXP=0") ==
        launch +
            "argument S_q = FAST_EXP == 0 ? 4294967296 : S_q is 4294967296, which does not "
            "fit an i32");
  CHECK(invalid_because("BLOCK_M=64 NUM_WARPS=4 BLOCK_N=32") ==
        launch +
            "tensor arrivals has extent LAST_CTA_COMBINES ? B * GROUPS * M_TILES : (BLOCK_N "
            "== 32 ? -4 : 1) = -4");

  // The search's space leaves them out, and lists the rest.
  const SearchSpace space(sdpa.manifest, problem, arch);
  CHECK_FALSE(space.IsValid(
      test::GenomeFromSettings(sdpa.manifest, "BLOCK_M=32 BLOCK_N=64 NUM_WARPS=2 STAGES=3")));
  CHECK_FALSE(space.IsValid(test::GenomeFromSettings(sdpa.manifest, "BLOCK_M=16 NUM_WARPS=1")));
  CHECK(space.IsValid(test::GenomeFromSettings(sdpa.manifest, "BLOCK_M=64 NUM_WARPS=4")));
  for (const Genome& genome : space.Enumerate()) {
    CHECK(genome.at("BLOCK_M") != 32);
    CHECK(genome.at("NUM_WARPS") != 1);
  }
}

TEST_CASE("registers per block follow the per-warp allocation unit", "[compile]") {
  CHECK(RegistersPerBlock(32, 128) == 4096);
  CHECK(RegistersPerBlock(33, 32) == 1280);
  CHECK(RegistersPerBlock(255, 256) == 65536);
  CHECK(RegistersPerBlock(128, 33) == 8192);
}

}  // namespace
}  // namespace evo

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "common/sha256.h"
#include "evaluator/kernel_arguments.h"
#include "exports/dispatch_table.h"
#include "exports/package_writer.h"
#include "kernel_templates/arch.h"
#include "kernel_templates/configuration.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using Json = nlohmann::json;

// A run's best kernel as a table needs it; the cubin is a stand-in (no GPU loads it here).
TunedKernel Tuned(const TemplateLibrary& library, const std::string& name,
                  const std::string& settings, Problem given, const std::string& arch,
                  double score_us, int64_t run_id) {
  const KernelTemplate& kernel_template = library.Find(name);
  const Manifest& manifest = kernel_template.manifest;
  TunedKernel tuned;
  tuned.kernel_template = &kernel_template;
  tuned.run.id = run_id;
  tuned.run.spec.template_name = name;
  tuned.run.spec.template_hash = kernel_template.source_hash;
  // A template without grouped heads has no H_kv.
  std::erase_if(
      given, [&](const auto& param) { return manifest.FindProblemParam(param.first) == nullptr; });
  tuned.run.spec.problem = CompleteProblem(manifest, given);
  CheckProblem(manifest, tuned.run.spec.problem);
  tuned.run.spec.arch = arch;
  tuned.run.spec.device = "a test";
  tuned.run.spec.evaluator = "none";
  tuned.best.id = run_id * 100;
  tuned.best.run_id = run_id;
  tuned.best.proposal.genome = test::GenomeFromSettings(manifest, settings);
  tuned.best.state = CandidateState::kFinished;
  tuned.best.outcome.status = Status::kMeasured;
  tuned.best.outcome.gpu = GpuVerdict{};
  tuned.best.outcome.gpu->timing = TimingFigures{};
  tuned.best.outcome.gpu->timing->median_us = score_us;
  tuned.best.confirmation = TimingFigures{};
  tuned.best.confirmation->median_us = score_us;
  tuned.compiled.ok = true;
  tuned.compiled.cubin = "stand-in cubin of " + name + " " + settings;
  return tuned;
}

Problem Sizes(int64_t b, int64_t h, int64_t h_kv, int64_t s_q, int64_t s_kv, int64_t d,
              int64_t causal) {
  return {{"B", b},       {"H", h}, {"H_kv", h_kv},    {"S_q", s_q},
          {"S_kv", s_kv}, {"D", d}, {"CAUSAL", causal}};
}

const Json* FindConstraint(const Json& plan, const std::string& name) {
  for (const Json& constraint : plan["constraints"]) {
    if (constraint["name"] == name) return &constraint;
  }
  return nullptr;
}

// Builds tests/data/export/describe_calls.cc against the C++ package written in dir / "cpp" into
// dir / "describe" (warnings as errors).
test::CommandResult BuildDescribeCalls(const std::filesystem::path& dir) {
  const std::filesystem::path cpp = dir / "cpp";
  const std::filesystem::path data = test::SourceDir() / "tests" / "data" / "export";
  return test::RunProgram(
      "g++",
      {"-std=c++20", "-O1", "-Wall", "-Wextra", "-Werror", "-I", (cpp / "include").string(), "-I",
       "/usr/local/cuda/include", (cpp / "src" / "evo_attention.cc").string(),
       (cpp / "src" / "evo_attention_data.cc").string(), (data / "describe_calls.cc").string(),
       "-ldl", "-o", (dir / "describe").string()},
      dir);
}

TEST_CASE("a kernel's plan keeps the call's sizes as expressions and folds what the compile fixed",
          "[export]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const CompileResult compiled;

  const KernelTemplate& hopper = library.Find("sdpa_hopper");
  const Json packed = KernelPlan(
      hopper, test::GenomeFromSettings(hopper.manifest, "PACK_GQA=1 SPLITS=4 TMA_STORE=0"),
      CompleteProblem(hopper.manifest, Sizes(64, 32, 8, 1, 8192, 128, 0)), ArchByName("sm_90"),
      compiled);
  CHECK(packed["target"] == "sm_90a");
  CHECK(packed["arch_specific"] == true);
  CHECK(packed["key"] == Json({{"D", 128},
                               {"causal", 0},
                               {"q_dtype", "f16"},
                               {"kv_dtype", "f16"},
                               {"out_dtype", "f16"}}));
  // Derived values that follow the call's sizes stay expressions, evaluated in order per call.
  const Json& derived = packed["derived"];
  REQUIRE(derived.size() >= 3);
  CHECK(derived[0] == Json::array({"GROUP", "(H / H_kv)"}));
  CHECK(derived[1] == Json::array({"POSITIONS", "(128 / GROUP)"}));
  // A constraint on the sizes is the kernel's validity for a call; those the compile settled
  // (smem_fits_block) are gone.
  REQUIRE(FindConstraint(packed, "pack_gqa_whole_blocks") != nullptr);
  CHECK((*FindConstraint(packed, "pack_gqa_whole_blocks"))["expr"] == "(0 || ((64 % GROUP) == 0))");
  CHECK(FindConstraint(packed, "smem_fits_block") == nullptr);
  CHECK(FindConstraint(packed, "H_kv_check") != nullptr);
  // Two launches (split KV combined by a second kernel), grids over the sizes, fixed blocks.
  REQUIRE(packed["launches"].size() == 2);
  const Json& main = packed["launches"][0];
  CHECK(main["grid"][0] == "(M_TILES_C * 4)");
  CHECK(main["grid"][1] == "SLOTS");
  CHECK(main["block"] == Json::array({384, 1, 1}));
  CHECK(main["dynamic_smem_bytes"].is_number_integer());
  CHECK(main["cluster"] == Json::array({1, 1, 1}));
  CHECK(packed["launches"][1]["entry"] == "sdpa_hopper_combine");
  CHECK(packed["launches"][1]["cluster"] == Json::array({1, 1, 1}));
  // Two CTAs of a cluster share K and V: the cluster is a constant, the grid whole clusters.
  const Json clustered =
      KernelPlan(hopper, test::GenomeFromSettings(hopper.manifest, "CLUSTER_M=2"),
                 CompleteProblem(hopper.manifest, Sizes(1, 16, 16, 16384, 16384, 128, 0)),
                 ArchByName("sm_90"), compiled);
  REQUIRE(clustered["launches"].size() == 1);
  CHECK(clustered["launches"][0]["cluster"] == Json::array({2, 1, 1}));
  CHECK(clustered["launches"][0]["grid"][0] == "(M_TILES_C * 1)");
  const Json& padded = clustered["derived"];
  CHECK(std::find(padded.begin(), padded.end(),
                  Json::array({"M_TILES_C", "(ceil_div(M_TILES, 2) * 2)"})) != padded.end());
  CHECK(packed["call"] ==
        Json::array({{{"launch", "sdpa_hopper_fwd"}}, {{"launch", "sdpa_hopper_combine"}}}));
  bool saw_map = false;
  for (const Json& param : main["params"]) {
    if (param["name"] == "Q_map") {
      saw_map = true;
      CHECK(param["tensor"] == "Q");
      CHECK(param["box"] == Json::array({64, "POSITIONS", "GROUP", 1}));
      CHECK(param["swizzle"] == "128B");
    }
    if (param["name"] == "Q") CHECK(param["role"] == "q");
    if (param["name"] == "O") CHECK(param["shape"] == Json::array({"B", "H", "S_q", 128}));
  }
  CHECK(saw_map);

  // Without grouped heads, k and v must have q's heads; fp8 kernels take the scales.
  const KernelTemplate& wgmma = library.Find("sdpa_fp16_wgmma");
  const Json plain = KernelPlan(wgmma, DefaultGenome(wgmma.manifest),
                                DefaultProblem(wgmma.manifest), ArchByName("sm_90"), compiled);
  REQUIRE(FindConstraint(plain, "same_kv_heads") != nullptr);
  CHECK((*FindConstraint(plain, "same_kv_heads"))["expr"] == "H_kv == H");
  const KernelTemplate& fp8 = library.Find("sdpa_fp8");
  Problem fp8_problem = DefaultProblem(fp8.manifest);
  fp8_problem["Q_FP8"] = 1;
  const Json scaled =
      KernelPlan(fp8, DefaultGenome(fp8.manifest), fp8_problem, ArchByName("sm_89"), compiled);
  CHECK(scaled["key"]["q_dtype"] == "fp8e4m3");
  CHECK(scaled["key"]["kv_dtype"] == "fp8e4m3");
  CHECK(scaled["key"]["out_dtype"] == "f16");
  CHECK(scaled["scales"] == Json::array({"q_scale", "k_scale", "v_scale"}));

  // A template that is not attention is refused by name.
  test::TempDir dir;
  test::WriteTinyTemplate(dir.path() / "tiny", "tiny", "extern \"C\" __global__ void tiny() {}");
  const TemplateLibrary with_tiny = TemplateLibrary::Load({dir.path()});
  const KernelTemplate& tiny = with_tiny.Find("tiny");
  CHECK_THROWS_WITH(KernelPlan(tiny, DefaultGenome(tiny.manifest), DefaultProblem(tiny.manifest),
                               ArchByName("sm_90"), compiled),
                    Catch::Contains("tiny has no compile-time problem parameter D"));
}

// Runs of several templates, keys, archs and kernels with run-time constraints.
std::vector<TunedKernel> TestKernels(const TemplateLibrary& library) {
  std::vector<TunedKernel> tuned = {
      Tuned(library, "sdpa_fp16", "", Sizes(2, 8, 8, 512, 512, 64, 0), "sm_90", 8.0, 1),
      Tuned(library, "sdpa_fp16", "BLOCK_M=128", Sizes(2, 8, 8, 2048, 2048, 64, 0), "sm_90", 60.0,
            2),
      Tuned(library, "sdpa_fp16", "STAGES=2", Sizes(8, 16, 16, 1024, 1024, 64, 0), "sm_90", 90.0,
            3),
      Tuned(library, "sdpa_fp16", "", Sizes(2, 8, 8, 1024, 1024, 64, 1), "sm_90", 20.0, 4),
      // Split KV tuned for decoding on an sm_80 GPU: valid only where each split has keys.
      Tuned(library, "sdpa_fp16", "SPLITS=4 BLOCK_N=64", Sizes(1, 16, 16, 1, 4096, 128, 0), "sm_80",
            12.0, 5),
      Tuned(library, "sdpa_hopper", "", Sizes(4, 16, 16, 4096, 4096, 128, 0), "sm_90", 900.0, 6),
      Tuned(library, "sdpa_hopper", "PACK_GQA=1 SPLITS=4 TMA_STORE=0",
            Sizes(64, 32, 8, 1, 8192, 128, 0), "sm_90", 40.0, 7),
      // Two templates tuned at one shape on one GPU: the faster one's entry is the table's.
      Tuned(library, "sdpa_fp16_wgmma", "", Sizes(2, 8, 8, 2048, 2048, 64, 0), "sm_90", 55.0, 8),
  };
  Problem bf16 = Sizes(2, 8, 8, 2048, 2048, 128, 1);
  bf16["BF16"] = 1;
  tuned.push_back(Tuned(library, "sdpa_hopper", "", bf16, "sm_90", 70.0, 9));
  // Launched in clusters of two CTAs.
  tuned.push_back(Tuned(library, "sdpa_hopper", "CLUSTER_M=2 PERSISTENT=1",
                        Sizes(1, 16, 16, 16384, 16384, 128, 0), "sm_90", 3400.0, 11));
  Problem fp8 = Sizes(2, 8, 8, 4096, 4096, 128, 0);
  fp8["Q_FP8"] = 1;
  tuned.push_back(Tuned(library, "sdpa_fp8", "", fp8, "sm_89", 300.0, 10));
  return tuned;
}

DispatchPackage TestPackage(const TemplateLibrary& library) {
  return BuildDispatchPackage(TestKernels(library), "the export test");
}

// What evo itself computes for a tuned kernel called at other sizes: each launch's grid (on a
// GPU of 132 SMs, one CTA per SM) from the manifest, with the call's sizes in the run's problem.
std::string EvoLaunches(const TunedKernel& tuned, const std::vector<int64_t>& sizes) {
  const Manifest& manifest = tuned.kernel_template->manifest;
  Problem problem = tuned.run.spec.problem;
  const char* names[] = {"B", "H", "H_kv", "S_q", "S_kv"};
  for (size_t i = 0; i < 5; ++i) {
    if (problem.count(names[i]) > 0) problem[names[i]] = sizes[i];
  }
  Bindings bindings = CompileBindings(manifest, tuned.best.proposal.genome, problem,
                                      ArchByName(tuned.run.spec.arch));
  bindings["NUM_SMS"] = 132;
  bindings["CTAS_PER_SM"] = 1;
  std::string text;
  for (const KernelSpec* kernel : LaunchedKernels(manifest, bindings)) {
    text += "launch " + kernel->entry + " grid [" +
            std::to_string(kernel->grid[0].Evaluate(bindings)) + "," +
            std::to_string(kernel->grid[1].Evaluate(bindings)) + "," +
            std::to_string(kernel->grid[2].Evaluate(bindings)) + "]\n";
  }
  return text;
}

// The launch lines of a description, up to the grid.
std::string LaunchLines(const std::string& described) {
  std::istringstream in(described);
  std::string line;
  std::string text;
  while (std::getline(in, line)) {
    if (line.rfind("launch ", 0) == 0) text += line.substr(0, line.find(" block ")) + "\n";
  }
  return text;
}

TEST_CASE("a dispatch table keeps the fastest kernel per key and shape, each kernel once",
          "[export]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const DispatchPackage package = TestPackage(library);
  const Json& table = package.table;
  CHECK(table["format"] == kDispatchTableFormat);
  // Eleven runs, two at 2,8,2048,64 on sm_90: ten entries.
  const Json& entries = table["entries"];
  REQUIRE(entries.size() == 10);
  CHECK(package.cubins.size() == table["kernels"].size());
  for (const Json& entry : entries) {
    if (entry["shape"]["S_q"] == 2048 &&
        table["kernels"][entry["kernel"].get<size_t>()]["key"]["D"] == 64) {
      CHECK(entry["template"] == "sdpa_fp16_wgmma");
      CHECK(entry["run"] == 8);
    }
  }
  // Sorted by key, then arch, then shape: D=64 non-causal first, smallest shape first.
  CHECK(entries[0]["run"] == 1);
  for (size_t i = 0; i < package.cubins.size(); ++i) {
    CHECK(table["kernels"][i]["cubin"] == package.cubins[i].first);
    CHECK(table["kernels"][i]["cubin_sha256"] == Sha256Hex(package.cubins[i].second));
  }
  CHECK_THROWS_WITH(BuildDispatchPackage({}, "nothing"), Catch::Contains("no tuned runs"));
}

std::vector<std::string> Calls() {
  std::vector<std::string> calls;
  const std::vector<std::string> heads = {"1 1 1",   "2 8 8",    "2 8 2",   "8 16 16",
                                          "1 16 16", "64 32 8",  "2 48 16", "2 6 4",
                                          "4 16 16", "16 32 32", "1 32 8"};
  const std::vector<std::string> lengths = {
      "1 1",       "1 33",    "1 4096",    "1 8192",    "17 33",      "509 507",
      "512 512",   "700 700", "724 724",   "725 725",   "1024 1024",  "1500 1500",
      "2048 2048", "3000 1",  "4093 4091", "4096 4096", "16384 16384"};
  const std::vector<std::string> keys = {
      "64 0 f16 f16",    "64 1 f16 f16", "128 0 f16 f16",         "128 1 bf16 bf16",
      "128 0 bf16 bf16", "96 0 f16 f16", "128 0 fp8e4m3 fp8e4m3", "128 0 f16 fp8e4m3"};
  for (const std::string& h : heads) {
    for (const std::string& s : lengths) {
      for (const std::string& key : keys) {
        for (const char* sm : {"90", "86", "89", "75"}) {
          calls.push_back(h + " " + s + " " + key + " " + sm);
        }
      }
    }
  }
  calls.push_back("0 8 8 512 512 64 0 f16 f16 90");
  calls.push_back("2 8 8 512 3000000000 64 0 f16 f16 90");
  return calls;
}

// The text each implementation printed for each call.
std::map<std::string, std::string> ByCall(const std::string& output) {
  std::map<std::string, std::string> described;
  std::istringstream in(output);
  std::string line;
  std::string call;
  while (std::getline(in, line)) {
    if (line.rfind("call ", 0) == 0) {
      call = line.substr(5);
      described[call];
    } else {
      described[call] += line + "\n";
    }
  }
  return described;
}

TEST_CASE("the exported Python and C++ dispatch agree on every call: exact, nearest, refused",
          "[export]") {
  if (!test::HaveProgram("python3") || !test::HaveProgram("g++")) {
    WARN("skipped: python3 or g++ is missing");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({});
  const std::vector<TunedKernel> tuned = TestKernels(library);
  const DispatchPackage package = BuildDispatchPackage(tuned, "the export test");
  test::TempDir dir;
  WritePythonPackage(dir.path() / "py", "tuned_attention", package);
  WriteCppPackage(dir.path() / "cpp", package);
  const std::vector<std::string> calls = Calls();
  std::string text;
  for (const std::string& call : calls) text += call + "\n";
  test::WriteFile(dir.path() / "calls.txt", text);

  const std::filesystem::path data = test::SourceDir() / "tests" / "data" / "export";
  const test::CommandResult python =
      test::RunProgram("python3",
                       {(data / "describe_calls.py").string(), (dir.path() / "py").string(),
                        "tuned_attention", (dir.path() / "calls.txt").string()},
                       dir.path());
  INFO(python.err);
  REQUIRE(python.exit_code == 0);
  const test::CommandResult build = BuildDescribeCalls(dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  const test::CommandResult native =
      test::RunProgram(dir.path() / "describe", {(dir.path() / "calls.txt").string()}, dir.path());
  INFO(native.err);
  REQUIRE(native.exit_code == 0);

  const std::map<std::string, std::string> from_python = ByCall(python.out);
  const std::map<std::string, std::string> from_cpp = ByCall(native.out);
  REQUIRE(from_python.size() == calls.size());
  size_t picked = 0;
  for (const std::string& call : calls) {
    INFO(call);
    CHECK(from_cpp.at(call) == from_python.at(call));
    picked += from_python.at(call).rfind("entry ", 0) == 0 ? 1 : 0;
  }
  CHECK(picked > calls.size() / 10);

  // Every picked kernel's grids are the ones evo computes from the manifest for those sizes:
  // folding the launch over the compile kept its meaning.
  for (const std::string& call : calls) {
    const std::string& described = from_python.at(call);
    if (described.rfind("entry ", 0) != 0) continue;
    INFO(call);
    const nlohmann::json& entry = package.table["entries"][std::stoul(described.substr(6))];
    const auto run = std::find_if(tuned.begin(), tuned.end(), [&](const TunedKernel& t) {
      return t.run.id == entry["run"].get<int64_t>();
    });
    REQUIRE(run != tuned.end());
    std::istringstream fields(call);
    std::vector<int64_t> sizes(5);
    for (int64_t& size : sizes) fields >> size;
    CHECK(LaunchLines(described) == EvoLaunches(*run, sizes));
  }

  const Json& entries = package.table["entries"];
  const auto entry_of = [&](const std::string& call) {
    const std::string& described = from_python.at(call);
    REQUIRE(described.rfind("entry ", 0) == 0);
    return std::stoul(described.substr(6));
  };
  const auto tuned_at = [&](const std::string& call) {
    const Json& shape = entries[entry_of(call)]["shape"];
    return std::to_string(shape["B"].get<int64_t>()) + " " +
           std::to_string(shape["H"].get<int64_t>()) + " " +
           std::to_string(shape["H_kv"].get<int64_t>()) + " " +
           std::to_string(shape["S_q"].get<int64_t>()) + " " +
           std::to_string(shape["S_kv"].get<int64_t>());
  };
  // The tuned shape itself.
  CHECK(from_python.at("2 8 8 512 512 64 0 f16 f16 90").find(" exact 1 ") != std::string::npos);
  CHECK(tuned_at("2 8 8 512 512 64 0 f16 f16 90") == "2 8 8 512 512");
  // Nearest buckets: 700 is under 2^9.5 (512's), 725 over it but as near to 512 as to 1024's
  // absence; 1500 is nearer 2048 than 512 in half-octaves; partial tiles keep their shape's.
  CHECK(tuned_at("2 8 8 700 700 64 0 f16 f16 90") == "2 8 8 512 512");
  CHECK(from_python.at("2 8 8 700 700 64 0 f16 f16 90").find(" exact 0 ") != std::string::npos);
  CHECK(tuned_at("2 8 8 1500 1500 64 0 f16 f16 90") == "2 8 8 2048 2048");
  CHECK(tuned_at("2 8 8 509 507 64 0 f16 f16 90") == "2 8 8 512 512");
  CHECK(tuned_at("16 32 32 1024 1024 64 0 f16 f16 90") == "8 16 16 1024 1024");
  CHECK(entries[entry_of("2 8 8 2048 2048 64 0 f16 f16 90")]["template"] == "sdpa_fp16_wgmma");
  // Grouped heads: the packed kernel serves G = 4 calls; G = 3 breaks its whole blocks and the
  // unpacked kernel of the same key serves instead.
  CHECK(tuned_at("64 32 8 1 8192 128 0 f16 f16 90") == "64 32 8 1 8192");
  CHECK(tuned_at("2 48 16 1 8192 128 0 f16 f16 90") == "4 16 16 4096 4096");
  // The sm_80 split-KV kernel serves an sm_86 GPU, not an sm_90 one, and only with keys for
  // every split.
  CHECK(tuned_at("1 16 16 1 4096 128 0 f16 f16 86") == "1 16 16 1 4096");
  CHECK(from_python.at("1 16 16 1 33 128 0 f16 f16 86")
            .find("error: no tuned kernel for D=128, not causal, q f16, k/v f16 on sm_86 is valid "
                  "for B=1 H=16 H_kv=16 S_q=1 S_kv=33: the kernel tuned at B=1 H=16 H_kv=16 "
                  "S_q=1 S_kv=4096 needs splits_have_keys") == 0);
  // Refusals: a compile-time key nobody tuned, a GPU nothing runs on, sizes out of range.
  CHECK(from_python.at("2 8 8 512 512 96 0 f16 f16 90")
            .find("error: no tuned kernel for D=96, not causal, q f16, k/v f16 on sm_90: the "
                  "table has ") == 0);
  CHECK(from_python.at("2 8 8 512 512 64 0 f16 f16 75")
            .find("error: no kernel of this table runs on sm_75") == 0);
  CHECK(from_python.at("2 6 4 512 512 64 0 f16 f16 90")
            .find("error: H=6 query heads are not a multiple of H_kv=4") == 0);
  CHECK(from_python.at("0 8 8 512 512 64 0 f16 f16 90").find("error: B=0 is outside") == 0);
  CHECK(from_python.at("2 8 8 512 3000000000 64 0 f16 f16 90")
            .find("error: S_kv=3000000000 is outside") == 0);
  // fp8 kernels run where they were compiled (sm_89), with their scales.
  CHECK(tuned_at("2 8 8 4096 4096 128 0 fp8e4m3 fp8e4m3 89") == "2 8 8 4096 4096");
  CHECK(from_python.at("1 32 8 4096 4096 128 0 fp8e4m3 fp8e4m3 89").find("same_kv_heads") !=
        std::string::npos);
}

// What each runtime makes of a package's table: describe_calls.py and describe_calls.cc over
// `calls`, with the package written into `dir`. A runtime that refuses the table exits 1 and
// says why on stderr. Only the tables differ between packages, so the library's and
// describe_calls' objects are compiled once, into `objects`, and each table linked with them.
struct Described {
  test::CommandResult python;
  test::CommandResult native;
};

Described DescribeBoth(const std::filesystem::path& dir, const DispatchPackage& package,
                       const std::string& calls, const std::filesystem::path& objects) {
  WritePythonPackage(dir / "py", "tuned_attention", package);
  WriteCppPackage(dir / "cpp", package);
  test::WriteFile(dir / "calls.txt", calls);
  const std::filesystem::path data = test::SourceDir() / "tests" / "data" / "export";
  Described described;
  described.python = test::RunProgram("python3",
                                      {(data / "describe_calls.py").string(), (dir / "py").string(),
                                       "tuned_attention", (dir / "calls.txt").string()},
                                      dir);
  const auto compile = [&](const std::filesystem::path& source,
                           const std::filesystem::path& object) {
    const test::CommandResult built =
        test::RunProgram("g++",
                         {"-std=c++20", "-O1", "-Wall", "-Wextra", "-Werror", "-I",
                          (dir / "cpp" / "include").string(), "-I", "/usr/local/cuda/include", "-c",
                          source.string(), "-o", object.string()},
                         dir);
    INFO(built.err);
    REQUIRE(built.exit_code == 0);
  };
  if (!std::filesystem::exists(objects / "describe_calls.o")) {
    std::filesystem::create_directories(objects);
    compile(dir / "cpp" / "src" / "evo_attention.cc", objects / "evo_attention.o");
    compile(data / "describe_calls.cc", objects / "describe_calls.o");
  }
  compile(dir / "cpp" / "src" / "evo_attention_data.cc", dir / "evo_attention_data.o");
  const test::CommandResult linked = test::RunProgram(
      "g++",
      {(objects / "evo_attention.o").string(), (objects / "describe_calls.o").string(),
       (dir / "evo_attention_data.o").string(), "-ldl", "-o", (dir / "describe").string()},
      dir);
  INFO(linked.err);
  REQUIRE(linked.exit_code == 0);
  described.native = test::RunProgram(dir / "describe", {(dir / "calls.txt").string()}, dir);
  return described;
}

TEST_CASE(
    "the exported runtimes read a launch's cluster: kept, absent as none, refused where CUDA "
    "could not launch it",
    "[export]") {
  if (!test::HaveProgram("python3") || !test::HaveProgram("g++")) {
    WARN("skipped: python3 or g++ is missing");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({});
  const std::vector<TunedKernel> tuned = {
      Tuned(library, "sdpa_hopper", "CLUSTER_M=2", Sizes(1, 16, 16, 2048, 2048, 128, 0), "sm_90",
            300.0, 1),
      Tuned(library, "sdpa_fp16", "", Sizes(2, 8, 8, 512, 512, 64, 0), "sm_90", 8.0, 2)};
  const DispatchPackage package = BuildDispatchPackage(tuned, "the export test");
  const Json& kernels = package.table["kernels"];
  REQUIRE(kernels.size() == 2);
  const size_t clustered = kernels[0]["launches"][0]["entry"] == "sdpa_hopper_fwd" ? 0 : 1;
  REQUIRE(kernels[clustered]["launches"][0]["entry"] == "sdpa_hopper_fwd");
  CHECK(kernels[clustered]["launches"][0]["cluster"] == Json::array({2, 1, 1}));
  CHECK(kernels[1 - clustered]["launches"][0]["cluster"] == Json::array({1, 1, 1}));
  // The tuned shape; 1100 query rows, 9 tiles of 128 padded to a whole number of clusters; and
  // a call of the unclustered kernel.
  const std::string tuned_call = "1 16 16 2048 2048 128 0 f16 f16 90";
  const std::string padded_call = "1 16 16 1100 1100 128 0 f16 f16 90";
  const std::string plain_call = "2 8 8 512 512 64 0 f16 f16 90";
  const std::string calls = tuned_call + "\n" + padded_call + "\n" + plain_call + "\n";
  test::TempDir dir;
  const std::filesystem::path objects = dir.path() / "objects";
  const auto with_cluster = [&](const Json& cluster) {
    DispatchPackage changed = package;
    changed.table["kernels"][clustered]["launches"][0]["cluster"] = cluster;
    return changed;
  };

  // Kept: both runtimes print the cluster of the launch that has one, and only there.
  const Described kept = DescribeBoth(dir.path() / "kept", package, calls, objects);
  INFO(kept.python.err << kept.native.err);
  REQUIRE(kept.python.exit_code == 0);
  REQUIRE(kept.native.exit_code == 0);
  CHECK(kept.native.out == kept.python.out);
  const std::map<std::string, std::string> described = ByCall(kept.python.out);
  CHECK(described.at(tuned_call)
            .find("launch sdpa_hopper_fwd grid [16,16,1] block [384,1,1] cluster [2,1,1] smem ") !=
        std::string::npos);
  CHECK(described.at(padded_call)
            .find("launch sdpa_hopper_fwd grid [10,16,1] block [384,1,1] "
                  "cluster [2,1,1] smem ") != std::string::npos);
  CHECK(described.at(plain_call).find("launch sdpa_fp16_fwd grid ") != std::string::npos);
  CHECK(described.at(plain_call).find(" cluster ") == std::string::npos);

  // Absent, as in a table of an evo from before clusters: every launch reads as a plain one.
  DispatchPackage older = package;
  for (Json& kernel : older.table["kernels"]) {
    for (Json& launch : kernel["launches"]) launch.erase("cluster");
  }
  REQUIRE(older.table.dump().find("\"cluster\"") == std::string::npos);
  const Described absent = DescribeBoth(dir.path() / "absent", older, calls, objects);
  INFO(absent.python.err << absent.native.err);
  REQUIRE(absent.python.exit_code == 0);
  REQUIRE(absent.native.exit_code == 0);
  CHECK(absent.native.out == absent.python.out);
  std::string unclustered = kept.python.out;
  for (size_t at = unclustered.find(" cluster [2,1,1]"); at != std::string::npos;
       at = unclustered.find(" cluster [2,1,1]")) {
    unclustered.erase(at, std::string(" cluster [2,1,1]").size());
  }
  CHECK(absent.python.out == unclustered);

  // Refused when the table is read: extents below 1, more CTAs than a portable cluster holds,
  // extents that are not integers.
  const struct {
    Json cluster;
    std::string python, native;
  } refusals[] = {
      {Json::array({0, 1, 1}), "sdpa_hopper_fwd's cluster [0, 1, 1] is not 1 to 8 CTAs",
       "evo_attention: sdpa_hopper_fwd's cluster 0x1x1 is not 1 to 8 CTAs"},
      {Json::array({16, 1, 1}), "sdpa_hopper_fwd's cluster [16, 1, 1] is not 1 to 8 CTAs",
       "evo_attention: sdpa_hopper_fwd's cluster 16x1x1 is not 1 to 8 CTAs"},
      {Json::array({4, 4, 1}), "sdpa_hopper_fwd's cluster [4, 4, 1] is not 1 to 8 CTAs",
       "evo_attention: sdpa_hopper_fwd's cluster 4x4x1 is not 1 to 8 CTAs"},
      {Json::array({"2", 1, 1}), "sdpa_hopper_fwd's cluster ['2', 1, 1] is not 1 to 8 CTAs",
       "evo_attention: sdpa_hopper_fwd's cluster is not three integer extents"},
      {Json::array({2, 1}), "sdpa_hopper_fwd's cluster [2, 1] is not 1 to 8 CTAs",
       "evo_attention: sdpa_hopper_fwd's cluster is not three integer extents"},
  };
  int variant = 0;
  for (const auto& refusal : refusals) {
    INFO(refusal.cluster.dump());
    const Described refused = DescribeBoth(dir.path() / ("refused" + std::to_string(variant++)),
                                           with_cluster(refusal.cluster), calls, objects);
    CHECK(refused.python.exit_code != 0);
    CHECK(refused.python.err.find(refusal.python) != std::string::npos);
    CHECK(refused.native.exit_code == 1);
    CHECK(refused.native.err.find(refusal.native) != std::string::npos);
  }

  // A grid that is not a whole number of clusters: each call is refused with its sizes, the
  // unclustered kernel's calls are not.
  const Described uneven =
      DescribeBoth(dir.path() / "uneven", with_cluster(Json::array({3, 1, 1})), calls, objects);
  INFO(uneven.python.err << uneven.native.err);
  REQUIRE(uneven.python.exit_code == 0);
  REQUIRE(uneven.native.exit_code == 0);
  CHECK(uneven.native.out == uneven.python.out);
  const std::map<std::string, std::string> refused = ByCall(uneven.python.out);
  CHECK(refused.at(tuned_call) ==
        "error: sdpa_hopper_fwd's grid[0] is 16 for B=1 H=16 H_kv=16 S_q=2048 S_kv=2048, not a "
        "multiple of its cluster's 3\n");
  CHECK(refused.at(padded_call) ==
        "error: sdpa_hopper_fwd's grid[0] is 10 for B=1 H=16 H_kv=16 S_q=1100 S_kv=1100, not a "
        "multiple of its cluster's 3\n");
  CHECK(refused.at(plain_call) == described.at(plain_call));
}

TEST_CASE(
    "the exported Python driver and evo_launch.py lay out cuLaunchKernelEx's config as cuda.h "
    "does, and evo_launch.py reads a launch's cluster",
    "[export]") {
  if (!test::HaveProgram("python3") || !test::HaveProgram("g++")) {
    WARN("skipped: python3 or g++ is missing");
    return;
  }
  test::TempDir dir;
  // The figures the ctypes structures must match, from cuda.h itself.
  test::WriteFile(dir.path() / "layout.cc", R"(#include <cuda.h>
#include <cstddef>
#include <cstdio>
int main() {
  std::printf(
      "attribute_size=%zu attribute_align=%zu attribute_value=%zu value_size=%zu cluster_dim=%zu "
      "config_size=%zu config_smem=%zu config_stream=%zu config_attrs=%zu config_num_attrs=%zu "
      "cluster_dimension=%d\n",
      sizeof(CUlaunchAttribute), alignof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value),
      sizeof(CUlaunchAttributeValue), offsetof(CUlaunchAttributeValue, clusterDim),
      sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, sharedMemBytes),
      offsetof(CUlaunchConfig, hStream), offsetof(CUlaunchConfig, attrs),
      offsetof(CUlaunchConfig, numAttrs), static_cast<int>(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION));
}
)");
  const test::CommandResult built = test::RunProgram(
      "g++",
      {"-std=c++20", "-I", "/usr/local/cuda/include", (dir.path() / "layout.cc").string(), "-o",
       (dir.path() / "layout").string()},
      dir.path());
  INFO(built.err);
  REQUIRE(built.exit_code == 0);
  const test::CommandResult layout = test::RunProgram(dir.path() / "layout", {}, dir.path());
  REQUIRE(layout.exit_code == 0);
  INFO(layout.out);

  const TemplateLibrary library = TemplateLibrary::Load({});
  WritePythonPackage(dir.path() / "py", "tuned_attention",
                     BuildDispatchPackage({Tuned(library, "sdpa_fp16", "",
                                                 Sizes(2, 8, 8, 512, 512, 64, 0), "sm_90", 8.0, 1)},
                                          "the export test"));
  const test::CommandResult checks = test::RunProgram(
      "python3",
      {(test::SourceDir() / "tests" / "data" / "export" / "cluster_checks.py").string(),
       (dir.path() / "py").string(), "tuned_attention", (test::SourceDir() / "scripts").string(),
       layout.out.substr(0, layout.out.find('\n'))},
      dir.path());
  INFO(checks.out << checks.err);
  CHECK(checks.exit_code == 0);
  CHECK(checks.out.find("ok: evo_launch.py lays out CUlaunchConfig and CUlaunchAttribute as "
                        "cuda.h does") != std::string::npos);
  CHECK(checks.out.find("PASSED") != std::string::npos);
}

// sdpa_fp16 written into `folder` with scratch of a row per SM, as a persistent kernel keeps
// partial results: [PERSISTENT ? 2 * NUM_SMS * BLOCK_M : 1, PERSISTENT ? D + 8 : 1] in both
// kernels of its call.
void WriteSdpaWithSmScratch(const std::filesystem::path& folder) {
  const std::filesystem::path shipped = test::SourceDir() / "kernel_templates" / "sdpa_fp16";
  Json manifest = Json::parse(ReadFile(shipped / "manifest.json"));
  for (Json& kernel : manifest["kernels"]) {
    kernel["args"].push_back(
        {{"name", "Partials"},
         {"kind", "scratch"},
         {"dtype", "f32"},
         {"shape", {"PERSISTENT ? 2 * NUM_SMS * BLOCK_M : 1", "PERSISTENT ? D + 8 : 1"}},
         {"zero", "each_call"}});
  }
  test::WriteFile(folder / "manifest.json", manifest.dump(2));
  for (const char* file : {"sdpa_fp16.cu", "starting_points.json"}) {
    test::WriteFile(folder / file, ReadFile(shipped / file));
  }
}

TEST_CASE(
    "the exported Python and C++ runtimes size scratch by the multiprocessor count of the GPU "
    "they run on",
    "[export]") {
  test::TempDir dir;
  WriteSdpaWithSmScratch(dir.path() / "templates" / "sdpa_fp16");
  const TemplateLibrary library = TemplateLibrary::Load({dir.path() / "templates"});
  const std::vector<TunedKernel> tuned = {
      Tuned(library, "sdpa_fp16", "PERSISTENT=1 BLOCK_M=64 SPLITS=2 LAST_CTA_COMBINES=0",
            Sizes(2, 8, 8, 512, 512, 64, 0), "sm_90", 10.0, 1),
      Tuned(library, "sdpa_fp16", "PERSISTENT=0 BLOCK_M=64", Sizes(2, 8, 8, 512, 512, 128, 0),
            "sm_90", 20.0, 2)};
  const DispatchPackage package = BuildDispatchPackage(tuned, "the export test");
  const Json& kernels = package.table["kernels"];
  REQUIRE(kernels.size() == 2);

  // The table keeps NUM_SMS in the shape, for the runtime to bind, and says what it is.
  const Json num_sms = {{"NUM_SMS", "the device's multiprocessor count"}};
  const Json& persistent = kernels[0]["key"]["D"] == 64 ? kernels[0] : kernels[1];
  const Json& per_tile = kernels[0]["key"]["D"] == 64 ? kernels[1] : kernels[0];
  const auto partials = [](const Json& kernel) {
    for (const Json& scratch : kernel["scratch"]) {
      if (scratch["name"] == "Partials") return scratch;
    }
    FAIL("no scratch Partials");
    return Json();
  };
  CHECK(partials(persistent) == Json{{"name", "Partials"},
                                     {"dtype", "f32"},
                                     {"shape", Json::array({"((2 * NUM_SMS) * 64)", 72})},
                                     {"zero", "each_call"},
                                     {"shape_bindings", num_sms}});
  CHECK(partials(per_tile) == Json{{"name", "Partials"},
                                   {"dtype", "f32"},
                                   {"shape", Json::array({1, 1})},
                                   {"zero", "each_call"}});
  for (const Json& launch : persistent["launches"]) {
    INFO(launch["entry"]);
    const Json& param = launch["params"].back();
    CHECK(param["name"] == "Partials");
    CHECK(param["shape"] == partials(persistent)["shape"]);
    CHECK(param["shape_bindings"] == num_sms);
  }

  if (!test::HaveProgram("python3") || !test::HaveProgram("g++")) {
    WARN("skipped the runtimes: python3 or g++ is missing");
    return;
  }
  WritePythonPackage(dir.path() / "py", "tuned_attention", package);
  WriteCppPackage(dir.path() / "cpp", package);
  test::WriteFile(dir.path() / "calls.txt",
                  "2 8 8 512 512 64 0 f16 f16 90\n2 8 8 512 512 128 0 f16 f16 90\n");
  const std::filesystem::path data = test::SourceDir() / "tests" / "data" / "export";
  const test::CommandResult build = BuildDescribeCalls(dir.path());
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  // Two GPUs of different sizes: the scratch follows each one's count, as the grid does.
  for (const int sms : {117, 132}) {
    INFO(sms << " SMs");
    const test::CommandResult python = test::RunProgram(
        "python3",
        {(data / "describe_calls.py").string(), (dir.path() / "py").string(), "tuned_attention",
         (dir.path() / "calls.txt").string(), std::to_string(sms)},
        dir.path());
    INFO(python.err);
    REQUIRE(python.exit_code == 0);
    const test::CommandResult native =
        test::RunProgram(dir.path() / "describe",
                         {(dir.path() / "calls.txt").string(), std::to_string(sms)}, dir.path());
    INFO(native.err);
    REQUIRE(native.exit_code == 0);
    CHECK(native.out == python.out);
    const std::map<std::string, std::string> described = ByCall(native.out);
    const std::string& sized = described.at("2 8 8 512 512 64 0 f16 f16 90");
    const int64_t rows = 2 * sms * 64;
    const std::string shape = "[" + std::to_string(rows) + ",72]";
    INFO(sized);
    CHECK(sized.find("scratch Partials f32 " + shape + " bytes " + std::to_string(rows * 72 * 4) +
                     " zero each_call\n") != std::string::npos);
    CHECK(sized.find("memset Partials\n") != std::string::npos);
    // Both kernels of the call get the same buffer, of that shape.
    const std::string bound = "  tensor Partials scratch f32 " + shape + " bound Partials\n";
    const size_t first = sized.find(bound);
    REQUIRE(first != std::string::npos);
    CHECK(sized.find(bound, first + 1) != std::string::npos);
    // The persistent grid saw the same count.
    CHECK(sized.find("launch sdpa_fp16_fwd grid [" + std::to_string(std::min(sms, 2 * 8 * 8 * 2)) +
                     ",1,1]") != std::string::npos);
    CHECK(described.at("2 8 8 512 512 128 0 f16 f16 90")
              .find("scratch Partials f32 [1,1] bytes 4 zero each_call\n") != std::string::npos);
  }
}

}  // namespace
}  // namespace evo

// A call of several kernels that share scratch (the template of tests/data/two_kernels): its
// entries compiled as one source, its check problems, the gates' handling of scratch (poisoned,
// zeroed, left zero, guarded) and its export's launch sequence.
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_objects.h"
#include "evaluator/device_kernels.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using Json = nlohmann::json;

const std::filesystem::path kTwoKernels = test::SourceDir() / "tests" / "data" / "two_kernels";

struct Replacement {
  std::string from;
  std::string to;
};

// The two_kernels template written into `folder`, its source changed by `replacements` (each
// must apply) and its manifest by `edit`.
void WriteTwoKernels(const std::filesystem::path& folder,
                     const std::vector<Replacement>& replacements = {},
                     const std::function<void(Json&)>& edit = {}) {
  std::string source = ReadFile(kTwoKernels / "two_kernels.cu");
  for (const Replacement& replacement : replacements) {
    const size_t at = source.find(replacement.from);
    INFO(replacement.from);
    REQUIRE(at != std::string::npos);
    source.replace(at, replacement.from.size(), replacement.to);
  }
  Json manifest = Json::parse(ReadFile(kTwoKernels / "manifest.json"));
  if (edit) edit(manifest);
  test::WriteFile(folder / "manifest.json", manifest.dump(2));
  test::WriteFile(folder / "two_kernels.cu", source);
}

const Replacement kSkipsLastPartial = {
    "  partial[blockIdx.x] = chunk;  // the partial store",
    "  if (blockIdx.x + 1 < gridDim.x) partial[blockIdx.x] = chunk;"};
const Replacement kKeepsTickets = {"*tickets = 0;  // the reset", "(void)ticket;"};
const Replacement kWritesPastPartial = {
    "  partial[blockIdx.x] = chunk;  // the partial store",
    "  partial[blockIdx.x] = chunk;\n"
    "  if (blockIdx.x + 1 == gridDim.x) partial[gridDim.x] = chunk;"};

// y[0] one bit off the sum on some calls: still within any tolerance, but not the same bits
// from call to call. `flips` says on which calls, from the module's count of calls.
std::vector<Replacement> FlipsLastBit(const std::string& flips) {
  return {{"extern \"C\" __global__ void two_finish(",
           "__device__ unsigned calls;\nextern \"C\" __global__ void two_finish("},
          {"  y[i] = x[i] + sum + *total;",
           "  const float value = x[i] + sum + *total;\n"
           "  y[i] = i == 0 && (" +
               flips + ") ? __int_as_float(__float_as_int(value) ^ 1) : value;"}};
}
const std::vector<Replacement> kFlipsEveryOtherCall =
    FlipsLastBit("atomicAdd(&calls, 1u) % 2 == 1");
// From the 16th call on: past the correctness gate's calls, within the timed ones.
const std::vector<Replacement> kFlipsWhileTimed = FlipsLastBit("atomicAdd(&calls, 1u) >= 16");

CompileOutcome CompileTwoKernels(const std::filesystem::path& folder, const ArchInfo& arch,
                                 Compiler& compiler, const char* settings = "") {
  const TemplateLibrary library = TemplateLibrary::Load({folder});
  const KernelTemplate& two = library.Find("two_kernels");
  return RunCompileGate(two, test::GenomeFromSettings(two.manifest, settings),
                        DefaultProblem(two.manifest), arch, compiler, {});
}

TEST_CASE(
    "the kernels of a call are entries of one compiled source; a missing one, or one that does "
    "not fit, is named",
    "[compile][nvrtc]") {
  NvrtcCompiler compiler;
  const ArchInfo& arch = ArchByName("sm_90");
  const CompileOutcome outcome = CompileTwoKernels(kTwoKernels, arch, compiler, "THREADS=64");
  INFO(outcome.reason << "\n" << outcome.compiled.log);
  REQUIRE(outcome.status == Status::kCompiled);
  CHECK(FindKernel(outcome.compiled.kernels, "two_partial") != nullptr);
  CHECK(FindKernel(outcome.compiled.kernels, "two_finish") != nullptr);
  // The main kernel's figures are the candidate's.
  REQUIRE(outcome.resources);
  CHECK(outcome.resources->function == "two_partial");
  CHECK(outcome.threads_per_block == 64);
  CHECK(outcome.source.find("#define THREADS 64") != std::string::npos);

  SECTION("the broken variants the GPU tests run compile") {
    for (const Replacement& breakage : {kSkipsLastPartial, kKeepsTickets, kWritesPastPartial}) {
      INFO(breakage.to);
      test::TempDir dir;
      WriteTwoKernels(dir.path(), {breakage});
      const CompileOutcome broken = CompileTwoKernels(dir.path(), arch, compiler);
      INFO(broken.reason << "\n" << broken.compiled.log);
      CHECK(broken.status == Status::kCompiled);
    }
  }
  SECTION("a second entry the source lacks") {
    test::TempDir dir;
    WriteTwoKernels(dir.path(), {{"void two_finish(", "void two_finished("}});
    const CompileOutcome missing = CompileTwoKernels(dir.path(), arch, compiler);
    CHECK(missing.status == Status::kCompileError);
    CHECK(missing.reason ==
          "the ptxas report has no entry function two_finish (is it extern \"C\" __global__?)");
  }
  SECTION("a second kernel of too many threads") {
    test::TempDir dir;
    WriteTwoKernels(dir.path(), {}, [](Json& json) { json["kernels"][1]["block"][0] = "2048"; });
    const CompileOutcome too_wide = CompileTwoKernels(dir.path(), arch, compiler);
    CHECK(too_wide.status == Status::kResourceReject);
    CHECK(too_wide.reason == "two_finish: 2048 threads per block; the limit is 1024");
  }
}

// two_kernels' manifest with H and H_kv after N (H_kv defaults to H and must divide it), and
// these check problems.
Manifest GroupedManifest(const Json& check_problems) {
  Json json = Json::parse(ReadFile(kTwoKernels / "manifest.json"));
  json["problem"].push_back({{"name", "H"}, {"min", 1}, {"default", 8}});
  json["problem"].push_back({{"name", "H_kv"},
                             {"min", 1},
                             {"default", "H"},
                             {"check", "H % H_kv == 0"},
                             {"check_doc", "KV heads serve whole groups of query heads"}});
  json["correctness"]["problems"] = check_problems;
  return ParseManifest(json.dump(), "grouped", [](const std::string& relative) {
    return ReadFile(kTwoKernels / relative);
  });
}

TEST_CASE(
    "check problems: a parameter whose default follows another follows it unless set; an "
    "invalid one names the manifest's check problem",
    "[gates]") {
  const Manifest manifest = GroupedManifest(Json::array({{{"N", "N + 1"}}, {{"H", "H * 2"}}}));
  const Problem task = CompleteProblem(manifest, {{"N", 100}, {"H", 4}});
  CHECK(CheckProblems(manifest, task) == std::vector<Problem>{
                                             {{"N", 101}, {"H", 4}, {"H_kv", 4}},
                                             {{"N", 100}, {"H", 8}, {"H_kv", 8}},
                                             task,
                                         });
  // A task with grouped heads is itself the last check problem; the others follow H.
  const Problem grouped = CompleteProblem(manifest, {{"N", 100}, {"H", 4}, {"H_kv", 2}});
  CHECK(CheckProblems(manifest, grouped) == std::vector<Problem>{
                                                {{"N", 101}, {"H", 4}, {"H_kv", 4}},
                                                {{"N", 100}, {"H", 8}, {"H_kv", 8}},
                                                grouped,
                                            });
  const Manifest sets_both = GroupedManifest(Json::array({{{"H", "H * 2"}, {"H_kv", "H_kv"}}}));
  CHECK(CheckProblems(sets_both, grouped).front() == Problem{{"N", 100}, {"H", 8}, {"H_kv", 2}});

  const Manifest broken = GroupedManifest(Json::array({{{"N", "N"}}, {{"H_kv", "H + 1"}}}));
  CHECK_THROWS_WITH(
      CheckProblems(broken, task),
      Catch::Contains("check problem correctness.problems[1] (H_kv = H + 1) of template "
                      "two_kernels is invalid for the task N=100 H=4 H_kv=4: ") &&
          Catch::Contains("breaks H % H_kv == 0 (KV heads serve whole groups of query heads)"));
  const Manifest out_of_domain = GroupedManifest(Json::array({{{"N", "N - 100"}}}));
  CHECK_THROWS_WITH(CheckProblems(out_of_domain, task),
                    Catch::Contains("check problem correctness.problems[0] (N = N - 100)") &&
                        Catch::Contains("at least 1"));
}

TEST_CASE("gate kernels: the elements of scratch left non-zero are counted", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  Context context(0);
  const DeviceInfo device = QueryDevices().at(0);
  NvrtcCompiler compiler;
  const DeviceKernels kernels(compiler, device.arch());
  Stream stream;
  const auto scratch = [](const char* dtype, int64_t elements) {
    auto tensor = std::make_unique<DeviceTensor>();
    tensor->name = dtype;
    tensor->dtype = dtype;
    tensor->elements = elements;
    tensor->kind = KernelArgSpec::Kind::kScratch;
    tensor->allocation = DeviceBuffer(kGuardBytes + 4096 + kGuardBytes);
    const std::vector<unsigned char> zeros(tensor->bytes(), 0);
    tensor->data().Upload(zeros.data(), zeros.size());
    return tensor;
  };
  const auto halves = scratch("f16", 1001);
  const auto counters = scratch("i32", 5);
  const std::vector<DeviceTensor*> tensors = {halves.get(), counters.get()};
  CHECK(kernels.NonZeroElements(tensors, stream) == std::vector<uint64_t>{0, 0});
  // The last half's high byte (the sign of -0.0 counts: only all-zero bits are zero), and two
  // counters.
  const unsigned char sign = 0x80;
  DeviceSpan{halves->data().pointer + halves->bytes() - 1, 1}.Upload(&sign, 1);
  const int32_t values[2] = {1, -1};
  DeviceSpan{counters->data().pointer + 4, 8}.Upload(values, 8);
  CHECK(kernels.NonZeroElements(tensors, stream) == std::vector<uint64_t>{1, 2});
}

// Gates 2 and 3 (or 2 only) for two_kernels from `folder` at its default problem.
GpuVerdict EvaluateTwoKernels(GpuGates& gates, Compiler& compiler,
                              const std::filesystem::path& folder, const char* settings,
                              bool verify_only) {
  const TemplateLibrary library = TemplateLibrary::Load({folder});
  const KernelTemplate& two = library.Find("two_kernels");
  const Problem problem = DefaultProblem(two.manifest);
  const Genome genome = test::GenomeFromSettings(two.manifest, settings);
  const CompileOutcome compiled =
      RunCompileGate(two, genome, problem, gates.device().arch_info(), compiler, {});
  INFO(compiled.reason << compiled.compiled.log);
  REQUIRE(compiled.status == Status::kCompiled);
  return gates.Evaluate(two, genome, problem, compiled.compiled.cubin, verify_only, {});
}

TEST_CASE(
    "the gates run a call of two kernels with scratch: zeroed each call, zeroed once and left "
    "zero, poisoned where nobody zeroes it; timed as whole calls",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  for (const char* settings : {"THREADS=64", "THREADS=128"}) {
    INFO(settings);
    const GpuVerdict verdict = EvaluateTwoKernels(gates, compiler, kTwoKernels, settings, false);
    INFO(verdict.correctness.failure << verdict.error);
    CHECK(verdict.status == Status::kMeasured);
    CHECK(verdict.correctness.passed);
    // Two check problems of two seeds each: Total grows past the count of chunks unless the
    // call zeroes it, and Tickets must be back at zero after each.
    CHECK(verdict.correctness.checks == 4);
    CHECK(verdict.correctness.worst.max_abs_error < 1e-2);
    REQUIRE(verdict.timing);
    // Thousands of timed calls later, Total was still zeroed by each and Tickets reset.
    CHECK(verdict.timing->recheck_passed);
    CHECK(verdict.timing->median_us > 0);
  }
}

TEST_CASE(
    "the gates reject a call that reads scratch nobody wrote, leaves a counter set, writes past "
    "its scratch or changes its output's bits from call to call",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  struct Case {
    const char* what;
    std::vector<Replacement> replacements;
    std::function<void(Json&)> edit;
    std::vector<std::string> failure;  // each a part of the failure text
    bool output_fine;                  // caught by the scratch checks, not by the output
  };
  const std::vector<Case> cases = {
      {"the second kernel reads a partial sum the first never wrote",
       {kSkipsLastPartial},
       {},
       {"y on N=1001, seed 0: ", " not finite"},
       false},
      {"scratch the manifest says nobody zeroes, which the kernels add to",
       {},
       [](Json& json) {
         for (Json& kernel : json["kernels"]) kernel["args"][2]["zero"] = "never";
       },
       {"y on N=1001, seed 0: ", " not finite"},
       false},
      {"the last chunk does not hand the ticket counter back zeroed",
       {kKeepsTickets},
       {},
       {"scratch Tickets was not left zero (1 of 1 elements non-zero) on N=1001, seed 0"},
       true},
      {"the last chunk writes one element past Partial",
       {kWritesPastPartial},
       {},
       {"Partial: ",
        " of the guard zone after it changed (a write outside the tensor) on N=1001, seed 0"},
       true},
      {"an output whose last bit changes from call to call",
       kFlipsEveryOtherCall,
       {},
       {"y on N=1001, seed 1: a second call on the same inputs wrote other bits (the kernel is "
        "not deterministic)"},
       true},
      {"an output whose last bit changes only after many calls",
       kFlipsWhileTimed,
       {},
       {"y changed bits while it was timed, from the same inputs (the kernel is not "
        "deterministic)"},
       true},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    test::TempDir dir;
    WriteTwoKernels(dir.path(), c.replacements, c.edit);
    const GpuVerdict broken = EvaluateTwoKernels(gates, compiler, dir.path(), "", false);
    INFO(broken.correctness.failure << broken.error);
    CHECK(broken.status == Status::kIncorrect);
    CHECK_FALSE(broken.correctness.passed);
    for (const std::string& part : c.failure) {
      CHECK(broken.correctness.failure.find(part) != std::string::npos);
    }
    if (c.output_fine) {
      CHECK(broken.correctness.worst.over_tolerance == 0);
      CHECK(broken.correctness.worst.non_finite == 0);
    }
    // The good call right after, on the same gates, is unaffected.
    const GpuVerdict fine = EvaluateTwoKernels(gates, compiler, kTwoKernels, "", true);
    INFO(fine.correctness.failure << fine.error);
    CHECK(fine.status == Status::kMeasured);
  }
  // A template that declares its sums unordered (floating-point atomics) is not held to the
  // same bits.
  test::TempDir dir;
  WriteTwoKernels(dir.path(), kFlipsEveryOtherCall,
                  [](Json& json) { json["correctness"]["deterministic"] = false; });
  const GpuVerdict unordered = EvaluateTwoKernels(gates, compiler, dir.path(), "", false);
  INFO(unordered.correctness.failure << unordered.error);
  CHECK(unordered.status == Status::kMeasured);
}

TEST_CASE(
    "evo export of a call of two kernels lists each kernel's launch, the scratch and the steps "
    "of one call",
    "[cli][nvrtc]") {
  test::TempDir dir;
  const auto templates = dir.path() / "templates";
  WriteTwoKernels(templates / "two_kernels");
  const TemplateLibrary library = TemplateLibrary::Load({templates});
  const KernelTemplate& two = library.Find("two_kernels");
  const auto db = dir.path() / "evo.db";
  const int64_t candidate =
      test::StoreOneCandidate(db, two, CompleteProblem(two.manifest, {{"N", 1000}}), "THREADS=64");
  const auto out = dir.path() / "export";
  const auto exported = test::RunEvo(
      {"export", std::to_string(candidate), "--out", out.string(), "--db", db.string(),
       "--cache-dir", (dir.path() / "cache").string(), "--templates", templates.string()},
      dir.path());
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  const Json launch = Json::parse(ReadFile(out / "launch.json"));
  REQUIRE(launch["kernels"].size() == 2);
  const Json& partial = launch["kernels"][0];
  const Json& finish = launch["kernels"][1];
  CHECK(partial["entry"] == "two_partial");
  CHECK(finish["entry"] == "two_finish");
  CHECK(partial["grid"] == Json::array({4, 1, 1}));
  CHECK(partial["block"] == Json::array({64, 1, 1}));
  CHECK(finish["grid"] == Json::array({8, 1, 1}));
  CHECK(finish["block"] == Json::array({128, 1, 1}));
  CHECK(finish["dynamic_smem_bytes"] == 0);
  CHECK(finish["needs_dynamic_smem_opt_in"] == false);
  CHECK(partial["resources"]["function"] == "two_partial");
  CHECK(finish["resources"]["function"] == "two_finish");
  CHECK(finish["resources"]["registers"].get<int>() > 0);
  CHECK_FALSE(partial.contains("grid_bindings"));
  std::vector<std::string> params;
  for (const Json& param : finish["params"]) {
    params.push_back(param["name"].get<std::string>() + ":" + param["kind"].get<std::string>());
  }
  CHECK(params == std::vector<std::string>{"x:input", "Partial:scratch", "Total:scratch",
                                           "y:output", "n:scalar", "chunks:scalar"});
  CHECK(finish["params"][1] == Json{{"name", "Partial"},
                                    {"kind", "scratch"},
                                    {"dtype", "f32"},
                                    {"shape", Json::array({4})},
                                    {"bytes", 16},
                                    {"zero", "never"}});
  CHECK(finish["params"][5]["value"] == 4);
  CHECK(launch["scratch"] == Json::array({
                                 {{"name", "Partial"},
                                  {"dtype", "f32"},
                                  {"shape", Json::array({4})},
                                  {"bytes", 16},
                                  {"zero", "never"}},
                                 {{"name", "Total"},
                                  {"dtype", "f32"},
                                  {"shape", Json::array({1})},
                                  {"bytes", 4},
                                  {"zero", "each_call"}},
                                 {{"name", "Tickets"},
                                  {"dtype", "i32"},
                                  {"shape", Json::array({1})},
                                  {"bytes", 4},
                                  {"zero", "once"}},
                             }));
  CHECK(launch["call"] ==
        Json::array(
            {{{"memset", "Total"}}, {{"launch", "two_partial"}}, {{"launch", "two_finish"}}}));
  // The first kernel's launch stays at the top level, for readers of one-kernel exports.
  CHECK(launch["entry"] == "two_partial");
  CHECK(launch["params"] == partial["params"]);
  CHECK(launch["grid"] == partial["grid"]);
  CHECK(launch["block"] == partial["block"]);
  CHECK(launch["resources"] == partial["resources"]);
  // One cubin holds both entries.
  CHECK(ReadFile(out / "two_kernels.cubin").substr(0, 4) ==
        "\x7f"
        "ELF");

  const auto listed =
      test::RunEvo({"templates", "--json", "--templates", templates.string()}, dir.path());
  REQUIRE(listed.exit_code == 0);
  bool found = false;
  for (const Json& listed_template : Json::parse(listed.out)) {
    if (listed_template["name"] != "two_kernels") continue;
    found = true;
    CHECK(listed_template["entry"] == "two_partial");
    CHECK(listed_template["entries"] == Json::array({"two_partial", "two_finish"}));
  }
  CHECK(found);
}

}  // namespace
}  // namespace evo

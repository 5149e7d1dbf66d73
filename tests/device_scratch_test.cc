// Scratch sized by the device (the template of tests/data/sm_scratch): a persistent first kernel
// of at most NUM_SMS CTAs writes a row of Partial per CTA, which the second kernel reads. The
// gates size it with the SM count the grid sees, in every kernel that shares it; `evo export`
// leaves NUM_SMS in its shape for the launch to bind.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "evaluator/compile_gate.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/kernel_arguments.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"
#include "tests/test_support.h"

namespace evo {
namespace {

using Json = nlohmann::json;

const std::filesystem::path kSmScratch = test::SourceDir() / "tests" / "data" / "sm_scratch";

// The extents of Partial in each kernel of the call on a device of `sm_count` SMs.
std::vector<std::vector<int64_t>> PartialShapes(const Manifest& manifest, const Bindings& bindings,
                                                int sm_count) {
  std::vector<std::vector<int64_t>> shapes;
  for (const KernelSpec* kernel : LaunchedKernels(manifest, bindings)) {
    for (const KernelArgSpec& arg : kernel->args) {
      if (arg.name == "Partial") shapes.push_back(TensorShape(arg, bindings, sm_count));
    }
  }
  return shapes;
}

TEST_CASE(
    "the gates size scratch by the device's multiprocessor count, alike in every kernel that "
    "shares it",
    "[gates]") {
  const TemplateLibrary library = TemplateLibrary::Load({kSmScratch});
  const Manifest& manifest = library.Find("sm_scratch").manifest;
  const ArchInfo& arch = ArchByName("sm_90");
  const auto bindings = [&](const char* settings, int64_t n) {
    return CompileBindings(manifest, test::GenomeFromSettings(manifest, settings), {{"N", n}},
                           arch);
  };
  using Shapes = std::vector<std::vector<int64_t>>;
  // 36000 elements are 141 chunks: a row per CTA of min(141, NUM_SMS), and row 0.
  const Bindings persistent = bindings("PERSISTENT=1", 36000);
  CHECK(PartialShapes(manifest, persistent, 7) == Shapes{{8, 2}, {8, 2}});
  CHECK(PartialShapes(manifest, persistent, 132) == Shapes{{133, 2}, {133, 2}});
  CHECK(PartialShapes(manifest, persistent, 200) == Shapes{{142, 2}, {142, 2}});
  CHECK(PartialShapes(manifest, bindings("PERSISTENT=1", 300), 132) == Shapes{{3, 2}, {3, 2}});
  // Without the knob the grid is a CTA per chunk, whatever the device.
  const Bindings per_chunk = bindings("PERSISTENT=0", 36000);
  CHECK(PartialShapes(manifest, per_chunk, 7) == Shapes{{142, 2}, {142, 2}});
  CHECK(PartialShapes(manifest, per_chunk, 0) == Shapes{{142, 2}, {142, 2}});
  // Inputs are sized by the problem alone.
  const KernelArgSpec& x = manifest.main_kernel().args.front();
  REQUIRE(x.name == "x");
  CHECK(TensorShape(x, persistent, 7) == std::vector<int64_t>{36000});
  // No device, no silent guess: the count is needed where the shape reads it.
  CHECK_THROWS_WITH(PartialShapes(manifest, persistent, 0),
                    "scratch Partial is sized by NUM_SMS ('PERSISTENT ? min(CHUNKS, NUM_SMS) + 1 "
                    ": CHUNKS + 1'), and no device's multiprocessor count was given");
  // Only scratch is given the count: a tensor of another kind never sees it.
  KernelArgSpec output = x;
  output.kind = KernelArgSpec::Kind::kOutput;
  output.shape = {Expression::Parse("NUM_SMS")};
  CHECK_THROWS_WITH(TensorShape(output, persistent, 132),
                    Catch::Contains("unknown name 'NUM_SMS'"));
}

// launch.json of `evo export` for the candidate of these settings.
Json ExportedLaunch(const test::TempDir& dir, const char* settings) {
  const TemplateLibrary library = TemplateLibrary::Load({kSmScratch});
  const auto db = dir.path() / (std::string(settings) + ".db");
  const KernelTemplate& sm_scratch = library.Find("sm_scratch");
  const int64_t candidate = test::StoreOneCandidate(
      db, sm_scratch, CompleteProblem(sm_scratch.manifest, {{"N", 36000}}), settings);
  const auto out = dir.path() / settings;
  const auto exported = test::RunEvo(
      {"export", std::to_string(candidate), "--out", out.string(), "--db", db.string(),
       "--cache-dir", (dir.path() / "cache").string(), "--templates", kSmScratch.string()},
      dir.path());
  INFO(exported.err);
  REQUIRE(exported.exit_code == 0);
  return Json::parse(ReadFile(out / "launch.json"));
}

int64_t EvaluateWith(const Json& expression, int64_t num_sms) {
  return Expression::Parse(expression.get<std::string>()).Evaluate({{"NUM_SMS", num_sms}});
}

TEST_CASE(
    "evo export of scratch sized by the device leaves NUM_SMS in its shape and bytes, bound at "
    "launch like the grid's",
    "[cli][nvrtc]") {
  test::TempDir dir;
  const Json launch = ExportedLaunch(dir, "PERSISTENT=1");
  const Json num_sms = {{"NUM_SMS", "the device's multiprocessor count"}};
  REQUIRE(launch["scratch"].size() == 1);
  const Json& partial = launch["scratch"][0];
  CHECK(partial["name"] == "Partial");
  CHECK(partial["zero"] == "never");
  CHECK(partial["shape_bindings"] == num_sms);
  REQUIRE(partial["shape"].size() == 2);
  REQUIRE(partial["shape"][0].is_string());
  CHECK(partial["shape"][1] == 2);
  // The knob and the problem are folded in; the device's figure is left.
  CHECK(partial["shape"][0].get<std::string>().find("141") != std::string::npos);
  CHECK(EvaluateWith(partial["shape"][0], 7) == 8);
  CHECK(EvaluateWith(partial["shape"][0], 132) == 133);
  CHECK(EvaluateWith(partial["shape"][0], 200) == 142);
  REQUIRE(partial["bytes"].is_string());
  CHECK(EvaluateWith(partial["bytes"], 7) == 8 * 2 * 4);
  CHECK(EvaluateWith(partial["bytes"], 132) == 133 * 2 * 4);
  // Each kernel's parameter says the same, and the grid it sizes is left to the device too.
  REQUIRE(launch["kernels"].size() == 2);
  for (const Json& kernel : launch["kernels"]) {
    INFO(kernel["entry"]);
    REQUIRE(kernel["params"][1]["name"] == "Partial");
    CHECK(kernel["params"][1]["shape"] == partial["shape"]);
    CHECK(kernel["params"][1]["bytes"] == partial["bytes"]);
    CHECK(kernel["params"][1]["shape_bindings"] == num_sms);
    CHECK(kernel["params"][0]["shape"] == Json::array({36000}));
    CHECK_FALSE(kernel["params"][0].contains("shape_bindings"));
  }
  CHECK(EvaluateWith(launch["kernels"][0]["grid"][0], 132) == 132);
  CHECK(launch["kernels"][0]["grid_bindings"].contains("NUM_SMS"));
  CHECK(launch["kernels"][1]["grid"] == Json::array({282, 1, 1}));

  // Where the knob does not size it by the device, it is plain numbers.
  const Json per_chunk = ExportedLaunch(dir, "PERSISTENT=0");
  CHECK(per_chunk["scratch"] == Json::array({{{"name", "Partial"},
                                              {"dtype", "f32"},
                                              {"shape", Json::array({142, 2})},
                                              {"bytes", 142 * 2 * 4},
                                              {"zero", "never"}}}));
}

TEST_CASE(
    "the gates run a persistent call whose scratch has a row per CTA of a grid of NUM_SMS, in "
    "the correctness and the performance gates",
    "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({kSmScratch});
  const KernelTemplate& sm_scratch = library.Find("sm_scratch");
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  // More chunks than SMs, so that the persistent grid has NUM_SMS CTAs and the last row of
  // Partial is the last element before its guard zone.
  const int64_t n = 256 * (gates.device().sm_count + 9);
  const Problem problem = CompleteProblem(sm_scratch.manifest, {{"N", n}});
  gates.PrepareReference(sm_scratch, problem);
  for (const char* settings : {"PERSISTENT=1", "PERSISTENT=0"}) {
    INFO(settings);
    const Genome genome = test::GenomeFromSettings(sm_scratch.manifest, settings);
    const CompileOutcome compiled =
        RunCompileGate(sm_scratch, genome, problem, gates.device().arch_info(), compiler, {});
    INFO(compiled.reason << compiled.compiled.log);
    REQUIRE(compiled.status == Status::kCompiled);
    const GpuVerdict verdict =
        gates.Evaluate(sm_scratch, genome, problem, compiled.compiled.cubin, false, {});
    INFO(verdict.correctness.failure << verdict.error);
    CHECK(verdict.status == Status::kMeasured);
    CHECK(verdict.correctness.passed);
    CHECK(verdict.correctness.checks == 6);
    REQUIRE(verdict.timing);
    CHECK(verdict.timing->recheck_passed);
  }

  // The same call with Partial a row short: the last CTA's row lands in the guard zone, so the
  // figure the grid used and the one Partial was sized with are the same.
  test::TempDir dir;
  Json manifest = Json::parse(ReadFile(kSmScratch / "manifest.json"));
  for (Json& kernel : manifest["kernels"]) {
    kernel["args"][1]["shape"][0] = "PERSISTENT ? min(CHUNKS, NUM_SMS) : CHUNKS";
  }
  test::WriteFile(dir.path() / "manifest.json", manifest.dump(2));
  test::WriteFile(dir.path() / "sm_scratch.cu", ReadFile(kSmScratch / "sm_scratch.cu"));
  const TemplateLibrary short_library = TemplateLibrary::Load({dir.path()});
  const KernelTemplate& short_scratch = short_library.Find("sm_scratch");
  const Genome genome = test::GenomeFromSettings(short_scratch.manifest, "PERSISTENT=1");
  const CompileOutcome compiled =
      RunCompileGate(short_scratch, genome, problem, gates.device().arch_info(), compiler, {});
  REQUIRE(compiled.status == Status::kCompiled);
  const GpuVerdict broken =
      gates.Evaluate(short_scratch, genome, problem, compiled.compiled.cubin, false, {});
  INFO(broken.correctness.failure << broken.error);
  CHECK(broken.status == Status::kIncorrect);
  CHECK(broken.correctness.failure.find("Partial: ") != std::string::npos);
  CHECK(broken.correctness.failure.find(" of the guard zone after it changed") !=
        std::string::npos);
}

}  // namespace
}  // namespace evo

// rmsnorm, the bandwidth-bound template: its manifest and NVRTC compiles on any machine; on a GPU
// its reference against float64, the gates on several shapes in fp16 and bf16, and broken
// variants (a skipped row tail, a wrong epsilon, a wrong scale) that the correctness gate must
// reject.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/half.h"
#include "engine/search_space.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/cuda_objects.h"
#include "evaluator/device_kernels.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/kernel_arguments.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/configuration.h"
#include "kernel_templates/template_library.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

Problem RmsnormProblem(const Manifest& manifest, int64_t rows, int64_t cols, int64_t bf16 = 0,
                       int64_t eps_inv = 1000000) {
  const Problem problem = CompleteProblem(
      manifest, {{"ROWS", rows}, {"COLS", cols}, {"BF16", bf16}, {"EPS_INV", eps_inv}});
  CheckProblem(manifest, problem);
  return problem;
}

// The names and dtypes of the arguments a kernel takes on this problem.
std::vector<std::string> Signature(const KernelSpec& kernel, const Problem& problem) {
  const Bindings bindings(problem.begin(), problem.end());
  std::vector<std::string> signature;
  for (const KernelArgSpec& arg : kernel.args) {
    if (arg.PresentFor(bindings)) signature.push_back(arg.name + ":" + arg.dtype);
  }
  return signature;
}

bool HasConstraint(const Manifest& manifest, const std::string& name) {
  return std::any_of(manifest.constraints.begin(), manifest.constraints.end(),
                     [&](const ConstraintSpec& c) { return c.name == name; });
}

TEST_CASE("rmsnorm: rows of fp16 or bf16, eps at run time, bytes per call, odd check problems",
          "[manifest]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& rmsnorm = library.Find("rmsnorm");
  const Manifest& manifest = rmsnorm.manifest;
  CHECK(manifest.min_sm == 80);
  CHECK_FALSE(manifest.arch_specific);
  for (const char* name : {"ROWS", "COLS", "EPS_INV"}) {
    REQUIRE(manifest.FindProblemParam(name) != nullptr);
    CHECK_FALSE(manifest.FindProblemParam(name)->compile_time());  // one compile serves them all
  }
  REQUIRE(manifest.FindProblemParam("BF16") != nullptr);
  CHECK(manifest.FindProblemParam("BF16")->define == "IS_BF16");
  CHECK(manifest.FindProblemParam("B") == nullptr);

  for (int64_t bf16 : {0, 1}) {
    const Problem problem = RmsnormProblem(manifest, 4096, 4096, bf16);
    const std::string dtype = bf16 ? "bf16" : "f16";
    CHECK(Signature(manifest.main_kernel(), problem) ==
          std::vector<std::string>{"x:" + dtype, "weight:" + dtype, "y:" + dtype, "rows:i32",
                                   "cols:i32", "eps_inv:f32"});
    // The reference reads the same inputs by name and writes f32.
    CHECK(Signature(manifest.reference, problem) ==
          std::vector<std::string>{"x:" + dtype, "weight:" + dtype, "y:f32", "rows:i32", "cols:i32",
                                   "eps_inv:f32"});
    const Bindings bindings(problem.begin(), problem.end());
    CHECK(manifest.correctness.ToleranceFor(bindings).rtol == (bf16 ? 0.008 : 0.002));
  }
  CHECK(manifest.reference.source_path == "evo/rmsnorm_reference.cu");
  // Starting points for hidden sizes of 1024 to 8192; each names knobs of the template.
  CHECK(manifest.starting_points.size() >= 8);

  // x read and y written once, the weight read once: 2 bytes an element.
  REQUIRE(manifest.bytes);
  CHECK_FALSE(manifest.flops);
  CHECK(manifest.bytes->Evaluate(RmsnormProblem(manifest, 4096, 4096)) ==
        4 * 4096 * 4096 + 2 * 4096);
  CHECK(manifest.bytes->Evaluate(RmsnormProblem(manifest, 65536, 8192, 1)) ==
        4ll * 65536 * 8192 + 2 * 8192);

  // The gate checks odd rows and columns: the element-by-element path (COLS not a multiple of
  // 8), a partial last chunk of the vector path, a row longer than the task's (past the kept
  // chunks), and an eps as large as the data's mean square, where a wrong eps shows.
  const Problem task = RmsnormProblem(manifest, 4096, 4096);
  const std::vector<Problem> checks = CheckProblems(manifest, task);
  REQUIRE(checks.size() == manifest.correctness.problems.size() + 1);
  CHECK(checks.back() == task);
  auto any = [&](auto predicate) { return std::any_of(checks.begin(), checks.end(), predicate); };
  CHECK(any([](const Problem& p) { return p.at("COLS") % 2 == 1 && p.at("ROWS") % 2 == 1; }));
  CHECK(any([](const Problem& p) { return p.at("COLS") % 8 == 0 && p.at("COLS") % 1024 != 0; }));
  CHECK(any([](const Problem& p) { return p.at("COLS") > 4096; }));
  CHECK(any([](const Problem& p) { return p.at("COLS") < 64; }));
  CHECK(any([](const Problem& p) { return p.at("EPS_INV") == 1; }));
  // Every task has valid check problems, the smallest too.
  for (const Problem& small : {RmsnormProblem(manifest, 1, 1), RmsnormProblem(manifest, 2, 7, 1)}) {
    INFO(FormatProblem(manifest, small));
    CHECK_NOTHROW(CheckProblems(manifest, small));
  }
}

TEST_CASE("a manifest's bytes formula is checked when it loads, like flops", "[manifest]") {
  const std::string manifest =
      ReadFile(test::SourceDir() / "kernel_templates" / "rmsnorm" / "manifest.json");
  const std::string formula = "\"bytes\": \"4 * ROWS * COLS + 2 * COLS\"";
  const size_t at = manifest.find(formula);
  REQUIRE(at != std::string::npos);
  auto parse = [](std::string text) {
    return ParseManifest(text, "test", [](const std::string&) { return std::string("src"); });
  };
  // A knob is not in scope: the figure is the problem's, whatever the configuration.
  for (const char* broken : {"\"bytes\": \"4 * ROWS * HIDDEN\"", "\"bytes\": \"VEC * ROWS\"",
                             "\"bytes\": \"4 * ROWS *\"", "\"bytes\": [1]"}) {
    INFO(broken);
    std::string text = manifest;
    text.replace(at, formula.size(), broken);
    try {
      parse(text);
      FAIL("a broken bytes formula was accepted");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("manifest 'test': bytes") != std::string::npos);
    }
  }
  // Without it the template still loads, with no bandwidth figure.
  std::string no_bytes = manifest;
  no_bytes.replace(at, formula.size(), "\"flops\": \"ROWS * COLS\"");
  const Manifest parsed = parse(no_bytes);
  CHECK_FALSE(parsed.bytes);
  CHECK(parsed.flops);
}

TEST_CASE("rmsnorm compiles for sm_80 and sm_90 across its space, or a named constraint refuses",
          "[compile][nvrtc]") {
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& rmsnorm = library.Find("rmsnorm");
  const Manifest& manifest = rmsnorm.manifest;
  NvrtcCompiler compiler;
  struct Case {
    const char* arch;
    int64_t rows, cols, bf16;
  };
  for (const Case& c : {Case{"sm_80", 4096, 4096, 0}, Case{"sm_90", 65536, 8192, 1},
                        Case{"sm_90", 1000, 1000, 0}}) {
    const Problem problem = RmsnormProblem(manifest, c.rows, c.cols, c.bf16);
    const ArchInfo arch = ArchByName(c.arch);
    const SearchSpace space(manifest, problem, arch);
    const std::vector<Genome> valid = space.Enumerate();
    INFO(c.arch << " " << FormatProblem(manifest, problem) << ": " << valid.size() << " valid");
    REQUIRE(valid.size() > 1000);
    // Every 1/24th of the valid space, in the domains' order: each compiles without spills (the
    // register constraint keeps those out).
    const size_t stride = valid.size() / 24;
    for (size_t i = 0; i < valid.size(); i += stride) {
      INFO(FormatGenome(manifest, valid[i]));
      const CompileOutcome outcome = RunCompileGate(rmsnorm, valid[i], problem, arch, compiler, {});
      INFO(outcome.reason << "\n" << outcome.compiled.log);
      CHECK(outcome.status == Status::kCompiled);
    }
    // Every value of every knob, from the defaults: compiled, or refused by a named constraint.
    for (const KnobSpec& knob : manifest.knobs) {
      for (int64_t value : knob.values) {
        Genome genome = DefaultGenome(manifest);
        genome[knob.name] = value;
        INFO(FormatGenome(manifest, genome));
        const CompileOutcome outcome = RunCompileGate(rmsnorm, genome, problem, arch, compiler, {});
        INFO(outcome.reason << "\n" << outcome.compiled.log);
        if (outcome.status == Status::kInvalid) {
          REQUIRE(outcome.violation);
          CHECK(HasConstraint(manifest, outcome.violation->name));
          CHECK_FALSE(space.IsValid(genome));
        } else {
          CHECK(outcome.status == Status::kCompiled);
        }
      }
    }
    const CompileResult reference = compiler.Compile(
        TemplateCompileRequest(rmsnorm, manifest.reference, nullptr, problem, c.arch));
    INFO(reference.log);
    CHECK(reference.ok);
  }
}

TEST_CASE("evo templates and evo compile print rmsnorm's bytes; --shape and --causal are refused",
          "[cli][nvrtc]") {
  test::TempDir dir;
  const auto templates = test::RunEvo({"templates"}, dir.path());
  REQUIRE(templates.exit_code == 0);
  const size_t at = templates.out.find("rmsnorm  v1");
  REQUIRE(at != std::string::npos);
  const std::string listing = templates.out.substr(at, templates.out.find("\nsdpa", at) - at);
  CHECK(listing.find("problem (--problem NAME=VALUE):") != std::string::npos);
  CHECK(listing.find("bytes per call (for GB/s): 4 * ROWS * COLS + 2 * COLS") != std::string::npos);
  // Attention's listing keeps its shorthands and has no bytes line.
  CHECK(templates.out.find("problem (--shape B,H,S,D, --causal, --problem NAME=VALUE):") !=
        std::string::npos);
  CHECK(templates.out.find("bytes per call") == templates.out.rfind("bytes per call"));

  const auto compiled = test::RunEvo({"compile", "-t", "rmsnorm", "--problem", "ROWS=1000",
                                      "--problem", "COLS=4096", "--arch", "sm_90"},
                                     dir.path());
  INFO(compiled.out << compiled.err);
  CHECK(compiled.exit_code == 0);
  CHECK(compiled.out.find("problem     ROWS=1000 COLS=4096 EPS_INV=1000000 BF16=0") !=
        std::string::npos);
  CHECK(compiled.out.find("bytes       16392192 per call (4 * ROWS * COLS + 2 * COLS)") !=
        std::string::npos);
  CHECK(compiled.out.find("status      compiled") != std::string::npos);
  const auto json = test::RunEvo({"compile", "-t", "rmsnorm", "--problem", "ROWS=3", "--problem",
                                  "COLS=4096", "--problem", "BF16=1", "--arch", "sm_80", "--json"},
                                 dir.path());
  REQUIRE(json.exit_code == 0);
  CHECK(nlohmann::json::parse(json.out)["bytes"] == 4 * 3 * 4096 + 2 * 4096);
  const auto attention = test::RunEvo({"compile", "--arch", "sm_90"}, dir.path());
  REQUIRE(attention.exit_code == 0);
  CHECK(attention.out.find("\nbytes ") == std::string::npos);

  const auto shape = test::RunEvo(
      {"compile", "-t", "rmsnorm", "--shape", "2,8,512,64", "--arch", "sm_90"}, dir.path());
  CHECK(shape.exit_code == 2);
  CHECK(shape.err.find("template rmsnorm takes no --shape (B,H,S,D is attention's); give its "
                       "problem as --problem NAME=VALUE: ROWS, COLS, EPS_INV, BF16") !=
        std::string::npos);
  const auto causal =
      test::RunEvo({"compile", "-t", "rmsnorm", "--causal", "--arch", "sm_90"}, dir.path());
  CHECK(causal.exit_code == 2);
  CHECK(causal.err.find("template rmsnorm takes no --causal") != std::string::npos);
  const auto refused = test::RunEvo(
      {"compile", "-t", "rmsnorm", "--set", "CACHE_WEIGHT=1", "--arch", "sm_90"}, dir.path());
  CHECK(refused.exit_code == 1);
  CHECK(refused.out.find("invalid: constraint cache_weight_needs_persistent") != std::string::npos);

  const auto count = test::RunEvo({"sweep", "-t", "rmsnorm", "--problem", "ROWS=4096", "--problem",
                                   "COLS=1024", "--count", "sm_90"},
                                  dir.path());
  INFO(count.err);
  REQUIRE(count.exit_code == 0);
  CHECK(std::stoll(count.out) > 1000);
}

// ---- On a GPU ----

// The template's tensors as floats on the host (fp16 or bf16 bits).
std::vector<float> Download16(const DeviceTensor& tensor, bool bf16) {
  std::vector<uint16_t> bits(static_cast<size_t>(tensor.elements));
  tensor.data().Download(bits.data(), bits.size() * 2);
  std::vector<float> values;
  values.reserve(bits.size());
  for (uint16_t b : bits) {
    if (bf16) {
      const uint32_t word = static_cast<uint32_t>(b) << 16;
      float f = 0;
      std::memcpy(&f, &word, sizeof f);
      values.push_back(f);
    } else {
      values.push_back(HalfToFloat(b));
    }
  }
  return values;
}

TEST_CASE("the rmsnorm reference kernel agrees with float64 RMSNorm", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& rmsnorm = library.Find("rmsnorm");
  const Manifest& manifest = rmsnorm.manifest;
  Context context(0);
  const DeviceInfo device = QueryDevices().at(0);
  NvrtcCompiler compiler;
  const DeviceKernels kernels(compiler, device.arch());
  Stream stream;
  struct Case {
    int64_t rows, cols, eps_inv;
  };
  for (int64_t bf16 : {0, 1}) {
    for (const Case& c :
         {Case{7, 1000, 1000000}, Case{3, 33, 1}, Case{2, 8195, 4}, Case{300, 1, 100000}}) {
      INFO("BF16=" << bf16 << " ROWS=" << c.rows << " COLS=" << c.cols << " EPS_INV=" << c.eps_inv);
      const Problem problem = RmsnormProblem(manifest, c.rows, c.cols, bf16, c.eps_inv);
      const CompileResult compiled = compiler.Compile(
          TemplateCompileRequest(rmsnorm, manifest.reference, nullptr, problem, device.arch()));
      REQUIRE(compiled.ok);
      const Module module(compiled.cubin);
      const CUfunction function = module.Function(manifest.reference.entry);
      const Bindings bindings =
          CompileBindings(manifest, DefaultGenome(manifest), problem, device.arch_info());
      KernelArguments args(manifest.reference, bindings, device.sm_count);
      uint64_t seed = 11;
      for (DeviceTensor* input : args.Inputs()) {
        kernels.FillNormal(input->data(), input->dtype, input->elements, ++seed, stream);
      }
      stream.Synchronize();
      const std::vector<float> x = Download16(args.Tensor("x"), bf16 == 1);
      const std::vector<float> w = Download16(args.Tensor("weight"), bf16 == 1);
      DeviceTensor& out = args.Tensor("y");
      kernels.PoisonWithNaN(out.data(), out.dtype, out.elements, stream);
      Launch(function, ResolveLaunch(manifest.reference, bindings, function, device.sm_count),
             stream, args.pointers());
      stream.Synchronize();
      std::vector<float> gpu(static_cast<size_t>(out.elements));
      out.data().Download(gpu.data(), gpu.size() * 4);
      const double eps = 1.0 / static_cast<double>(c.eps_inv);
      double max_relative = 0;
      for (int64_t r = 0; r < c.rows; ++r) {
        double squares = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          const double v = x[static_cast<size_t>(r * c.cols + k)];
          squares += v * v;
        }
        const double scale = 1.0 / std::sqrt(squares / static_cast<double>(c.cols) + eps);
        for (int64_t k = 0; k < c.cols; ++k) {
          const size_t i = static_cast<size_t>(r * c.cols + k);
          const double expected = x[i] * scale * w[static_cast<size_t>(k)];
          REQUIRE(std::isfinite(gpu[i]));
          max_relative = std::max(max_relative,
                                  std::abs(gpu[i] - expected) / std::max(1.0, std::abs(expected)));
        }
      }
      CHECK(max_relative < 2e-5);
    }
  }
}

// Gates 2 (and 3 unless verify_only) for one configuration of a template of rmsnorm's problem.
GpuVerdict Evaluate(GpuGates& gates, Compiler& compiler, const KernelTemplate& kernel_template,
                    const Genome& genome, const Problem& problem, bool verify_only) {
  const CompileOutcome compiled =
      RunCompileGate(kernel_template, genome, problem, gates.device().arch_info(), compiler, {});
  INFO(compiled.reason << compiled.compiled.log);
  REQUIRE(compiled.status == Status::kCompiled);
  return gates.Evaluate(kernel_template, genome, problem, compiled.compiled.cubin, verify_only, {});
}

// Configurations of several kinds: the defaults, sub-warp rows with several rows per CTA,
// element-wide accesses re-reading the whole row, wide rows of persistent CTAs keeping the
// weight, and streaming hints.
const char* const kSettings[] = {
    "",
    "ROW_THREADS=8 ROWS_PER_CTA=16 VEC=4 CHUNKS=2",
    "ROW_THREADS=32 ROWS_PER_CTA=4 VEC=1 CHUNKS=0",
    "ROW_THREADS=256 VEC=8 CHUNKS=2 PERSISTENT=1 CACHE_WEIGHT=1 STREAMING=1",
    "ROW_THREADS=64 ROWS_PER_CTA=2 VEC=2 CHUNKS=5 PERSISTENT=1",
};

TEST_CASE("rmsnorm passes the gates in fp16 and bf16 on shapes with odd rows and columns",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const TemplateLibrary library = TemplateLibrary::Load({});
  const KernelTemplate& rmsnorm = library.Find("rmsnorm");
  const Manifest& manifest = rmsnorm.manifest;
  struct Shape {
    int64_t rows, cols;
  };
  int measured = 0;
  for (int64_t bf16 : {0, 1}) {
    for (const Shape& shape :
         {Shape{4096, 4096}, Shape{1023, 8184}, Shape{4097, 5120}, Shape{77, 997}, Shape{1, 1}}) {
      const Problem problem = RmsnormProblem(manifest, shape.rows, shape.cols, bf16);
      const SearchSpace space(manifest, problem, gates.device().arch_info());
      bool timed_shape = false;
      for (const char* settings : kSettings) {
        const Genome genome = test::GenomeFromSettings(manifest, settings);
        INFO(FormatProblem(manifest, problem) << " " << FormatGenome(manifest, genome));
        if (!space.IsValid(genome)) continue;  // e.g. rows of 256 threads over 997 columns
        // Time the first valid configuration of each shape; the others are checked only.
        const bool timed = !timed_shape;
        timed_shape = true;
        const GpuVerdict verdict = Evaluate(gates, compiler, rmsnorm, genome, problem, !timed);
        INFO(verdict.correctness.failure << verdict.error);
        CHECK(verdict.status == Status::kMeasured);
        CHECK(verdict.correctness.passed);
        CHECK(verdict.correctness.checks ==
              static_cast<int>(CheckProblems(manifest, problem).size()) *
                  manifest.correctness.seeds);
        if (timed) {
          REQUIRE(verdict.timing);
          CHECK(verdict.timing->recheck_passed);
          // Bandwidth, and no TFLOP/s: the manifest counts bytes, not flops.
          const double bytes = static_cast<double>(manifest.bytes->Evaluate(problem));
          CHECK(verdict.timing->gbps == Approx(bytes / (verdict.timing->median_us * 1e-6) / 1e9));
          CHECK(verdict.timing->tflops == 0);
          ++measured;
        }
      }
    }
  }
  CHECK(measured == 10);
}

// A deliberately broken rmsnorm: each change to rmsnorm.cu must occur exactly once.
struct RmsnormBreakage {
  std::string name;
  std::vector<std::pair<std::string, std::string>> changes;
};

const std::vector<RmsnormBreakage>& RmsnormBreakages() {
  static const std::vector<RmsnormBreakage> breakages = {
      // The partial last chunk of a row is neither summed nor normalized nor written.
      {"skips_row_tail",
       {{"  constexpr int kChunk = ROW_THREADS * V;\n",
         "  constexpr int kChunk = ROW_THREADS * V;\n  cols = cols / kChunk * kChunk;\n"}}},
      // The partial last chunk is written but left out of the sum of squares.
      {"tail_left_out_of_sum",
       {{"        squares += sum_of_squares(kept[c]);",
         "        if ((c + 1) * kChunk <= cols) squares += sum_of_squares(kept[c]);"},
        {"      squares += sum_of_squares(v);",
         "      if (col - lane * V + kChunk <= cols) squares += sum_of_squares(v);"}}},
      // eps fixed at 1e-6 whatever the problem says.
      {"ignores_eps", {{"const float eps = 1.f / eps_inv;", "const float eps = 1e-6f;"}}},
      // eps added to the root instead of the mean square.
      {"eps_outside_sqrt",
       {{"rsqrtf(squares / static_cast<float>(cols) + eps)",
         "1.f / (sqrtf(squares / static_cast<float>(cols)) + eps)"}}},
      // The mean taken over the row padded to whole chunks.
      {"mean_over_padded_row",
       {{"rsqrtf(squares / static_cast<float>(cols) + eps)",
         "rsqrtf(squares / static_cast<float>((cols + kChunk - 1) / kChunk * kChunk) + eps)"}}},
  };
  return breakages;
}

// The broken copy of rmsnorm, named rmsnorm_<breakage>, in `folder`.
std::string WriteBrokenRmsnorm(const std::filesystem::path& folder,
                               const RmsnormBreakage& breakage) {
  const std::string name = "rmsnorm_" + breakage.name;
  const auto& [first_find, first_replace] = breakage.changes.front();
  test::WriteTemplateVariant(folder, "rmsnorm", name, first_find, first_replace);
  std::string source = ReadFile(folder / "rmsnorm.cu");
  for (size_t i = 1; i < breakage.changes.size(); ++i) {
    const auto& [find, replace] = breakage.changes[i];
    const size_t at = source.find(find);
    REQUIRE(at != std::string::npos);
    REQUIRE(source.find(find, at + 1) == std::string::npos);
    source.replace(at, find.size(), replace);
  }
  test::WriteFile(folder / "rmsnorm.cu", source);
  return name;
}

TEST_CASE("every broken rmsnorm variant applies to the real template and still compiles",
          "[nvrtc]") {
  for (const RmsnormBreakage& breakage : RmsnormBreakages()) {
    INFO(breakage.name);
    test::TempDir dir;
    const std::string name = WriteBrokenRmsnorm(dir.path(), breakage);
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& broken = library.Find(name);
    CHECK(broken.source_hash != library.Find("rmsnorm").source_hash);
    NvrtcCompiler compiler;
    for (const char* settings : kSettings) {
      INFO(settings);
      const Genome genome = test::GenomeFromSettings(broken.manifest, settings);
      const CompileOutcome outcome = RunCompileGate(broken, genome, DefaultProblem(broken.manifest),
                                                    ArchByName("sm_90"), compiler, {});
      INFO(outcome.reason << outcome.compiled.log);
      CHECK(outcome.status == Status::kCompiled);
    }
  }
}

TEST_CASE("the correctness gate rejects a skipped row tail, a wrong eps and a wrong scale",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  NvrtcCompiler compiler;
  GpuGates gates(0, compiler);
  const TemplateLibrary good_library = TemplateLibrary::Load({});
  const KernelTemplate& good = good_library.Find("rmsnorm");
  for (const RmsnormBreakage& breakage : RmsnormBreakages()) {
    test::TempDir dir;
    const std::string name = WriteBrokenRmsnorm(dir.path(), breakage);
    const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
    const KernelTemplate& broken = library.Find(name);
    for (int64_t bf16 : {0, 1}) {
      // The task itself has whole chunks and eps = 1e-6: only the check problems can tell.
      const Problem problem = RmsnormProblem(broken.manifest, 4096, 4096, bf16);
      for (const char* settings : kSettings) {
        const Genome genome = test::GenomeFromSettings(broken.manifest, settings);
        INFO(name << " BF16=" << bf16 << " " << FormatGenome(broken.manifest, genome));
        const GpuVerdict verdict = Evaluate(gates, compiler, broken, genome, problem, true);
        INFO(verdict.correctness.failure << verdict.error);
        CHECK(verdict.status == Status::kIncorrect);
        CHECK_FALSE(verdict.correctness.passed);
        CHECK_FALSE(verdict.correctness.failure.empty());
        // The real template passes where its broken copy fails.
        const GpuVerdict fine = Evaluate(gates, compiler, good, genome, problem, true);
        INFO(fine.correctness.failure << fine.error);
        CHECK(fine.status == Status::kMeasured);
      }
    }
  }
}

TEST_CASE("evo run, show, export and bench take rmsnorm's --problem and print GB/s", "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  const std::vector<std::string> problem = {"-t",        "rmsnorm",   "--problem", "ROWS=4096",
                                            "--problem", "COLS=2048", "--problem", "BF16=1"};
  std::vector<std::string> run = {"run",     "--budget", "8",    "--generation-size", "8",
                                  "--elite", "2",        "--db", "runs/rms.db"};
  run.insert(run.end(), problem.begin(), problem.end());
  const auto searched = test::RunEvo(run, dir.path());
  INFO(searched.out << searched.err);
  REQUIRE(searched.exit_code == 0);
  // The elite ranks by time and shows bandwidth, not TFLOP/s.
  CHECK(searched.out.find("GB/s") != std::string::npos);
  CHECK(searched.out.find("TFLOP/s") == std::string::npos);
  CHECK(searched.err.find("GB/s, #") != std::string::npos);

  const auto elite = test::RunEvo({"show", "elite", "--db", "runs/rms.db", "--json"}, dir.path());
  REQUIRE(elite.exit_code == 0);
  const auto best = nlohmann::json::parse(elite.out)["elite"].at(0);
  CHECK(best["outcome"]["gpu"]["timing"]["gbps"].get<double>() > 0);
  const std::string id = std::to_string(best["id"].get<int64_t>());
  const auto exported =
      test::RunEvo({"export", id, "--out", "runs/rms_export", "--db", "runs/rms.db"}, dir.path());
  INFO(exported.out << exported.err);
  REQUIRE(exported.exit_code == 0);
  const auto launch =
      nlohmann::json::parse(ReadFile(dir.path() / "runs" / "rms_export" / "launch.json"));
  std::vector<std::string> params;
  for (const auto& param : launch["params"]) params.push_back(param["name"].get<std::string>());
  CHECK(params == std::vector<std::string>{"x", "weight", "y", "rows", "cols", "eps_inv"});
  CHECK(launch["params"][0]["dtype"] == "bf16");
  CHECK(launch["params"][0]["shape"] == nlohmann::json::array({4096, 2048}));
  CHECK(launch["params"][5]["value"] == 1000000);

  std::vector<std::string> bench = {"bench"};
  bench.insert(bench.end(), problem.begin(), problem.end());
  for (const auto& [knob, value] : best["genome"].items()) {
    bench.insert(bench.end(), {"--set", knob + "=" + std::to_string(value.get<int64_t>())});
  }
  const auto benched = test::RunEvo(bench, dir.path());
  INFO(benched.out << benched.err);
  CHECK(benched.exit_code == 0);
  CHECK(benched.out.find("bandwidth   ") != std::string::npos);
  CHECK(benched.out.find("GB/s at the median") != std::string::npos);

  // A sweep's recording names the command that made it, every parameter as --problem.
  std::vector<std::string> sweep = {"sweep", "--limit",       "2", "--remeasure", "0",
                                    "--out", "runs/rms.jsonl"};
  sweep.insert(sweep.end(), problem.begin(), problem.end());
  const auto swept = test::RunEvo(sweep, dir.path());
  INFO(swept.out << swept.err);
  REQUIRE(swept.exit_code == 0);
  const std::string recording = ReadFile(dir.path() / "runs" / "rms.jsonl");
  const auto header = nlohmann::json::parse(recording.substr(0, recording.find('\n')));
  CHECK(header["recorded_by"] ==
        "evo sweep --template rmsnorm --problem BF16=1 --problem COLS=2048 --problem "
        "EPS_INV=1000000 --problem ROWS=4096");
}

}  // namespace
}  // namespace evo

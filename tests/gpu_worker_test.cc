#include "evaluator/gpu_worker.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/nvrtc_compiler.h"
#include "kernel_templates/template_library.h"
#include "population/store.h"
#include "tests/sdpa_variants.h"
#include "tests/test_support.h"

namespace evo {
namespace {

TEST_CASE("fault isolation: broken sdpa kernels get their status and the next good one passes",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  for (const test::SdpaBreakage& breakage : test::SdpaBreakages()) {
    test::WriteBrokenSdpa(dir.path() / breakage.name, breakage);
  }
  const TemplateLibrary library = TemplateLibrary::Load({dir.path()});
  const ArchInfo arch = QueryDevices().at(0).arch_info();
  NvrtcCompiler compiler;
  GpuWorkerOptions worker;
  worker.executable = test::EvoBinary();
  worker.template_folders = {dir.path()};
  WorkerSupervisor supervisor(GpuWorkerCommand(worker));
  const std::chrono::milliseconds deadline(5000);

  auto evaluate = [&](const std::string& name) {
    const KernelTemplate& kernel_template = library.Find(name);
    Problem problem = DefaultProblem(kernel_template.manifest);
    problem["CAUSAL"] = 1;
    const Genome genome = DefaultGenome(kernel_template.manifest);
    const CompileOutcome compiled =
        RunCompileGate(kernel_template, genome, problem, arch, compiler, {});
    REQUIRE(compiled.status == Status::kCompiled);
    const auto start = std::chrono::steady_clock::now();
    const GpuVerdict verdict = VerdictFromWorker(
        supervisor.Evaluate(MakeEvaluatePayload(kernel_template, genome, problem,
                                                compiled.compiled.cubin, true, {}),
                            deadline),
        deadline);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    WARN(name << ": " << ToString(verdict.status) << " in " << seconds << " s " << verdict.error
              << verdict.correctness.failure);
    return verdict;
  };

  const std::pair<const char*, Status> expectations[] = {
      {"writes_out_of_bounds", Status::kRuntimeError}, {"never_terminates", Status::kTimeout},
      {"skips_last_kv_tile", Status::kIncorrect},      {"skips_tail_rows", Status::kIncorrect},
      {"drops_causal_mask", Status::kIncorrect},       {"wrong_scale", Status::kIncorrect},
  };
  for (const auto& [name, status] : expectations) {
    const GpuVerdict broken = evaluate(test::BrokenSdpaName(test::FindSdpaBreakage(name)));
    CHECK(broken.status == status);
    if (status == Status::kRuntimeError) {
      CHECK(broken.poisoned);
      CHECK(broken.error.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
    }
    const GpuVerdict good = evaluate("sdpa_fp16");
    CHECK(good.status == Status::kMeasured);
    CHECK(good.correctness.passed);
  }
  CHECK(supervisor.respawns() >= 2);
}

TEST_CASE("inside evo run, a kernel that hangs only when causal costs seconds per candidate",
          "[gpu]") {
  if (!test::HaveGpuDriver()) {
    WARN("skipped: no GPU driver (libcuda.so.1) on this machine");
    return;
  }
  test::TempDir dir;
  const test::SdpaBreakage& hang = test::FindSdpaBreakage("hangs_when_causal");
  test::WriteBrokenSdpa(dir.path() / "templates", hang);
  const auto db = dir.path() / "hang.db";
  const auto start = std::chrono::steady_clock::now();
  // --allow-spills: the drawn seed may propose a configuration that spills, which would stop at
  // gate 1 instead of reaching the hang.
  const test::CommandResult run = test::RunEvo(
      {"--templates", (dir.path() / "templates").string(), "run", "-t", test::BrokenSdpaName(hang),
       "--causal", "--budget", "3", "--generation-size", "3", "--allow-spills", "--db", db.string(),
       "--cache-dir", (dir.path() / "cache").string()},
      dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  // The default deadline follows from the reference kernel's runs on the task.
  CHECK(run.err.find("gates 2 and 3 get") != std::string::npos);
  PopulationStore store(db, PopulationStore::Access::kReadOnly);
  const std::vector<CandidateRecord> candidates = store.Candidates(store.Runs().at(0).id);
  REQUIRE(candidates.size() == 3);
  for (const CandidateRecord& candidate : candidates) {
    INFO(candidate.outcome.reason);
    CHECK(candidate.outcome.status == Status::kTimeout);
    // The time the worker had, under 10 s: "no verdict within the deadline of N ms".
    CHECK(candidate.outcome.gpu_ms < 10000);
  }
  WARN("3 hanging candidates in " << seconds << " s: " << candidates[0].outcome.reason);
  // Each costs its deadline, the worker's replacement and its compile: well under 10 s.
  CHECK(seconds < 3 * 10);
}

}  // namespace
}  // namespace evo

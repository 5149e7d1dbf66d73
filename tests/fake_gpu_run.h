#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/search.h"
#include "evaluator/compiler.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_pipeline.h"
#include "population/store.h"
#include "tests/test_support.h"

namespace evo::test {

// evo_fake_worker, beside the test executable.
std::string FakeWorker();

// NVRTC's stand-in: every configuration compiles at once, to 64 registers and no spills.
class InstantCompiler final : public Compiler {
 public:
  explicit InstantCompiler(const Manifest& manifest);
  CompileResult Compile(const CompileRequest& request) override;
  std::string Version() const override { return "instant"; }
  std::vector<std::string> Options(const CompileRequest&) const override { return {}; }
  int compiles() const { return compiles_.load(); }  // how many it answered

 private:
  std::vector<std::string> entries_;
  std::atomic<int> compiles_{0};
};

DeviceInfo FakeDevice(int ordinal, std::string name = "Fake GPU");

// A search of sdpa_fp16 over the space the H100 recording covers, measured by evo_fake_worker
// processes (one per fake GPU, each with its own flags) through the real GpuPipeline.
class FakeGpuRun {
 public:
  FakeGpuRun(std::vector<std::vector<std::string>> worker_flags, uint64_t seed, int64_t budget,
             int elite_size = 3);

  // The search (and, unless options.retime.rounds is 0, the elite's re-timing) as `evo run`
  // makes it; `stop` as Ctrl-C sets it.
  SearchSummary Run(SearchOptions options = {});
  SearchSummary Run(SearchOptions options, const std::atomic<bool>& stop);

  // New workers with these flags, as a resumed `evo run` starts (the store and run stay).
  void Restart(std::vector<std::vector<std::string>> worker_flags);

  // The devices each configuration was sent to, in the order the workers received them.
  std::map<Genome, std::vector<int>> Requests() const;
  // Every request as (device, genome), in the order the log has them.
  std::vector<std::pair<int, Genome>> RequestLog() const;

  PopulationStore& store() { return store_; }
  int64_t run_id() const { return run_id_; }
  GpuPipeline& pipeline() { return *pipeline_; }
  const InstantCompiler& compiler() const { return compiler_; }
  const std::filesystem::path& folder() const { return dir_.path(); }

 private:
  TempDir dir_;
  TemplateLibrary library_;
  const KernelTemplate& kernel_template_;
  Problem problem_;
  Manifest searched_;
  SearchSpace space_;
  InstantCompiler compiler_;
  std::filesystem::path log_;
  PopulationStore store_;
  std::unique_ptr<GpuPipeline> pipeline_;
  int64_t run_id_ = 0;
};

}  // namespace evo::test

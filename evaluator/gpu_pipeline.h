#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "evaluator/candidate_evaluator.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_worker.h"
#include "evaluator/worker_supervisor.h"
#include "kernel_templates/template_library.h"

namespace evo {

struct GpuPipelineOptions {
  int compile_jobs = 0;  // concurrent NVRTC compiles; 0: DefaultCompileJobs()
  bool allow_spills = false;
  // The worker's time for gates 2 and 3 of one candidate; when absent, GateDeadline of the
  // reference kernel's runs on the task, measured when the pipeline starts.
  std::optional<std::chrono::milliseconds> deadline;
  TimingOptions timing;
  GpuWorkerOptions worker;
  WorkerSupervisorOptions supervisor;
};

// One compile per core, but no more than memory allows: an NVRTC instance compiling a kernel
// of this size can hold several hundred MB.
int DefaultCompileJobs();

// The real evaluator: gate 1 on a pool of CPU threads running NVRTC ahead of the GPU, gates 2
// and 3 in the GPU worker process (one per GPU), so the GPU never waits for a compile it could
// have had earlier.
class GpuPipeline final : public CandidateEvaluator {
 public:
  // `compiler` must be safe to call from several threads (NvrtcCompiler and CachingCompiler
  // are). Starts the worker; throws evo::Error when it cannot.
  GpuPipeline(const KernelTemplate& kernel_template, Problem problem, const DeviceInfo& device,
              Compiler& compiler, GpuPipelineOptions options);
  ~GpuPipeline() override;  // joins the compile threads; queued compiles are dropped

  const EvaluatorIdentity& identity() const override { return identity_; }
  void Prefetch(const std::vector<Genome>& genomes) override;
  CandidateOutcome Evaluate(const Genome& genome) override;
  GpuVerdict Remeasure(const Genome& genome) override;

  int compile_jobs() const { return static_cast<int>(threads_.size()); }
  std::chrono::milliseconds deadline() const { return deadline_; }
  uint64_t worker_respawns() const { return supervisor_->respawns(); }

 private:
  std::shared_future<CompileOutcome> Enqueue(const Genome& genome);
  void CompileLoop();
  GpuVerdict RunGpuGates(const Genome& genome, const std::string& cubin, double* gpu_ms);

  const KernelTemplate& kernel_template_;
  Problem problem_;
  ArchInfo arch_;
  Compiler& compiler_;
  GpuPipelineOptions options_;
  EvaluatorIdentity identity_;
  std::unique_ptr<WorkerSupervisor> supervisor_;
  std::chrono::milliseconds deadline_{0};

  std::mutex mutex_;
  std::condition_variable work_ready_;
  bool stopping_ = false;
  std::deque<std::pair<Genome, std::promise<CompileOutcome>>> queue_;
  std::map<Genome, std::shared_future<CompileOutcome>> compiles_;
  std::vector<std::thread> threads_;
  std::pair<Genome, std::string> last_measured_;  // genome and cubin
};

}  // namespace evo

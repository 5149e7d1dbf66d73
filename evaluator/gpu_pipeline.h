#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "evaluator/candidate_evaluator.h"
#include "evaluator/compile_gate.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/gpu_worker.h"
#include "evaluator/worker_supervisor.h"
#include "kernel_templates/template_library.h"

namespace evo {

// The evaluator's identity when it times on inputs with outlier rows
// (TimingOptions::outlier_inputs).
inline constexpr std::string_view kOutlierTimingEvaluator =
    "gpu, timed on inputs with outlier rows";

struct GpuPipelineOptions {
  int compile_jobs = 0;  // concurrent NVRTC compiles; 0: DefaultCompileJobs()
  bool allow_spills = false;
  // The worker's time for gates 2 and 3 of one candidate; when absent, GateDeadline of the
  // reference kernel's runs on the task, measured on each GPU when the pipeline starts.
  std::optional<std::chrono::milliseconds> deadline;
  TimingOptions timing;
  GpuWorkerOptions worker;  // its device is each lane's
  WorkerSupervisorOptions supervisor;
  // The command that starts the worker of the GPU with this ordinal; empty: GpuWorkerCommand of
  // `worker` on that device. Tests start stand-ins that need no GPU.
  std::function<std::vector<std::string>(int device)> worker_command;
  // The driver's version for the identity ("13.0"); empty: asked of the driver.
  std::string driver_version;
};

// One compile per core, but no more than memory allows: an NVRTC instance compiling a kernel
// of this size can hold several hundred MB.
int DefaultCompileJobs();

// GPUs of different models measure different times for the same kernel, so one run measures on
// one model only. Throws evo::Error naming two that differ.
void RequireOneGpuModel(const std::vector<DeviceInfo>& devices);

// The real evaluator: gate 1 on a pool of CPU threads running NVRTC ahead of every GPU, gates 2
// and 3 in one worker process per GPU (a lane each), so no GPU waits for a compile it could have
// had earlier, and a configuration is compiled once whichever GPU measures it.
class GpuPipeline final : public CandidateEvaluator {
 public:
  // `devices`: the GPUs to measure on, one lane each, all of one model. `compiler` must be safe
  // to call from several threads (NvrtcCompiler and CachingCompiler are). Starts the workers at
  // once; throws evo::Error when one cannot start or the GPUs differ in model.
  GpuPipeline(const KernelTemplate& kernel_template, Problem problem,
              const std::vector<DeviceInfo>& devices, Compiler& compiler,
              GpuPipelineOptions options);
  ~GpuPipeline() override;  // joins the compile threads; queued compiles are dropped

  const EvaluatorIdentity& identity() const override { return identity_; }
  const std::vector<GpuIdentity>& lanes() const override { return gpus_; }
  void Prefetch(const std::vector<Genome>& genomes) override;
  void Speculate(const std::vector<Genome>& genomes) override;
  bool ReadyToMeasure(const Genome& genome) const override;
  CandidateOutcome Evaluate(int lane, const Genome& genome) override;
  GpuVerdict Remeasure(int lane, const Genome& genome) override;

  int compile_jobs() const { return static_cast<int>(threads_.size()); }
  std::chrono::milliseconds deadline(int lane) const;
  // Workers started to replace failed ones, over all lanes. Read it while no lane is driven.
  uint64_t worker_respawns() const;

 private:
  // One GPU: its worker, its deadline and the cubins of the configurations it measured that
  // the search may still confirm (or the elite's re-timing time again).
  struct Lane {
    std::unique_ptr<WorkerSupervisor> supervisor;
    std::chrono::milliseconds deadline{0};
    std::deque<std::pair<Genome, std::string>> measured;  // newest last
  };

  std::shared_future<CompileOutcome> Enqueue(const Genome& genome);
  // Waits for the configuration's compile and forgets it (a lane keeps what it measures).
  CompileOutcome TakeCompiled(const Genome& genome);
  void CompileLoop();
  GpuVerdict RunGpuGates(int lane, const Genome& genome, const std::string& cubin, double* gpu_ms);
  // The cubin of a configuration some lane measured lately, or empty; and keeping one.
  std::string KeptCubin(const Genome& genome) const;
  void Keep(int lane, const Genome& genome, const std::string& cubin);

  const KernelTemplate& kernel_template_;
  Problem problem_;
  ArchInfo arch_;
  Compiler& compiler_;
  GpuPipelineOptions options_;
  EvaluatorIdentity identity_;
  std::vector<GpuIdentity> gpus_;
  std::vector<Lane> lanes_;

  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  bool stopping_ = false;
  // Compiles asked for by Prefetch or a lane, then Speculate's, each taken in order.
  std::deque<std::pair<Genome, std::promise<CompileOutcome>>> queue_;
  std::deque<std::pair<Genome, std::promise<CompileOutcome>>> speculative_queue_;
  std::map<Genome, std::shared_future<CompileOutcome>> compiles_;
  // Speculated compiles no lane has taken yet, with the Prefetch count when they were asked for:
  // forgotten a few Prefetch calls later, so wrong guesses do not pile up their cubins.
  std::map<Genome, uint64_t> speculated_;
  uint64_t prefetches_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace evo

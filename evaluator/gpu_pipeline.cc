#include "evaluator/gpu_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/error.h"
#include "evaluator/nvrtc_compiler.h"

namespace evo {
namespace {

// The time the reference kernel may take on every check problem and seed of a task: it is the
// trusted kernel, so a generous limit that only a broken environment reaches.
constexpr std::chrono::milliseconds kReferenceLimit{600000};

std::string FormatMilliseconds(double ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", ms);
  return text;
}

// What one NVRTC compile of a template kernel may hold at its peak, with room to spare.
constexpr int64_t kBytesPerCompile = 768ll << 20;

int64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

CandidateOutcome FromCompileOutcome(const CompileOutcome& compiled) {
  CandidateOutcome outcome;
  outcome.status = compiled.status;
  outcome.reason = compiled.reason;
  outcome.resources = compiled.resources;
  outcome.threads_per_block = compiled.threads_per_block;
  outcome.dynamic_smem = compiled.dynamic_smem;
  outcome.compile_ms = compiled.compiled.compile_ms;
  outcome.compile_cached = compiled.compiled.cache_hit;
  constexpr size_t kMaxLog = 16 * 1024;
  outcome.compile_log = compiled.compiled.log.substr(0, kMaxLog);
  if (compiled.compiled.log.size() > kMaxLog) outcome.compile_log += "\n[log cut at 16 KiB]\n";
  return outcome;
}

}  // namespace

int DefaultCompileJobs() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t memory = AvailableMemoryBytes();
  const int by_memory =
      memory > 0 ? static_cast<int>(std::max<int64_t>(1, memory / kBytesPerCompile)) : cores;
  return std::min(cores, by_memory);
}

GpuPipeline::GpuPipeline(const KernelTemplate& kernel_template, Problem problem,
                         const DeviceInfo& device, Compiler& compiler, GpuPipelineOptions options)
    : kernel_template_(kernel_template),
      problem_(std::move(problem)),
      arch_(device.arch_info()),
      compiler_(compiler),
      options_(std::move(options)) {
  identity_.evaluator = "gpu";
  identity_.device = device.name;
  identity_.arch = arch_.name;
  const int driver = DriverVersion();
  identity_.driver_version =
      std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  identity_.nvrtc_version = compiler.Version();
  identity_.template_hash = kernel_template.source_hash;
  options_.worker.device = device.ordinal;
  supervisor_ =
      std::make_unique<WorkerSupervisor>(GpuWorkerCommand(options_.worker), options_.supervisor);
  if (options_.deadline) {
    deadline_ = *options_.deadline;
  } else {
    // Also fills the worker's reference cache, so the first candidate costs its own launches.
    ReferenceTiming reference;
    deadline_ = TaskDeadline(*supervisor_, kernel_template_, problem_, options_.timing,
                             kReferenceLimit, &reference);
    identity_.notice = "gates 2 and 3 get " + std::to_string(deadline_.count()) +
                       " ms per candidate (the reference kernel ran " +
                       std::to_string(reference.runs) + " times in " +
                       FormatMilliseconds(reference.all_ms) + " ms; --deadline-ms overrides)";
  }
  const int jobs = options_.compile_jobs > 0 ? options_.compile_jobs : DefaultCompileJobs();
  for (int i = 0; i < jobs; ++i) threads_.emplace_back([this] { CompileLoop(); });
}

GpuPipeline::~GpuPipeline() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void GpuPipeline::CompileLoop() {
  for (;;) {
    std::pair<Genome, std::promise<CompileOutcome>> job;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job.second.set_value(RunCompileGate(kernel_template_, job.first, problem_, arch_, compiler_,
                                          {options_.allow_spills}));
    } catch (...) {
      job.second.set_exception(std::current_exception());
    }
  }
}

std::shared_future<CompileOutcome> GpuPipeline::Enqueue(const Genome& genome) {
  std::lock_guard lock(mutex_);
  auto found = compiles_.find(genome);
  if (found != compiles_.end()) return found->second;
  std::promise<CompileOutcome> promise;
  std::shared_future<CompileOutcome> future = promise.get_future().share();
  compiles_.emplace(genome, future);
  queue_.emplace_back(genome, std::move(promise));
  work_ready_.notify_one();
  return future;
}

void GpuPipeline::Prefetch(const std::vector<Genome>& genomes) {
  for (const Genome& genome : genomes) Enqueue(genome);
}

GpuVerdict GpuPipeline::RunGpuGates(const Genome& genome, const std::string& cubin,
                                    double* gpu_ms) {
  const WorkerVerdict answer = supervisor_->Evaluate(
      MakeEvaluatePayload(kernel_template_, genome, problem_, cubin, false, options_.timing),
      deadline_);
  if (gpu_ms != nullptr) *gpu_ms = static_cast<double>(answer.elapsed.count()) / 1000.0;
  return VerdictFromWorker(answer, deadline_);
}

CandidateOutcome GpuPipeline::Evaluate(const Genome& genome) {
  const CompileOutcome compiled = Enqueue(genome).get();
  {
    std::lock_guard lock(mutex_);
    compiles_.erase(genome);
  }
  CandidateOutcome outcome = FromCompileOutcome(compiled);
  if (compiled.status != Status::kCompiled) return outcome;
  GpuVerdict verdict = RunGpuGates(genome, compiled.compiled.cubin, &outcome.gpu_ms);
  outcome.status = verdict.status;
  outcome.reason = verdict.status == Status::kMeasured ? "" : verdict.error;
  if (verdict.status == Status::kIncorrect && outcome.reason.empty()) {
    outcome.reason = verdict.correctness.failure;
  }
  outcome.gpu = std::move(verdict);
  // The search confirms a measured candidate right after measuring it; keep its cubin for that.
  if (outcome.status == Status::kMeasured) {
    last_measured_ = {genome, compiled.compiled.cubin};
  }
  return outcome;
}

GpuVerdict GpuPipeline::Remeasure(const Genome& genome) {
  if (last_measured_.first == genome) {
    return RunGpuGates(genome, last_measured_.second, nullptr);
  }
  const CompileOutcome compiled = Enqueue(genome).get();
  {
    std::lock_guard lock(mutex_);
    compiles_.erase(genome);
  }
  if (compiled.status != Status::kCompiled) {
    throw Error("cannot re-measure a configuration that does not compile: " + compiled.reason);
  }
  return RunGpuGates(genome, compiled.compiled.cubin, nullptr);
}

}  // namespace evo

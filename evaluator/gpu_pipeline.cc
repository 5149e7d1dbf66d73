#include "evaluator/gpu_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <set>

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

void RequireOneGpuModel(const std::vector<DeviceInfo>& devices) {
  for (const DeviceInfo& device : devices) {
    if (device.name != devices.front().name) {
      throw Error("GPU " + std::to_string(devices.front().ordinal) + " (" + devices.front().name +
                  ") and GPU " + std::to_string(device.ordinal) + " (" + device.name +
                  ") are different models, whose times do not compare; one run measures on "
                  "GPUs of one model: name them with --gpus");
    }
  }
}

GpuPipeline::GpuPipeline(const KernelTemplate& kernel_template, Problem problem,
                         const std::vector<DeviceInfo>& devices, Compiler& compiler,
                         GpuPipelineOptions options)
    : kernel_template_(kernel_template),
      problem_(std::move(problem)),
      compiler_(compiler),
      options_(std::move(options)) {
  if (devices.empty()) throw Error("the GPU pipeline needs at least one GPU");
  RequireOneGpuModel(devices);
  arch_ = devices.front().arch_info();
  // Timings on other inputs do not compare: a run resumes only on the same (CheckResumable).
  identity_.evaluator =
      options_.timing.outlier_inputs ? std::string(kOutlierTimingEvaluator) : "gpu";
  identity_.device = devices.front().name;
  identity_.arch = arch_.name;
  if (options_.driver_version.empty()) {
    const int driver = DriverVersion();
    options_.driver_version =
        std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  }
  identity_.driver_version = options_.driver_version;
  identity_.nvrtc_version = compiler.Version();
  identity_.template_hash = kernel_template.source_hash;

  // Every GPU's worker starts, and runs the reference kernel, at once: a context and the
  // reference's outputs take seconds per GPU.
  lanes_.resize(devices.size());
  std::vector<ReferenceTiming> references(devices.size());
  std::vector<std::exception_ptr> failures(devices.size());
  std::vector<std::thread> starters;
  for (size_t i = 0; i < devices.size(); ++i) {
    gpus_.push_back({devices[i].ordinal, devices[i].name, devices[i].uuid});
    starters.emplace_back([this, i, &devices, &references, &failures] {
      try {
        GpuWorkerOptions worker = options_.worker;
        worker.device = devices[i].ordinal;
        const std::vector<std::string> command = options_.worker_command
                                                     ? options_.worker_command(worker.device)
                                                     : GpuWorkerCommand(worker);
        Lane& lane = lanes_[i];
        lane.supervisor = std::make_unique<WorkerSupervisor>(command, options_.supervisor);
        // Also fills the worker's reference cache, so the first candidate costs its own launches.
        lane.deadline = options_.deadline
                            ? *options_.deadline
                            : TaskDeadline(*lane.supervisor, kernel_template_, problem_,
                                           options_.timing, kReferenceLimit, &references[i]);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    });
  }
  for (std::thread& starter : starters) starter.join();
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!failures[i]) continue;
    try {
      std::rethrow_exception(failures[i]);
    } catch (const std::exception& error) {
      throw Error(devices.size() == 1
                      ? std::string(error.what())
                      : "GPU " + std::to_string(devices[i].ordinal) + ": " + error.what());
    }
  }
  if (!options_.deadline) {
    if (devices.size() == 1) {
      identity_.notice = "gates 2 and 3 get " + std::to_string(lanes_[0].deadline.count()) +
                         " ms per candidate (the reference kernel ran " +
                         std::to_string(references[0].runs) + " times in " +
                         FormatMilliseconds(references[0].all_ms) + " ms; --deadline-ms overrides)";
    } else {
      identity_.notice = "gates 2 and 3 get";
      for (size_t i = 0; i < devices.size(); ++i) {
        identity_.notice += (i == 0 ? " " : ", ") + std::to_string(lanes_[i].deadline.count()) +
                            " ms per candidate on GPU " + std::to_string(devices[i].ordinal);
      }
      identity_.notice += " (from the reference kernel's runs on each; --deadline-ms overrides)";
    }
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

std::chrono::milliseconds GpuPipeline::deadline(int lane) const {
  return lanes_.at(static_cast<size_t>(lane)).deadline;
}

uint64_t GpuPipeline::worker_respawns() const {
  uint64_t respawns = 0;
  for (const Lane& lane : lanes_) respawns += lane.supervisor->respawns();
  return respawns;
}

void GpuPipeline::CompileLoop() {
  for (;;) {
    std::pair<Genome, std::promise<CompileOutcome>> job;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(
          lock, [this] { return stopping_ || !queue_.empty() || !speculative_queue_.empty(); });
      if (stopping_) return;
      auto& from = queue_.empty() ? speculative_queue_ : queue_;
      job = std::move(from.front());
      from.pop_front();
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
  if (found != compiles_.end()) {
    // Asked for now: a speculated compile not started yet moves ahead of the guesses.
    speculated_.erase(genome);
    const auto queued = std::find_if(speculative_queue_.begin(), speculative_queue_.end(),
                                     [&](const auto& job) { return job.first == genome; });
    if (queued != speculative_queue_.end()) {
      queue_.push_back(std::move(*queued));
      speculative_queue_.erase(queued);
    }
    return found->second;
  }
  std::promise<CompileOutcome> promise;
  std::shared_future<CompileOutcome> future = promise.get_future().share();
  compiles_.emplace(genome, future);
  queue_.emplace_back(genome, std::move(promise));
  work_ready_.notify_one();
  return future;
}

CompileOutcome GpuPipeline::TakeCompiled(const Genome& genome) {
  CompileOutcome compiled = Enqueue(genome).get();
  std::lock_guard lock(mutex_);
  compiles_.erase(genome);
  return compiled;
}

void GpuPipeline::Prefetch(const std::vector<Genome>& genomes) {
  {
    // The guesses of the last Speculate that no thread started are dropped, and those compiled
    // a few Prefetch calls ago and never asked for are forgotten. One asked for again now is
    // kept (dropped from the queue, it is queued again below).
    constexpr uint64_t kSpeculationsKept = 4;
    const std::set<Genome> asked(genomes.begin(), genomes.end());
    std::lock_guard lock(mutex_);
    ++prefetches_;
    for (const auto& job : speculative_queue_) {
      compiles_.erase(job.first);
      speculated_.erase(job.first);
    }
    speculative_queue_.clear();
    for (auto it = speculated_.begin(); it != speculated_.end();) {
      if (asked.count(it->first) == 0 && it->second + kSpeculationsKept < prefetches_) {
        compiles_.erase(it->first);
        it = speculated_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const Genome& genome : genomes) {
    // A kept cubin needs no compile (Remeasure takes it); one not taken would stay queued.
    if (KeptCubin(genome).empty()) Enqueue(genome);
  }
}

void GpuPipeline::Speculate(const std::vector<Genome>& genomes) {
  std::lock_guard lock(mutex_);
  for (const Genome& genome : genomes) {
    if (compiles_.count(genome) > 0) continue;
    std::promise<CompileOutcome> promise;
    compiles_.emplace(genome, promise.get_future().share());
    speculative_queue_.emplace_back(genome, std::move(promise));
    speculated_.emplace(genome, prefetches_);
  }
  work_ready_.notify_all();
}

bool GpuPipeline::ReadyToMeasure(const Genome& genome) const {
  std::lock_guard lock(mutex_);
  const auto found = compiles_.find(genome);
  return found != compiles_.end() &&
         found->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

GpuVerdict GpuPipeline::RunGpuGates(int lane, const Genome& genome, const std::string& cubin,
                                    double* gpu_ms) {
  Lane& on = lanes_.at(static_cast<size_t>(lane));
  WorkerVerdict answer;
  try {
    answer = on.supervisor->Evaluate(
        MakeEvaluatePayload(kernel_template_, genome, problem_, cubin, false, options_.timing),
        on.deadline);
  } catch (const Error& error) {
    // Its worker cannot be replaced: this GPU is out, not the candidate.
    throw LaneError("GPU " + std::to_string(gpus_[static_cast<size_t>(lane)].ordinal) + ": " +
                    error.what());
  }
  if (gpu_ms != nullptr) *gpu_ms = static_cast<double>(answer.elapsed.count()) / 1000.0;
  return VerdictFromWorker(answer, on.deadline);
}

CandidateOutcome GpuPipeline::Evaluate(int lane, const Genome& genome) {
  const CompileOutcome compiled = TakeCompiled(genome);
  CandidateOutcome outcome = FromCompileOutcome(compiled);
  if (compiled.status != Status::kCompiled) return outcome;
  GpuVerdict verdict = RunGpuGates(lane, genome, compiled.compiled.cubin, &outcome.gpu_ms);
  outcome.status = verdict.status;
  outcome.reason = verdict.status == Status::kMeasured ? "" : verdict.error;
  if (verdict.status == Status::kIncorrect && outcome.reason.empty()) {
    outcome.reason = verdict.correctness.failure;
  }
  outcome.gpu = std::move(verdict);
  // The search may confirm a measured candidate on this GPU, once the candidates before it are
  // decided; keep its cubin for that (the latest few: an older one is compiled again).
  if (outcome.status == Status::kMeasured) Keep(lane, genome, compiled.compiled.cubin);
  return outcome;
}

std::string GpuPipeline::KeptCubin(const Genome& genome) const {
  // Every GPU of a run is of one model, so a cubin kept by any lane runs on all of them.
  std::lock_guard lock(mutex_);
  for (const Lane& lane : lanes_) {
    for (const auto& [measured, kept] : lane.measured) {
      if (measured == genome) return kept;
    }
  }
  return "";
}

void GpuPipeline::Keep(int lane, const Genome& genome, const std::string& cubin) {
  constexpr size_t kKeptCubins = 64;
  std::lock_guard lock(mutex_);
  auto& measured = lanes_.at(static_cast<size_t>(lane)).measured;
  measured.emplace_back(genome, cubin);
  if (measured.size() > kKeptCubins) measured.pop_front();
}

GpuVerdict GpuPipeline::Remeasure(int lane, const Genome& genome) {
  std::string cubin = KeptCubin(genome);
  if (cubin.empty()) {
    // A configuration measured by an earlier session (the elite's re-timing after a resume):
    // compiled again (the compile cache usually has it) and kept for the next rounds.
    const CompileOutcome compiled = TakeCompiled(genome);
    if (compiled.status != Status::kCompiled) {
      throw Error("cannot re-measure a configuration that does not compile: " + compiled.reason);
    }
    cubin = compiled.compiled.cubin;
    Keep(lane, genome, cubin);
  }
  return RunGpuGates(lane, genome, cubin, nullptr);
}

}  // namespace evo

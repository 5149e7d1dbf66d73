#include "evaluator/gpu_worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "common/base64.h"
#include "common/error.h"
#include "evaluator/compile_cache.h"
#include "evaluator/cuda_errors.h"
#include "evaluator/gpu_verdict_json.h"
#include "evaluator/nvrtc_compiler.h"
#include "evaluator/worker_protocol.h"

namespace evo {
namespace {

TimingOptions TimingFromJson(const nlohmann::json& json) {
  TimingOptions timing;
  timing.warmup_ms = json.at("warmup_ms").get<double>();
  timing.min_repetitions = json.at("min_repetitions").get<int>();
  timing.max_repetitions = json.at("max_repetitions").get<int>();
  timing.max_total_ms = json.at("max_total_ms").get<double>();
  timing.target_spread = json.at("target_spread").get<double>();
  timing.target_repetition_us = json.at("target_repetition_us").get<double>();
  timing.flush_l2 = json.at("flush_l2").get<bool>();
  timing.outlier_inputs = json.at("outlier_inputs").get<bool>();
  return timing;
}

// Everything a worker holds between requests.
class WorkerState {
 public:
  explicit WorkerState(const GpuWorkerOptions& options)
      : options_(options), library_(TemplateLibrary::Load(options.template_folders)) {
    if (!options.cache_dir.empty()) {
      cache_ = std::make_unique<CompileCache>(options.cache_dir);
      caching_ = std::make_unique<CachingCompiler>(nvrtc_, *cache_);
    }
  }

  WorkerReply Handle(const WorkerRequest& request) {
    WorkerReply reply;
    reply.id = request.id;
    try {
      if (!gates_) {
        gates_ = std::make_unique<GpuGates>(options_.device, compiler());
      }
      if (request.type == RequestType::kHealth) {
        gates_->HealthCheck(library_.templates().front());
        reply.ok = true;
        reply.result = {{"device", gates_->device().name}};
        return reply;
      }
      const nlohmann::json& payload = request.payload;
      const KernelTemplate& kernel_template =
          library_.Find(payload.at("template").get<std::string>());
      if (payload.at("template_hash").get<std::string>() != kernel_template.source_hash) {
        throw Error("the worker's template " + kernel_template.manifest.name +
                    " is another version than evo's");
      }
      const Problem problem = payload.at("problem").get<Problem>();
      CheckProblem(kernel_template.manifest, problem);
      if (payload.value("reference_only", false)) {
        const ReferenceTiming timing = gates_->PrepareReference(kernel_template, problem);
        reply.ok = true;
        reply.result = {
            {"task_ms", timing.task_ms}, {"all_ms", timing.all_ms}, {"runs", timing.runs}};
        return reply;
      }
      const Genome genome = payload.at("genome").get<Genome>();
      CheckGenome(kernel_template.manifest, genome);
      const std::optional<std::string> cubin =
          Base64Decode(payload.at("cubin_base64").get<std::string>());
      if (!cubin) throw Error("the cubin is not base64");
      const GpuVerdict verdict = gates_->Evaluate(kernel_template, genome, problem, *cubin,
                                                  payload.at("verify_only").get<bool>(),
                                                  TimingFromJson(payload.at("timing")));
      if (verdict.status == Status::kRuntimeError) {
        reply.ok = false;
        reply.error = verdict.error;
        reply.poisoned = verdict.poisoned;
      } else {
        reply.ok = true;
        reply.result = GpuVerdictToJson(verdict);
      }
    } catch (const CudaError& error) {
      reply.ok = false;
      reply.error = error.what();
      reply.poisoned = PoisonsContext(error.result());
    } catch (const std::exception& error) {
      // Not the candidate's fault, but the worker cannot say more; a fresh one starts clean.
      reply.ok = false;
      reply.error = std::string("worker: ") + error.what();
      reply.poisoned = true;
    }
    return reply;
  }

 private:
  Compiler& compiler() { return caching_ ? static_cast<Compiler&>(*caching_) : nvrtc_; }

  GpuWorkerOptions options_;
  TemplateLibrary library_;
  NvrtcCompiler nvrtc_;
  std::unique_ptr<CompileCache> cache_;
  std::unique_ptr<CachingCompiler> caching_;
  std::unique_ptr<GpuGates> gates_;
};

}  // namespace

int RunGpuWorker(const GpuWorkerOptions& options, std::istream& in, std::ostream& out) {
  WorkerState state(options);
  std::string line;
  while (std::getline(in, line)) {
    const Decoded<WorkerRequest> request = DecodeRequest(line);
    if (!request.ok()) {
      spdlog::error("worker: unreadable request: {}", request.problem);
      return 2;
    }
    const WorkerReply reply = state.Handle(*request.message);
    out << EncodeReply(reply) << '\n' << std::flush;
    // A poisoned context fails everything after it; the supervisor replaces this worker.
    if (!reply.ok && reply.poisoned) return 3;
  }
  return 0;
}

std::optional<std::vector<int>> ParseGpuList(const std::string& spec) {
  if (spec == "all") return std::nullopt;
  std::vector<int> gpus;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::optional<int64_t> value =
        ParseInteger(std::string_view(spec).substr(start, comma - start));
    if (!value || *value < 0 || *value > 1023) {
      throw Error("malformed --gpus '" + spec + "': expected all or GPU numbers like 0,1");
    }
    if (std::find(gpus.begin(), gpus.end(), *value) != gpus.end()) {
      throw Error("GPU " + std::to_string(*value) + " is named twice in --gpus");
    }
    gpus.push_back(static_cast<int>(*value));
    start = comma + 1;
  }
  return gpus;
}

std::vector<int> SelectGpus(const std::string& spec, int device_count) {
  const std::optional<std::vector<int>> listed = ParseGpuList(spec);
  if (!listed) {
    std::vector<int> gpus;
    for (int gpu = 0; gpu < device_count; ++gpu) gpus.push_back(gpu);
    if (gpus.empty()) throw Error("no GPU is here");
    return gpus;
  }
  for (int gpu : *listed) {
    if (gpu >= device_count) {
      throw Error("there is no GPU " + std::to_string(gpu) + " (found " +
                  std::to_string(device_count) + ")");
    }
  }
  return *listed;
}

std::vector<std::string> GpuWorkerCommand(const GpuWorkerOptions& options) {
  const std::filesystem::path executable = options.executable.empty()
                                               ? std::filesystem::read_symlink("/proc/self/exe")
                                               : options.executable;
  std::vector<std::string> argv = {executable.string(), "worker", "--device",
                                   std::to_string(options.device)};
  for (const auto& folder : options.template_folders) {
    argv.push_back("--templates");
    argv.push_back(folder.string());
  }
  if (!options.cache_dir.empty()) {
    argv.push_back("--cache-dir");
    argv.push_back(options.cache_dir.string());
  } else {
    argv.push_back("--no-cache");
  }
  return argv;
}

nlohmann::json MakeEvaluatePayload(const KernelTemplate& kernel_template, const Genome& genome,
                                   const Problem& problem, const std::string& cubin,
                                   bool verify_only, const TimingOptions& timing) {
  return {{"template", kernel_template.manifest.name},
          {"template_hash", kernel_template.source_hash},
          {"genome", genome},
          {"problem", problem},
          {"cubin_base64", Base64Encode(cubin)},
          {"verify_only", verify_only},
          {"timing",
           {{"warmup_ms", timing.warmup_ms},
            {"min_repetitions", timing.min_repetitions},
            {"max_repetitions", timing.max_repetitions},
            {"max_total_ms", timing.max_total_ms},
            {"target_spread", timing.target_spread},
            {"target_repetition_us", timing.target_repetition_us},
            {"flush_l2", timing.flush_l2},
            {"outlier_inputs", timing.outlier_inputs}}}};
}

nlohmann::json MakeReferencePayload(const KernelTemplate& kernel_template, const Problem& problem) {
  return {{"template", kernel_template.manifest.name},
          {"template_hash", kernel_template.source_hash},
          {"problem", problem},
          {"reference_only", true}};
}

std::chrono::milliseconds GateDeadline(const ReferenceTiming& reference,
                                       const TimingOptions& timing) {
  // Loading the modules, and compiling the reference after a worker was replaced.
  constexpr double kOverheadMs = 500;
  // Twice the launches a candidate as fast as the reference makes (its checks, and as many
  // reference runs again after a replaced worker lost the cache; its slowest timing is
  // min_repetitions launches), plus the timing budget, which the gate stops at by itself.
  // Timing on outlier inputs checks one more seed of each check problem: with two seeds or more
  // (outlier rows need them), its candidate and reference runs take at most all_ms more.
  const double launches_ms = (timing.outlier_inputs ? 3 : 2) * reference.all_ms +
                             timing.min_repetitions * reference.task_ms + kOverheadMs;
  const double deadline_ms = timing.warmup_ms + timing.max_total_ms + 2 * launches_ms;
  return std::max(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(deadline_ms))),
                  kMinimumGateDeadline);
}

std::chrono::milliseconds TaskDeadline(WorkerSupervisor& supervisor,
                                       const KernelTemplate& kernel_template,
                                       const Problem& problem, const TimingOptions& timing,
                                       std::chrono::milliseconds limit,
                                       ReferenceTiming* reference) {
  const WorkerVerdict answer =
      supervisor.Evaluate(MakeReferencePayload(kernel_template, problem), limit);
  if (answer.kind != VerdictKind::kOk) {
    throw Error("the reference kernel of " + kernel_template.manifest.name +
                " did not run on the task (" + std::string(ToString(answer.kind)) +
                "): " + answer.message);
  }
  ReferenceTiming measured;
  measured.task_ms = answer.result.at("task_ms").get<double>();
  measured.all_ms = answer.result.at("all_ms").get<double>();
  measured.runs = answer.result.at("runs").get<int>();
  if (reference != nullptr) *reference = measured;
  return GateDeadline(measured, timing);
}

GpuVerdict VerdictFromWorker(const WorkerVerdict& answer, std::chrono::milliseconds deadline) {
  GpuVerdict verdict;
  switch (answer.kind) {
    case VerdictKind::kOk:
      try {
        return GpuVerdictFromJson(answer.result);
      } catch (const std::exception& error) {
        verdict.status = Status::kRuntimeError;
        verdict.error = std::string("the worker's verdict is unreadable: ") + error.what();
        return verdict;
      }
    case VerdictKind::kCudaError:
      verdict.status = Status::kRuntimeError;
      verdict.error = answer.message;
      verdict.poisoned = answer.poisoned;
      return verdict;
    case VerdictKind::kTimeout:
      verdict.status = Status::kTimeout;
      verdict.error = "no verdict within the deadline of " + std::to_string(deadline.count()) +
                      " ms; the worker was killed";
      return verdict;
    case VerdictKind::kCrashed:
      verdict.status = Status::kRuntimeError;
      verdict.error = "the worker crashed: " + answer.message;
      return verdict;
    case VerdictKind::kGarbage:
      verdict.status = Status::kRuntimeError;
      verdict.error = "the worker answered garbage: " + answer.message;
      return verdict;
  }
  return verdict;
}

}  // namespace evo

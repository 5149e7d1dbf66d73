#pragma once

#include <chrono>
#include <filesystem>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "evaluator/gpu_gates.h"
#include "evaluator/worker_supervisor.h"
#include "kernel_templates/template_library.h"

namespace evo {

struct GpuWorkerOptions {
  std::filesystem::path executable;  // the evo binary; empty: this very process's binary
  int device = 0;
  std::vector<std::filesystem::path> template_folders;
  std::filesystem::path cache_dir;  // empty: no compile cache
};

// The worker process: owns one GPU's context and answers the supervisor's requests on
// `in`/`out` (evaluator/worker_protocol.h) until `in` closes. Returns the process's exit code.
int RunGpuWorker(const GpuWorkerOptions& options, std::istream& in, std::ostream& out);

// The GPUs named by `--gpus`: "all", or a comma-separated list of ordinals, each of a GPU that
// is here and named once. Throws evo::Error saying what is wrong.
std::vector<int> SelectGpus(const std::string& spec, int device_count);

// The list of `--gpus` as written, checked for form and repeats but not against the GPUs that
// are here; none for "all".
std::optional<std::vector<int>> ParseGpuList(const std::string& spec);

// The command that starts a worker: `evo worker ...`.
std::vector<std::string> GpuWorkerCommand(const GpuWorkerOptions& options);

// What the supervisor sends for one candidate.
nlohmann::json MakeEvaluatePayload(const KernelTemplate& kernel_template, const Genome& genome,
                                   const Problem& problem, const std::string& cubin,
                                   bool verify_only, const TimingOptions& timing);

// What the supervisor sends to have the worker run the reference kernel on every check problem
// and seed of a task, keep its outputs for the candidates to come, and say how long it took.
nlohmann::json MakeReferencePayload(const KernelTemplate& kernel_template, const Problem& problem);

// The default deadline of gates 2 and 3 for one candidate of a task, from its reference kernel's
// runs: the warm-up and the timing budget (the gate stops at it by itself), plus twice the
// launches of a candidate as fast as the reference (its checks, the reference's runs again after
// a worker was replaced, min_repetitions timed launches) and half a second for loading modules,
// and at least kMinimumGateDeadline. A kernel that hangs costs seconds, not minutes.
inline constexpr std::chrono::milliseconds kMinimumGateDeadline{3000};
std::chrono::milliseconds GateDeadline(const ReferenceTiming& reference,
                                       const TimingOptions& timing);

// Runs MakeReferencePayload on the supervisor's worker (with `limit` as its deadline) and
// returns GateDeadline of its answer. Throws evo::Error, saying why, when the reference kernel
// cannot run on the task.
std::chrono::milliseconds TaskDeadline(WorkerSupervisor& supervisor,
                                       const KernelTemplate& kernel_template,
                                       const Problem& problem, const TimingOptions& timing,
                                       std::chrono::milliseconds limit, ReferenceTiming* reference);

// The candidate's verdict from however the worker answered: figures when it did, else
// runtime_error (a CUDA error, a crash, garbage) or timeout, with what happened.
GpuVerdict VerdictFromWorker(const WorkerVerdict& answer, std::chrono::milliseconds deadline);

}  // namespace evo

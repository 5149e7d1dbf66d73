#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evo {

class Subprocess;

struct WorkerSupervisorOptions {
  // How long a fresh worker may take to answer its health check; creating a CUDA context can
  // take seconds on a busy machine.
  std::chrono::milliseconds health_timeout{30000};
  // Replacing a worker gives up with evo::Error after this many fresh workers in a row fail
  // their health check: the environment is broken, and retrying forever would hide it.
  int max_failed_starts = 3;
  // Pause between failed starts, so that a passing condition (the GPU still tearing down the
  // killed worker's context) can clear.
  std::chrono::milliseconds restart_delay{200};
  // After the worker closes its stdout, how long it has to exit (so that we can say how it
  // ended) before it is killed.
  std::chrono::milliseconds exit_grace{1000};
  // Workers' stderr is appended here; when empty they share evo's stderr.
  std::optional<std::filesystem::path> stderr_path;
};

enum class VerdictKind {
  kOk,         // the worker answered; `result` holds its result
  kCudaError,  // the worker reported a CUDA error; `message` holds it
  kTimeout,    // no reply by the deadline; the worker was killed
  kCrashed,    // the worker ended (or closed its output) before replying
  kGarbage,    // the reply was not a valid reply to this request; the worker was killed
};

// "ok", "cuda_error", "timeout", "crashed", "garbage".
std::string_view ToString(VerdictKind kind);

struct WorkerVerdict {
  VerdictKind kind = VerdictKind::kOk;
  nlohmann::json result;  // kOk only
  // Empty for kOk; otherwise the CUDA error text, how the worker died, the missed deadline, or
  // what was wrong with the reply and the first 200 characters of it.
  std::string message;
  bool poisoned = false;         // kCudaError: the worker's CUDA context was unusable
  bool worker_replaced = false;  // a fresh, healthy worker was started before returning
  // From sending the request to knowing the outcome.
  std::chrono::microseconds elapsed{0};
  // All of Evaluate, including replacing the worker.
  std::chrono::microseconds total{0};
};

// Runs one worker process (one per GPU) and turns every way it can misbehave into a verdict, so
// that a kernel which crashes, hangs or poisons its CUDA context never takes evo down. After any
// verdict the supervisor holds a healthy worker: one that has failed is killed, and a fresh one
// is started and health-checked before Evaluate returns. Every process gets its own pipes and
// request ids only grow, so a killed worker's late output can never pass for a later reply.
//
// Not thread-safe: one thread drives one supervisor.
class WorkerSupervisor {
 public:
  // Starts the worker and health-checks it; throws evo::Error (saying why) when it cannot be
  // started or fails that first health check.
  explicit WorkerSupervisor(std::vector<std::string> argv, WorkerSupervisorOptions options = {});
  WorkerSupervisor(const WorkerSupervisor&) = delete;
  WorkerSupervisor& operator=(const WorkerSupervisor&) = delete;
  ~WorkerSupervisor();  // kills the worker

  // Sends `payload` and waits for the reply until `deadline` has passed. Throws evo::Error only
  // when a failed worker cannot be replaced (max_failed_starts fresh workers in a row failed);
  // the next call then tries again from scratch.
  WorkerVerdict Evaluate(const nlohmann::json& payload, std::chrono::milliseconds deadline);

  uint64_t evaluations() const { return evaluations_; }
  // Workers started to replace a failed one, counting those that failed their health check.
  uint64_t respawns() const { return respawns_; }
  // The current worker's process id, -1 when there is none (after a failed replacement). A
  // worker that dies while idle is noticed, and replaced, at the next Evaluate.
  pid_t worker_pid() const;

 private:
  // Starts a worker and health-checks it; on failure, says why and leaves no worker.
  std::optional<std::string> StartWorker();
  // Kills the current worker, if any, and starts fresh ones until one is healthy; throws
  // evo::Error after max_failed_starts failures in a row.
  void ReplaceWorker();
  // How the current worker ended, once it has closed its `closed` ("input" or "output"); kills
  // it if it has not ended within exit_grace.
  std::string HowWorkerEnded(std::string_view closed);

  std::vector<std::string> argv_;
  WorkerSupervisorOptions options_;
  std::unique_ptr<Subprocess> worker_;
  uint64_t next_id_ = 1;
  uint64_t evaluations_ = 0;
  uint64_t respawns_ = 0;
};

}  // namespace evo

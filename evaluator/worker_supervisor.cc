#include "evaluator/worker_supervisor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "common/error.h"
#include "evaluator/subprocess.h"
#include "evaluator/worker_protocol.h"

namespace evo {
namespace {

using Clock = std::chrono::steady_clock;

// Never negative: a negative timeout means "wait forever" to Subprocess.
std::chrono::milliseconds Remaining(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds::zero());
}

std::chrono::microseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
}

std::string Milliseconds(std::chrono::microseconds duration) {
  return std::to_string((duration.count() + 500) / 1000) + " ms";
}

}  // namespace

std::string_view ToString(VerdictKind kind) {
  switch (kind) {
    case VerdictKind::kOk:
      return "ok";
    case VerdictKind::kCudaError:
      return "cuda_error";
    case VerdictKind::kTimeout:
      return "timeout";
    case VerdictKind::kCrashed:
      return "crashed";
    case VerdictKind::kGarbage:
      return "garbage";
  }
  return "unknown";
}

WorkerSupervisor::WorkerSupervisor(std::vector<std::string> argv, WorkerSupervisorOptions options)
    : argv_(std::move(argv)), options_(std::move(options)) {
  if (argv_.empty() || argv_[0].empty()) throw Error("the worker command line is empty");
  if (options_.max_failed_starts < 1) {
    throw Error("max_failed_starts must be at least 1, not " +
                std::to_string(options_.max_failed_starts));
  }
  if (std::optional<std::string> failure = StartWorker()) {
    throw Error("worker '" + argv_[0] + "' failed its first health check: " + *failure);
  }
}

// Out of line, where Subprocess is complete; its destructor kills and reaps the worker.
WorkerSupervisor::~WorkerSupervisor() = default;

pid_t WorkerSupervisor::worker_pid() const { return worker_ ? worker_->pid() : -1; }

std::string WorkerSupervisor::HowWorkerEnded(std::string_view closed) {
  if (std::optional<ExitStatus> status = worker_->WaitFor(options_.exit_grace)) {
    return status->Describe();
  }
  worker_->Kill();
  return "closed its " + std::string(closed) + " but kept running (killed after " +
         Milliseconds(options_.exit_grace) + ")";
}

std::optional<std::string> WorkerSupervisor::StartWorker() {
  worker_.reset();
  SubprocessOptions subprocess_options;
  subprocess_options.stderr_path = options_.stderr_path;
  try {
    worker_ = std::make_unique<Subprocess>(argv_, subprocess_options);
  } catch (const Error& error) {
    return error.what();
  }

  const uint64_t id = next_id_++;
  const auto deadline = Clock::now() + options_.health_timeout;
  std::string failure;
  const WriteStatus written = worker_->WriteLine(EncodeHealthRequest(id), Remaining(deadline));
  if (written == WriteStatus::kClosed) {
    // Whether it died before or after our write is a race; it never answered either way.
    failure = HowWorkerEnded("input") + " before answering the health check";
  } else if (written == WriteStatus::kTimeout) {
    failure = "did not read the health check within " + Milliseconds(options_.health_timeout);
  } else {
    const ReadResult read = worker_->ReadLine(Remaining(deadline));
    switch (read.status) {
      case ReadStatus::kTimeout:
        failure = "did not answer the health check within " + Milliseconds(options_.health_timeout);
        break;
      case ReadStatus::kEof:
        failure = HowWorkerEnded("output") + " before answering the health check";
        break;
      case ReadStatus::kTooLong:
        failure = "answered the health check with an overlong line: " + QuoteForMessage(read.text);
        break;
      case ReadStatus::kLine: {
        const Decoded<WorkerReply> reply = DecodeReply(read.text, id);
        if (!reply.ok()) {
          failure = "answered the health check with garbage (" + reply.problem +
                    "): " + QuoteForMessage(read.text);
        } else if (!reply.message->ok) {
          failure = "answered the health check with an error: " + reply.message->error;
        } else {
          return std::nullopt;
        }
        break;
      }
    }
  }
  worker_.reset();
  return failure;
}

void WorkerSupervisor::ReplaceWorker() {
  worker_.reset();
  std::string last_failure;
  for (int attempt = 1; attempt <= options_.max_failed_starts; ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(options_.restart_delay);
    ++respawns_;
    std::optional<std::string> failure = StartWorker();
    if (!failure) return;
    spdlog::warn("replacement worker '{}' failed its health check: {}", argv_[0], *failure);
    last_failure = std::move(*failure);
  }
  throw Error("worker '" + argv_[0] + "' failed its health check " +
              std::to_string(options_.max_failed_starts) +
              " times in a row after a restart; last: " + last_failure);
}

WorkerVerdict WorkerSupervisor::Evaluate(const nlohmann::json& payload,
                                         std::chrono::milliseconds deadline) {
  const auto start = Clock::now();
  // A worker that died while idle, or wrote a line no request asked for (which would pass for
  // the next reply and be blamed on this payload), is replaced before the request goes out.
  if (worker_) {
    const ReadResult unsolicited = worker_->ReadLine(std::chrono::milliseconds::zero());
    if (unsolicited.status == ReadStatus::kEof) {
      spdlog::warn("worker '{}' (pid {}) {} while idle; replacing it", argv_[0], worker_->pid(),
                   HowWorkerEnded("output"));
      worker_.reset();
    } else if (unsolicited.status != ReadStatus::kTimeout) {
      spdlog::warn("worker '{}' (pid {}) wrote a line no request asked for: {}; replacing it",
                   argv_[0], worker_->pid(), QuoteForMessage(unsolicited.text));
      worker_.reset();
    }
  }
  if (!worker_) ReplaceWorker();
  ++evaluations_;

  const uint64_t id = next_id_++;
  const auto sent = Clock::now();
  const auto deadline_at = sent + deadline;
  WorkerVerdict verdict;
  bool replace = true;
  const auto timed_out = [&] {
    verdict.kind = VerdictKind::kTimeout;
    verdict.message = "no reply within " + Milliseconds(deadline) + " (waited " +
                      Milliseconds(verdict.elapsed) + "); worker killed";
  };

  const WriteStatus written =
      worker_->WriteLine(EncodeEvaluateRequest(id, payload), Remaining(deadline_at));
  // Measured when the outcome shows, before any wait for a dying worker's exit status.
  verdict.elapsed = Since(sent);
  if (written == WriteStatus::kTimeout) {
    timed_out();
  } else if (written == WriteStatus::kClosed) {
    verdict.kind = VerdictKind::kCrashed;
    verdict.message = "worker " + HowWorkerEnded("input") + " before replying";
  } else {
    ReadResult read = worker_->ReadLine(Remaining(deadline_at));
    verdict.elapsed = Since(sent);
    switch (read.status) {
      case ReadStatus::kTimeout:
        timed_out();
        break;
      case ReadStatus::kEof:
        verdict.kind = VerdictKind::kCrashed;
        verdict.message = "worker " + HowWorkerEnded("output") + " before replying";
        if (!read.text.empty()) {
          verdict.message += " (after an unterminated line: " + QuoteForMessage(read.text) + ")";
        }
        break;
      case ReadStatus::kTooLong:
        verdict.kind = VerdictKind::kGarbage;
        verdict.message = "reply line too long: " + QuoteForMessage(read.text);
        break;
      case ReadStatus::kLine: {
        Decoded<WorkerReply> reply = DecodeReply(read.text, id);
        if (!reply.ok()) {
          verdict.kind = VerdictKind::kGarbage;
          verdict.message = "garbage reply (" + reply.problem + "): " + QuoteForMessage(read.text);
        } else if (reply.message->ok) {
          verdict.kind = VerdictKind::kOk;
          verdict.result = std::move(reply.message->result);
          replace = false;
        } else {
          verdict.kind = VerdictKind::kCudaError;
          verdict.message = std::move(reply.message->error);
          verdict.poisoned = reply.message->poisoned;
          replace = verdict.poisoned;
        }
        break;
      }
    }
  }

  if (replace) {
    // Routine in a search (candidates do crash and hang), so not a warning.
    spdlog::debug("worker '{}' (pid {}): {}: {}; replacing it", argv_[0], worker_->pid(),
                  ToString(verdict.kind), verdict.message);
    ReplaceWorker();
    verdict.worker_replaced = true;
  }
  verdict.total = Since(start);
  return verdict;
}

}  // namespace evo

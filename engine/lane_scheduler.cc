#include "engine/lane_scheduler.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace evo {
namespace {

// A candidate of the batch on its way: queued, on a lane (first measurement), measured and
// waiting for the candidates before it, its confirmation asked for or running, confirmed, done.
enum class Stage { kQueued, kMeasuring, kMeasured, kConfirmAsked, kConfirming, kConfirmed, kDone };

struct Slot {
  Stage stage = Stage::kQueued;
  int lane = -1;
  CandidateOutcome outcome;
  std::optional<GpuVerdict> confirmation;
};

// A candidate given up on after this many GPUs were lost while measuring it.
constexpr size_t kMaxLaneFailures = 2;

// One Run: the state every lane thread shares, under one lock.
class Batch {
 public:
  Batch(CandidateEvaluator& evaluator, const std::vector<Genome>& genomes, const LaneHooks& hooks,
        std::map<int, std::string>& retired,
        std::map<Genome, std::vector<std::string>>& lane_failures)
      : evaluator_(evaluator),
        genomes_(genomes),
        hooks_(hooks),
        retired_(retired),
        lane_failures_(lane_failures),
        slots_(genomes.size()) {}

  void Drive(int lane);
  std::exception_ptr fatal() const { return fatal_; }

 private:
  std::optional<size_t> Pick() const;
  // Whether `lane` has measured a candidate that may still need its confirmation: one waiting
  // for the candidates before it, all of which can still finish.
  bool Owes(int lane) const;
  // Finishes what can be finished, in order, asking for a confirmation where the hook wants one.
  void Advance();
  void Retire(int lane, const std::string& why, std::optional<size_t> running);
  void Fail(std::exception_ptr error);

  CandidateEvaluator& evaluator_;
  const std::vector<Genome>& genomes_;
  const LaneHooks& hooks_;
  std::map<int, std::string>& retired_;
  std::map<Genome, std::vector<std::string>>& lane_failures_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Slot> slots_;
  size_t head_ = 0;  // the next candidate to finish
  bool stopping_ = false;
  std::exception_ptr fatal_;
};

std::optional<size_t> Batch::Pick() const {
  std::optional<size_t> first;
  for (size_t i = head_; i < slots_.size(); ++i) {
    if (slots_[i].stage != Stage::kQueued) continue;
    if (evaluator_.ReadyToMeasure(genomes_[i])) return i;
    if (!first) first = i;
  }
  return first;
}

bool Batch::Owes(int lane) const {
  for (size_t i = head_; i < slots_.size(); ++i) {
    if (slots_[i].stage == Stage::kQueued) return false;  // nothing after it can finish now
    if (slots_[i].lane == lane && slots_[i].stage == Stage::kMeasured) return true;
  }
  return false;
}

void Batch::Advance() {
  while (head_ < slots_.size()) {
    Slot& slot = slots_[head_];
    if (slot.stage == Stage::kMeasured) {
      if (hooks_.needs_confirmation(head_, slot.outcome)) {
        slot.stage = Stage::kConfirmAsked;
        return;
      }
    } else if (slot.stage != Stage::kConfirmed) {
      return;
    }
    hooks_.finish(head_, std::move(slot.outcome), std::move(slot.confirmation), slot.lane);
    slot.stage = Stage::kDone;
    ++head_;
  }
}

void Batch::Fail(std::exception_ptr error) {
  if (!fatal_) fatal_ = error;
}

void Batch::Retire(int lane, const std::string& why, std::optional<size_t> running) {
  retired_[lane] = why;
  for (size_t i = head_; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.lane != lane || slot.stage == Stage::kDone || slot.stage == Stage::kQueued) continue;
    if (running && i == *running) {
      std::vector<std::string>& failures = lane_failures_[genomes_[i]];
      failures.push_back(why);
      if (failures.size() >= kMaxLaneFailures) {
        CandidateOutcome given_up;
        given_up.status = Status::kRuntimeError;
        given_up.reason = "lost the GPUs that measured it (" + failures[0] + "; " + failures[1] +
                          "); not sent to another";
        slot.outcome = std::move(given_up);
        slot.confirmation.reset();
        slot.stage = Stage::kMeasured;
        continue;
      }
    }
    // Measured again from scratch elsewhere: a confirmation must come from the GPU that measured.
    slot = Slot();
  }
  if (retired_.size() == evaluator_.lanes().size()) {
    Fail(std::make_exception_ptr(
        Error(retired_.size() == 1 ? why : "every GPU of the run was lost; the last: " + why)));
  }
}

void Batch::Drive(int lane) {
  std::unique_lock lock(mutex_);
  const auto settle = [&] {
    try {
      Advance();
    } catch (...) {
      Fail(std::current_exception());
    }
    changed_.notify_all();
  };
  for (;;) {
    if (fatal_ || head_ == slots_.size()) return;

    // A confirmation asked of this lane comes first: the candidates after it wait for it.
    if (slots_[head_].stage == Stage::kConfirmAsked && slots_[head_].lane == lane) {
      const size_t index = head_;
      slots_[index].stage = Stage::kConfirming;
      lock.unlock();
      try {
        GpuVerdict verdict = evaluator_.Remeasure(lane, genomes_[index]);
        lock.lock();
        slots_[index].confirmation = std::move(verdict);
        slots_[index].stage = Stage::kConfirmed;
      } catch (const LaneError& error) {
        lock.lock();
        Retire(lane, error.what(), index);
        settle();
        return;
      } catch (...) {
        lock.lock();
        Fail(std::current_exception());
        changed_.notify_all();
        return;
      }
      settle();
      continue;
    }

    if (!stopping_ && hooks_.should_stop()) {
      stopping_ = true;
      changed_.notify_all();
    }
    const std::optional<size_t> next = stopping_ ? std::nullopt : Pick();
    if (next) {
      const size_t index = *next;
      slots_[index].stage = Stage::kMeasuring;
      slots_[index].lane = lane;
      lock.unlock();
      try {
        CandidateOutcome outcome = evaluator_.Evaluate(lane, genomes_[index]);
        lock.lock();
        slots_[index].outcome = std::move(outcome);
        slots_[index].stage = Stage::kMeasured;
      } catch (const LaneError& error) {
        lock.lock();
        Retire(lane, error.what(), index);
        settle();
        return;
      } catch (...) {
        lock.lock();
        Fail(std::current_exception());
        changed_.notify_all();
        return;
      }
      settle();
      continue;
    }

    // Nothing to take. Stopping, a lane stays only for the confirmations it may owe; otherwise
    // until the batch is done, since a lost GPU's candidates may come back.
    if (stopping_ && !Owes(lane)) return;
    changed_.wait(lock);
  }
}

}  // namespace

LaneScheduler::LaneScheduler(CandidateEvaluator& evaluator) : evaluator_(evaluator) {}

void LaneScheduler::Run(const std::vector<Genome>& genomes, const LaneHooks& hooks) {
  if (genomes.empty()) return;
  const int lanes = static_cast<int>(evaluator_.lanes().size());
  if (static_cast<int>(retired_.size()) >= lanes) throw Error("no GPU is left to measure on");
  Batch batch(evaluator_, genomes, hooks, retired_, lane_failures_);
  std::vector<std::thread> threads;
  for (int lane = 0; lane < lanes; ++lane) {
    if (retired_.count(lane) == 0) threads.emplace_back([&batch, lane] { batch.Drive(lane); });
  }
  for (std::thread& thread : threads) thread.join();
  if (batch.fatal()) std::rethrow_exception(batch.fatal());
}

}  // namespace evo

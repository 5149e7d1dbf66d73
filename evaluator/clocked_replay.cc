#include "evaluator/clocked_replay.h"

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace evo {

ClockedReplay::ClockedReplay(std::unique_ptr<ReplayEvaluator> replay, int compile_jobs,
                             const std::filesystem::path& log)
    : replay_(std::move(replay)), identity_(replay_->identity()), clock_(compile_jobs) {
  // Several GPUs would take candidates in an order the threads decide, not the clock.
  if (replay_->lanes().size() != 1) throw Error("the replay clock simulates one GPU, not several");
  log_.open(log, std::ios::trunc);
  if (!log_) throw Error("cannot write the replay clock's log '" + log.string() + "'");
  identity_.notice += "; the time a GPU pipeline with " + std::to_string(compile_jobs) +
                      " compile threads would take is simulated from the recorded compile and "
                      "GPU times, into " +
                      log.string();
}

PipelineClock::Compiles ClockedReplay::CompileTimes(const std::vector<Genome>& genomes) const {
  PipelineClock::Compiles compiles;
  for (const Genome& genome : genomes) {
    compiles.emplace_back(genome, replay_->Find(genome).outcome.compile_ms / 1000);
  }
  return compiles;
}

void ClockedReplay::Prefetch(const std::vector<Genome>& genomes) {
  const PipelineClock::Compiles compiles = CompileTimes(genomes);
  std::lock_guard lock(mutex_);
  clock_.Prefetch(compiles);
}

void ClockedReplay::Speculate(const std::vector<Genome>& genomes) {
  const PipelineClock::Compiles compiles = CompileTimes(genomes);
  std::lock_guard lock(mutex_);
  clock_.Speculate(compiles);
}

bool ClockedReplay::ReadyToMeasure(const Genome& genome) const {
  std::lock_guard lock(mutex_);
  return clock_.Ready(genome);
}

CandidateOutcome ClockedReplay::Evaluate(int lane, const Genome& genome) {
  CandidateOutcome outcome = replay_->Evaluate(lane, genome);
  std::lock_guard lock(mutex_);
  const double seconds =
      clock_.Measure(genome, outcome.compile_ms / 1000, outcome.gpu ? outcome.gpu_ms / 1000 : 0);
  const nlohmann::json line = {
      {"genome", genome}, {"seconds", seconds}, {"speculated", clock_.Speculated(genome)}};
  log_ << line.dump() << "\n" << std::flush;
  if (!log_) throw Error("cannot write the replay clock's log");
  return outcome;
}

GpuVerdict ClockedReplay::Remeasure(int lane, const Genome& genome) {
  GpuVerdict verdict = replay_->Remeasure(lane, genome);
  // A confirmation is not timed in the recording: it takes as long as the first measurement.
  const double seconds = replay_->Find(genome).outcome.gpu_ms / 1000;
  std::lock_guard lock(mutex_);
  clock_.Remeasure(seconds);
  return verdict;
}

}  // namespace evo

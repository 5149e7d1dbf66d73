#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "evaluator/pipeline_clock.h"
#include "evaluator/recording.h"

namespace evo {

// A replay that also keeps the time the search would have taken on the GPU pipeline
// (evaluator/pipeline_clock: the recording's compile and GPU times, `compile_jobs` compile
// threads, one GPU), and writes it down: one JSON line per evaluated configuration, in the order
// the GPU measured them, {"genome": ..., "seconds": when its measurement ended, "speculated":
// whether Speculate had started its compile}. The outcomes are the replay's own.
class ClockedReplay final : public CandidateEvaluator {
 public:
  // Throws evo::Error when the replay simulates several GPUs or the log cannot be written.
  ClockedReplay(std::unique_ptr<ReplayEvaluator> replay, int compile_jobs,
                const std::filesystem::path& log);

  const EvaluatorIdentity& identity() const override { return identity_; }
  const std::vector<GpuIdentity>& lanes() const override { return replay_->lanes(); }
  void Prefetch(const std::vector<Genome>& genomes) override;
  void Speculate(const std::vector<Genome>& genomes) override;
  bool ReadyToMeasure(const Genome& genome) const override;
  CandidateOutcome Evaluate(int lane, const Genome& genome) override;
  GpuVerdict Remeasure(int lane, const Genome& genome) override;
  std::string RetimingUnavailable() const override { return replay_->RetimingUnavailable(); }

 private:
  PipelineClock::Compiles CompileTimes(const std::vector<Genome>& genomes) const;

  std::unique_ptr<ReplayEvaluator> replay_;
  EvaluatorIdentity identity_;
  mutable std::mutex mutex_;
  PipelineClock clock_;
  std::ofstream log_;
};

}  // namespace evo

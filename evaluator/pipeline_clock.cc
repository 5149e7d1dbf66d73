#include "evaluator/pipeline_clock.h"

#include <algorithm>

#include "common/error.h"

namespace evo {

PipelineClock::PipelineClock(int compile_jobs) {
  if (compile_jobs < 1) throw Error("a simulated pipeline needs at least one compile thread");
  thread_compiles_.resize(static_cast<size_t>(compile_jobs));
}

double PipelineClock::FreeAt(size_t thread) const {
  const std::vector<Genome>& list = thread_compiles_[thread];
  return list.empty() ? 0.0 : compiles_.at(list.back()).end;
}

void PipelineClock::Schedule(const Genome& genome, double seconds, bool speculative,
                             double earliest) {
  // The thread that is free first takes it (the lowest-numbered of equals).
  size_t thread = 0;
  for (size_t t = 1; t < thread_compiles_.size(); ++t) {
    if (FreeAt(t) < FreeAt(thread)) thread = t;
  }
  Compile compile;
  compile.start = std::max(earliest, FreeAt(thread));
  compile.end = compile.start + seconds;
  compile.speculative = speculative;
  thread_compiles_[thread].push_back(genome);
  compiles_[genome] = compile;
}

void PipelineClock::Prefetch(const Compiles& compiles) {
  planned_at_ = gpu_free_;
  // Speculated compiles that no thread has started by now are dropped; each thread's compiles
  // start in order, so those are at the end of its list.
  for (std::vector<Genome>& list : thread_compiles_) {
    while (!list.empty()) {
      const Compile& last = compiles_.at(list.back());
      if (!last.speculative || last.start <= gpu_free_) break;
      compiles_.erase(list.back());
      list.pop_back();
    }
  }
  for (const auto& [genome, seconds] : compiles) {
    if (compiles_.count(genome) == 0) Schedule(genome, seconds, false, planned_at_);
  }
}

void PipelineClock::Speculate(const Compiles& compiles) {
  for (const auto& [genome, seconds] : compiles) {
    if (compiles_.count(genome) == 0) Schedule(genome, seconds, true, planned_at_);
  }
}

bool PipelineClock::Speculated(const Genome& genome) const {
  const auto found = compiles_.find(genome);
  return found != compiles_.end() && found->second.speculative;
}

bool PipelineClock::Ready(const Genome& genome) const {
  const auto found = compiles_.find(genome);
  return found != compiles_.end() && found->second.end <= gpu_free_;
}

double PipelineClock::Measure(const Genome& genome, double compile_seconds, double gpu_seconds) {
  if (compiles_.count(genome) == 0) Schedule(genome, compile_seconds, false, gpu_free_);
  gpu_free_ = std::max(gpu_free_, compiles_.at(genome).end) + gpu_seconds;
  return gpu_free_;
}

double PipelineClock::Remeasure(double gpu_seconds) {
  gpu_free_ += gpu_seconds;
  return gpu_free_;
}

}  // namespace evo

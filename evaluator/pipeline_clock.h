#pragma once

#include <map>
#include <vector>

#include "kernel_templates/genome.h"

namespace evo {

// The wall time GpuPipeline would take to answer a search on one GPU, simulated from each
// configuration's recorded compile and GPU times, so that a replay can say how long a search
// would have taken and not only how many candidates it needed. The model is GpuPipeline's:
// `compile_jobs` compile threads take what Prefetch asks for, in order, before what Speculate
// asks for; a Prefetch drops the speculated compiles not started by then; the GPU measures one
// configuration at a time, each once its compile has ended. A search plans its next generation
// when the GPU has finished the last one (Prefetch happens at that moment, and Speculate, which
// the search plans beside the measurements, counts from it too), and its planning takes no time
// here. Times are in seconds from the start of the search.
class PipelineClock {
 public:
  explicit PipelineClock(int compile_jobs);

  // (configuration, its compile seconds) in the order the search will take them.
  using Compiles = std::vector<std::pair<Genome, double>>;
  void Prefetch(const Compiles& compiles);
  void Speculate(const Compiles& compiles);
  // Whether the configuration's compile has ended by the time the GPU is free.
  bool Ready(const Genome& genome) const;
  // The GPU measures `genome` for `gpu_seconds` (0: its compile failed) once its compile has
  // ended (started now, when nothing asked for it before); returns when it is done.
  double Measure(const Genome& genome, double compile_seconds, double gpu_seconds);
  // The GPU measures a configuration again (its cubin is kept): returns when it is done.
  double Remeasure(double gpu_seconds);

  // Whether the configuration's compile was started by Speculate (and not dropped).
  bool Speculated(const Genome& genome) const;

 private:
  struct Compile {
    double start = 0;
    double end = 0;
    bool speculative = false;
  };
  // When the thread has ended the compiles it was given.
  double FreeAt(size_t thread) const;
  // Compiled from `earliest` on, by the thread free first.
  void Schedule(const Genome& genome, double seconds, bool speculative, double earliest);

  // Each thread's compiles in the order they start.
  std::vector<std::vector<Genome>> thread_compiles_;
  std::map<Genome, Compile> compiles_;
  double gpu_free_ = 0;
  double planned_at_ = 0;  // the last Prefetch
};

}  // namespace evo

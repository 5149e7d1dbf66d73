#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "evaluator/compiler.h"
#include "evaluator/cuda_driver.h"
#include "evaluator/device_kernels.h"
#include "kernel_templates/configuration.h"

namespace evo {

// Gate 2: the worst figures over every check problem, seed and output.
struct CorrectnessFigures {
  bool passed = false;
  int checks = 0;  // (problem, seed) pairs run
  ComparisonStats worst;
  std::string failure;  // which problem, seed and output failed first, when one did
  Tolerance tolerance;  // the one the manifest gives this candidate on the task's problem
};

// Gate 3: device time per call, from CUDA events around batches of back-to-back launches that
// follow a sustained warm-up without a pause, so the GPU runs at the clocks of sustained use.
struct TimingFigures {
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  double min_us = 0;
  int repetitions = 0;
  int launches_per_repetition = 0;
  bool settled = false;  // the p10..p90 spread fell under the target before the cap
  bool l2_flushed = false;
  double tflops = 0;            // at the median; 0 when the manifest has no flops formula
  double gbps = 0;              // at the median (1e9 bytes/s); 0 when the manifest has no bytes
  bool recheck_passed = false;  // the output after timing still matches the reference
  double sm_clock_mhz = 0;      // measured right after the timed launches; 0 in older records
  // The SM clock averaged over the timed launches: every SM's cycles over the global timer
  // between stamps right before the first timed batch and right after the last. 0 in older
  // records and where no SM was stamped twice.
  double mean_sm_clock_mhz = 0;

  // SM cycles per call at the median: the median time at the mean clock. Unlike the time, it
  // does not move with the clock the GPU's state sets from one timing to the next; but the clock
  // a kernel's own power draw sets is part of its time, so evo ranks by time; cycles choose what
  // to time again side by side, and order the elite where those timings cannot tell time apart
  // (EliteBySideBySide). Absent without a mean clock.
  std::optional<double> median_cycles() const {
    if (mean_sm_clock_mhz <= 0) return std::nullopt;
    return median_us * mean_sm_clock_mhz;
  }
};

struct TimingOptions {
  // Back-to-back launches before the measured ones, which follow without a pause: a GPU that
  // idles between short measurements runs faster than it does under sustained load.
  double warmup_ms = 100;
  int min_repetitions = 10;
  int max_repetitions = 200;
  double max_total_ms = 2000;
  double target_spread = 0.03;        // (p90 - p10) / median
  double target_repetition_us = 200;  // launches are batched up to about this long
  bool flush_l2 = false;
  // Time on inputs with the manifest's outlier rows (`--time-on-outliers`), for kernels whose
  // speed depends on the data (sdpa_hopper's LAGGED_MAX): the correctness gate checks one more
  // seed after its plain last one, drawn with the outlier rows, and the timed calls read it.
  bool outlier_inputs = false;
};

// The reference kernel's runs for one task: on the task's problem (the last check problem), and
// over every check problem and seed.
struct ReferenceTiming {
  double task_ms = 0;  // one run on the task's problem
  double all_ms = 0;   // every run of the correctness gate together
  int runs = 0;
};

struct GpuVerdict {
  Status status = Status::kMeasured;  // kMeasured, kIncorrect or kRuntimeError
  std::string error;
  bool poisoned = false;  // the CUDA error left the context unusable
  CorrectnessFigures correctness;
  std::optional<TimingFigures> timing;
};

// The problems the correctness gate checks a task on: each of the manifest's check problems
// (correctness.problems: its overrides applied to the task's problem; a parameter whose default
// follows others, as H_kv follows H, follows them here too unless the override sets it), then
// the task's problem itself, last, so that its buffers are the ones timed. Throws evo::Error
// naming the manifest's check problem where it gives a problem the template refuses.
std::vector<Problem> CheckProblems(const Manifest& manifest, const Problem& task);

// Runs gates 2 and 3 for compiled candidates on one GPU, in this process. The worker process
// wraps it so that a candidate that poisons the context costs only the worker.
class GpuGates {
 public:
  GpuGates(int device_ordinal, Compiler& compiler);
  ~GpuGates();

  const DeviceInfo& device() const { return device_; }

  // Runs the reference kernel on every check problem and seed of the task and keeps its outputs
  // for the candidates to come (this worker's reference cache), timing each run. Throws
  // CudaError or evo::Error when the reference cannot run.
  ReferenceTiming PrepareReference(const KernelTemplate& kernel_template, const Problem& problem);

  // `verify_only` skips gate 3. CUDA errors become a kRuntimeError verdict; bad input throws.
  GpuVerdict Evaluate(const KernelTemplate& kernel_template, const Genome& genome,
                      const Problem& problem, const std::string& cubin, bool verify_only,
                      const TimingOptions& timing);

  // The health check of a fresh worker: the template's reference kernel runs on its default
  // problem and writes finite values everywhere. Throws CudaError or evo::Error when it cannot.
  void HealthCheck(const KernelTemplate& kernel_template);

 private:
  struct State;
  struct Call;
  class Reference;
  // Gate 3's measurement of whole calls (figures but the throughputs and the recheck).
  TimingFigures TimeLaunches(Call& call, const TimingOptions& options);

  DeviceInfo device_;
  Compiler& compiler_;
  std::unique_ptr<State> state_;
};

}  // namespace evo

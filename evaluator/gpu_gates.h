#pragma once

#include <memory>
#include <optional>
#include <string>

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

// Gate 3: device time per call, from CUDA events around batches of back-to-back launches.
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
  bool recheck_passed = false;  // the output after timing still matches the reference
};

struct TimingOptions {
  double warmup_ms = 30;
  int min_repetitions = 10;
  int max_repetitions = 200;
  double max_total_ms = 2000;
  double target_spread = 0.03;        // (p90 - p10) / median
  double target_repetition_us = 200;  // launches are batched up to about this long
  bool flush_l2 = false;
};

struct GpuVerdict {
  Status status = Status::kMeasured;  // kMeasured, kIncorrect or kRuntimeError
  std::string error;
  bool poisoned = false;  // the CUDA error left the context unusable
  CorrectnessFigures correctness;
  std::optional<TimingFigures> timing;
};

// Runs gates 2 and 3 for compiled candidates on one GPU, in this process. The worker process
// wraps it so that a candidate that poisons the context costs only the worker.
class GpuGates {
 public:
  GpuGates(int device_ordinal, Compiler& compiler);
  ~GpuGates();

  const DeviceInfo& device() const { return device_; }

  // `verify_only` skips gate 3. CUDA errors become a kRuntimeError verdict; bad input throws.
  GpuVerdict Evaluate(const KernelTemplate& kernel_template, const Genome& genome,
                      const Problem& problem, const std::string& cubin, bool verify_only,
                      const TimingOptions& timing);

  // The health check of a fresh worker: the template's reference kernel runs on its default
  // problem and writes finite values everywhere. Throws CudaError or evo::Error when it cannot.
  void HealthCheck(const KernelTemplate& kernel_template);

 private:
  struct State;
  DeviceInfo device_;
  Compiler& compiler_;
  std::unique_ptr<State> state_;
};

}  // namespace evo

#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"
#include "evaluator/gpu_gates.h"
#include "evaluator/ptxas_report.h"

namespace evo {

// Everything the gates found out about one candidate: its one status, why, and every figure
// gathered on the way (a candidate rejected by gate 2 still has its compile figures).
struct CandidateOutcome {
  Status status = Status::kInvalid;
  std::string reason;  // one line for every status but kMeasured

  // Gate 1.
  std::optional<KernelResources> resources;  // set once ptxas reported
  int64_t threads_per_block = 0;
  int64_t dynamic_smem = 0;
  double compile_ms = 0;  // NVRTC's own time, also when served from the compile cache
  bool compile_cached = false;
  std::string compile_log;  // NVRTC's log (the ptxas report, warnings, errors), capped at 16 KiB

  // Gates 2 and 3: set once the candidate reached the GPU.
  std::optional<GpuVerdict> gpu;
  double gpu_ms = 0;  // wall time the worker spent on it

  const TimingFigures* timing() const { return gpu && gpu->timing ? &*gpu->timing : nullptr; }
  // True for every status past the constraint check: the budget counts these.
  bool reached_gates() const { return status != Status::kInvalid; }
};

nlohmann::json KernelResourcesToJson(const KernelResources& resources);
KernelResources KernelResourcesFromJson(const nlohmann::json& json);

nlohmann::json TimingFiguresToJson(const TimingFigures& timing);
TimingFigures TimingFiguresFromJson(const nlohmann::json& json);

// Round-trips every field; throws nlohmann::json::exception or evo::Error on a malformed one.
nlohmann::json CandidateOutcomeToJson(const CandidateOutcome& outcome);
CandidateOutcome CandidateOutcomeFromJson(const nlohmann::json& json);

}  // namespace evo

#pragma once

#include <nlohmann/json.hpp>

#include "evaluator/gpu_gates.h"

namespace evo {

// A GpuVerdict as it crosses from the worker to evo, and as `--json` prints it. A non-finite
// max_abs_error is written as null, since JSON has no infinity.
nlohmann::json GpuVerdictToJson(const GpuVerdict& verdict);
// Throws nlohmann::json::exception or evo::Error when `json` is not a verdict.
GpuVerdict GpuVerdictFromJson(const nlohmann::json& json);

}  // namespace evo

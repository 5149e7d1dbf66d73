#pragma once

#include <optional>
#include <string_view>

namespace evo {

// The one outcome of a candidate, stored in the database by its name.
enum class Status {
  kInvalid,         // broke a named constraint of the manifest; never compiled
  kCompileError,    // NVRTC or ptxas refused the source
  kResourceReject,  // compiled, but registers, shared memory or spills are over the limits
  kCompiled,        // passed the compile gate; not yet evaluated on a GPU
  kRuntimeError,    // a CUDA error while running
  kTimeout,         // missed its deadline
  kIncorrect,       // output outside the tolerance
  kSlow,            // measured, rejected by the performance gate
  kMeasured,        // passed every gate
};

// Ran on a GPU and passed the correctness gate: measured, or slow (timed, and rejected only for
// its speed).
constexpr bool PassedCorrectness(Status status) {
  return status == Status::kMeasured || status == Status::kSlow;
}

std::string_view ToString(Status status);
std::optional<Status> StatusFromString(std::string_view name);

}  // namespace evo

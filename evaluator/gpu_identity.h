#pragma once

#include <string>

namespace evo {

// The GPU that measured a candidate. A run may measure on several GPUs of one model, so each
// candidate keeps its own: where a figure looks odd, the GPU it came from is known.
struct GpuIdentity {
  int ordinal = 0;   // the CUDA device ordinal; for a replay, the simulated GPU's number
  std::string name;  // the model, e.g. "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-8c2a...", as nvidia-smi prints it; empty where unknown (a replay)

  bool operator==(const GpuIdentity&) const = default;
};

}  // namespace evo

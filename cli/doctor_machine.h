#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/doctor_findings.h"
#include "kernel_templates/template_library.h"

namespace evo::cli {

struct MachineCheckOptions {
  // Null when the templates did not load; `library_error` then says why.
  const TemplateLibrary* library = nullptr;
  std::string library_error;
  std::filesystem::path cache_dir = "runs/cache";
  std::filesystem::path runs_dir = "runs";
};

// What the machine checks found, and what they mean for the summary.
struct MachineCheck {
  std::vector<Finding> findings;
  bool compiles = false;  // NVRTC compiled a probe for an arch evo supports
  int usable_gpus = 0;    // GPUs that ran a probe kernel
  int gpus = 0;           // GPUs the driver reports
  bool have_driver = false;
};

// NVRTC (version, archs, probe compiles), SQLite, the templates, the driver and each GPU (a
// probe kernel compiled, loaded and run), which templates can run on which GPU (the
// arch-specific Hopper ones among them), the compile cache and the free space under runs/.
// Reads only: nothing is created or written.
MachineCheck CheckMachine(const MachineCheckOptions& options);

}  // namespace evo::cli

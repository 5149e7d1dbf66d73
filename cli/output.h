#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "evaluator/compile_gate.h"
#include "evaluator/gpu_gates.h"
#include "kernel_templates/template_library.h"

namespace evo::cli {

// Where a compile's arch came from, for the report.
struct ArchOrigin {
  std::string name;
  std::string device;  // empty when given on the command line
};

nlohmann::json TemplateToJson(const KernelTemplate& kernel_template);
std::string TemplateToText(const KernelTemplate& kernel_template);

struct CompileReport {
  const KernelTemplate& kernel_template;
  const Genome& genome;
  const Problem& problem;
  const ArchOrigin& arch;
  const CompileOutcome& outcome;
  bool show_log = false;
  const CompileOutcome* reference = nullptr;  // the reference kernel's, where it was compiled
};

nlohmann::json CompileReportToJson(const CompileReport& report);
std::string CompileReportToText(const CompileReport& report);

// Gates 2 and 3: the status, every correctness figure and every timing figure.
std::string VerdictToText(const GpuVerdict& verdict);

}  // namespace evo::cli

#include "cli/output.h"

#include <fmt/format.h>

#include <cmath>

#include "cli/command_support.h"
#include "evaluator/gpu_verdict_json.h"
#include "kernel_templates/configuration.h"

namespace evo::cli {
namespace {

using Json = nlohmann::json;

std::string Values(const std::vector<int64_t>& values, int64_t default_value) {
  std::string text;
  for (int64_t v : values) {
    if (!text.empty()) text += " ";
    text += v == default_value ? fmt::format("[{}]", v) : std::to_string(v);
  }
  return text;
}

std::string Kib(int64_t bytes) {
  return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
}

}  // namespace

Json TemplateToJson(const KernelTemplate& kernel_template) {
  const Manifest& manifest = kernel_template.manifest;
  Json knobs = Json::array();
  for (const KnobSpec& knob : manifest.knobs) {
    knobs.push_back({{"name", knob.name},
                     {"values", knob.values},
                     {"default", knob.default_value},
                     {"doc", knob.doc}});
  }
  Json problem = Json::array();
  for (const ProblemParamSpec& param : manifest.problem) {
    Json entry = {{"name", param.name}, {"default", param.default_value}, {"doc", param.doc}};
    if (param.values.empty()) {
      entry["min"] = param.min;
    } else {
      entry["values"] = param.values;
    }
    if (param.compile_time()) entry["define"] = param.define;
    if (param.default_expr) entry["default_expr"] = param.default_expr->text();
    if (param.check) {
      entry["check"] = param.check->text();
      entry["check_doc"] = param.check_doc;
    }
    problem.push_back(entry);
  }
  Json constraints = Json::array();
  for (const ConstraintSpec& constraint : manifest.constraints) {
    constraints.push_back(
        {{"name", constraint.name}, {"expr", constraint.expr.text()}, {"doc", constraint.doc}});
  }
  Json entries = Json::array();
  for (const KernelSpec& kernel : manifest.kernels) entries.push_back(kernel.entry);
  Json json = {{"name", manifest.name},
               {"version", manifest.version},
               {"description", manifest.description},
               {"origin", kernel_template.origin},
               {"source_hash", kernel_template.source_hash},
               {"min_sm", manifest.min_sm},
               {"max_sm", manifest.max_sm},
               {"arch_specific", manifest.arch_specific},
               {"knobs", knobs},
               {"problem", problem},
               {"constraints", constraints},
               {"entry", manifest.main_kernel().entry},
               {"entries", entries},
               {"reference_entry", manifest.reference.entry}};
  if (manifest.bytes) json["bytes"] = manifest.bytes->text();
  return json;
}

std::string TemplateToText(const KernelTemplate& kernel_template) {
  const Manifest& manifest = kernel_template.manifest;
  std::string arches = fmt::format("sm_{}", manifest.min_sm);
  if (manifest.max_sm == 0) {
    arches += "+";
  } else if (manifest.max_sm != manifest.min_sm) {
    arches += fmt::format("..sm_{}", manifest.max_sm);
  }
  if (manifest.arch_specific) arches += " (compiled for the \"a\" variant)";
  std::string text =
      fmt::format("{}  v{}  {}  {}  source {}\n", manifest.name, manifest.version,
                  kernel_template.origin, arches, kernel_template.source_hash.substr(0, 12));
  if (!manifest.description.empty()) text += "  " + manifest.description + "\n";
  text += "  knobs ([default]):\n";
  for (const KnobSpec& knob : manifest.knobs) {
    text += fmt::format("    {:<18} {:<22} {}\n", knob.name,
                        Values(knob.values, knob.default_value), knob.doc);
  }
  // Only attention's parameters have the --shape and --causal shorthands.
  const std::string shorthands =
      std::string(TakesShape(manifest) ? "--shape B,H,S,D, " : "") +
      (manifest.FindProblemParam("CAUSAL") != nullptr ? "--causal, " : "");
  text += "  problem (" + shorthands + "--problem NAME=VALUE):\n";
  for (const ProblemParamSpec& param : manifest.problem) {
    const std::string domain =
        param.default_expr
            ? fmt::format(">= {} (default {})", param.min, param.default_expr->text())
        : param.values.empty() ? fmt::format(">= {} (default {})", param.min, param.default_value)
                               : Values(param.values, param.default_value);
    const std::string kind =
        param.compile_time() ? "compile-time, #define " + param.define : "run-time";
    const std::string check = param.check ? "; must hold: " + param.check->text() : "";
    text += fmt::format("    {:<18} {:<22} {}; {}{}\n", param.name, domain, param.doc, kind, check);
  }
  text += "  constraints:\n";
  for (const ConstraintSpec& constraint : manifest.constraints) {
    text += fmt::format("    {:<34} {}\n", constraint.name, constraint.expr.text());
  }
  if (manifest.bytes) {
    text += "  bytes per call (for GB/s): " + manifest.bytes->text() + "\n";
  }
  return text;
}

Json CompileReportToJson(const CompileReport& report) {
  const CompileOutcome& outcome = report.outcome;
  const Manifest& manifest = report.kernel_template.manifest;
  Json json = {
      {"template", manifest.name},
      {"template_version", manifest.version},
      {"template_hash", report.kernel_template.source_hash},
      {"configuration_id",
       ConfigurationId(report.kernel_template, report.genome, report.problem, report.arch.name)},
      {"knobs", report.genome},
      {"problem", report.problem},
      {"arch", report.arch.name},
      {"target", outcome.target.empty() ? Json(nullptr) : Json(outcome.target)},
      {"device", report.arch.device.empty() ? Json(nullptr) : Json(report.arch.device)},
      {"status", ToString(outcome.status)},
      {"reason", outcome.reason},
  };
  json["constraint"] = outcome.violation ? Json{{"name", outcome.violation->name},
                                                {"expr", outcome.violation->expr},
                                                {"doc", outcome.violation->doc}}
                                         : Json(nullptr);
  if (manifest.bytes) json["bytes"] = manifest.bytes->Evaluate(report.problem);
  if (outcome.status != Status::kInvalid) {
    json["compile_ms"] = outcome.compiled.compile_ms;
    json["elapsed_ms"] = outcome.compiled.elapsed_ms;
    json["cache_hit"] = outcome.compiled.cache_hit;
  }
  if (outcome.resources) {
    const KernelResources& r = *outcome.resources;
    json["resources"] = {{"function", r.function},
                         {"registers", r.registers},
                         {"barriers", r.barriers},
                         {"smem_static", r.smem_static},
                         {"smem_dynamic", outcome.dynamic_smem},
                         {"smem_total", r.smem_static + outcome.dynamic_smem},
                         {"stack_frame", r.stack_frame},
                         {"spill_stores", r.spill_stores},
                         {"spill_loads", r.spill_loads},
                         {"threads_per_block", outcome.threads_per_block}};
  }
  if (report.show_log || outcome.status == Status::kCompileError) {
    json["log"] = outcome.compiled.log;
  }
  if (report.reference != nullptr) {
    const CompileOutcome& reference = *report.reference;
    Json entry = {{"entry", manifest.reference.entry},
                  {"target", reference.target.empty() ? Json(nullptr) : Json(reference.target)},
                  {"status", ToString(reference.status)},
                  {"reason", reference.reason}};
    if (reference.resources) {
      entry["registers"] = reference.resources->registers;
      entry["threads_per_block"] = reference.threads_per_block;
      entry["smem_total"] = reference.resources->smem_static + reference.dynamic_smem;
    }
    if (report.show_log || reference.status == Status::kCompileError) {
      entry["log"] = reference.compiled.log;
    }
    json["reference"] = entry;
  }
  return json;
}

std::string CompileReportToText(const CompileReport& report) {
  const CompileOutcome& outcome = report.outcome;
  const Manifest& manifest = report.kernel_template.manifest;
  std::string text;
  auto line = [&text](std::string_view label, const std::string& value) {
    text += fmt::format("{:<12}{}\n", label, value);
  };
  line("template", fmt::format("{} v{} ({}, source {})", manifest.name, manifest.version,
                               report.kernel_template.origin,
                               report.kernel_template.source_hash.substr(0, 12)));
  line("knobs", FormatGenome(manifest, report.genome));
  line("problem", FormatProblem(manifest, report.problem));
  if (manifest.bytes) {
    line("bytes", fmt::format("{} per call ({}), the traffic its GB/s counts",
                              manifest.bytes->Evaluate(report.problem), manifest.bytes->text()));
  }
  line("arch",
       (report.arch.device.empty() ? report.arch.name + " (given)"
                                   : report.arch.name + " (detected: " + report.arch.device + ")") +
           (outcome.target.empty() || outcome.target == report.arch.name
                ? ""
                : ", compiled for " + outcome.target));
  line("status", std::string(ToString(outcome.status)) +
                     (outcome.reason.empty() ? "" : ": " + outcome.reason));
  if (outcome.violation && !outcome.violation->doc.empty()) {
    line("constraint", outcome.violation->name + ": " + outcome.violation->doc);
  }
  if (outcome.resources) {
    const KernelResources& r = *outcome.resources;
    line("registers", fmt::format("{} per thread, {} threads per block", r.registers,
                                  outcome.threads_per_block));
    line("smem", fmt::format("{} static + {} dynamic = {} bytes ({})", r.smem_static,
                             outcome.dynamic_smem, r.smem_static + outcome.dynamic_smem,
                             Kib(r.smem_static + outcome.dynamic_smem)));
    line("spills", fmt::format("{} bytes stored, {} bytes loaded; stack frame {} bytes",
                               r.spill_stores, r.spill_loads, r.stack_frame));
    for (const std::string& loss : r.performance_losses) line("ptxas", "performance loss " + loss);
  }
  if (outcome.status != Status::kInvalid) {
    line("compile", outcome.compiled.cache_hit
                        ? fmt::format("{:.1f} ms from the cache (NVRTC took {:.1f} ms)",
                                      outcome.compiled.elapsed_ms, outcome.compiled.compile_ms)
                        : fmt::format("{:.1f} ms (NVRTC)", outcome.compiled.compile_ms));
  }
  if (report.show_log || outcome.status == Status::kCompileError) {
    text += "log:\n" + outcome.compiled.log;
    if (!text.ends_with('\n')) text += '\n';
  }
  if (report.reference != nullptr) {
    const CompileOutcome& reference = *report.reference;
    std::string figures;
    if (reference.resources) {
      figures = fmt::format(", {} registers per thread, {} threads per block, {} bytes of smem",
                            reference.resources->registers, reference.threads_per_block,
                            reference.resources->smem_static + reference.dynamic_smem);
    }
    line("reference", manifest.reference.entry + ": " + std::string(ToString(reference.status)) +
                          (reference.reason.empty() ? "" : ": " + reference.reason) + figures);
    if (report.show_log || reference.status == Status::kCompileError) {
      text += "reference log:\n" + reference.compiled.log;
      if (!text.ends_with('\n')) text += '\n';
    }
  }
  return text;
}

std::string VerdictToText(const GpuVerdict& verdict) {
  std::string text;
  auto line = [&text](std::string_view label, const std::string& value) {
    text += fmt::format("{:<12}{}\n", label, value);
  };
  line("verdict",
       std::string(ToString(verdict.status)) +
           (verdict.error.empty()
                ? ""
                : ": " + verdict.error + (verdict.poisoned ? " (context poisoned)" : "")));
  const CorrectnessFigures& c = verdict.correctness;
  if (c.checks > 0) {
    line("correctness",
         fmt::format("{} over {} checks: max abs error {:.6g}, mean abs error {:.3g}, {} of {} "
                     "elements over tolerance ({:.3g}), {} not finite (atol {}, rtol {})",
                     c.passed ? "passed" : "FAILED", c.checks, c.worst.max_abs_error,
                     c.worst.mean_abs_error, c.worst.over_tolerance, c.worst.elements,
                     c.worst.fraction_over_tolerance, c.worst.non_finite, c.tolerance.atol,
                     c.tolerance.rtol));
    if (!c.failure.empty()) line("failure", c.failure);
  }
  if (verdict.timing) {
    const TimingFigures& t = *verdict.timing;
    line("timing", fmt::format("median {:.2f} us, p10 {:.2f}, p90 {:.2f}, min {:.2f}; {} "
                               "repetitions of {} launches{}{}",
                               t.median_us, t.p10_us, t.p90_us, t.min_us, t.repetitions,
                               t.launches_per_repetition, t.settled ? ", settled" : ", NOT settled",
                               t.l2_flushed ? ", L2 flushed" : ""));
    if (t.tflops > 0) line("throughput", fmt::format("{:.1f} TFLOP/s at the median", t.tflops));
    if (t.gbps > 0) line("bandwidth", fmt::format("{:.1f} GB/s at the median", t.gbps));
    if (const std::optional<double> cycles = t.median_cycles()) {
      line("sm clock", fmt::format("{:.0f} MHz averaged over the timed launches: {:.1f} k SM "
                                   "cycles per call at the median",
                                   t.mean_sm_clock_mhz, *cycles / 1000));
    }
    if (t.sm_clock_mhz > 0) {
      line("sm clock", fmt::format("{:.0f} MHz right after the timed launches", t.sm_clock_mhz));
    }
    line("recheck", t.recheck_passed ? "output unchanged after timing" : "OUTPUT CHANGED");
  }
  return text;
}

}  // namespace evo::cli

#include "evaluator/candidate_outcome.h"

#include "common/error.h"
#include "evaluator/gpu_verdict_json.h"

namespace evo {

nlohmann::json KernelResourcesToJson(const KernelResources& r) {
  nlohmann::json json = {{"function", r.function},       {"arch", r.arch},
                         {"registers", r.registers},     {"barriers", r.barriers},
                         {"smem_static", r.smem_static}, {"cmem0", r.cmem0},
                         {"stack_frame", r.stack_frame}, {"spill_stores", r.spill_stores},
                         {"spill_loads", r.spill_loads}, {"cumulative_stack", r.cumulative_stack}};
  // Only where ptxas wrote one: records and caches made without it stay as they were.
  if (!r.performance_losses.empty()) json["performance_losses"] = r.performance_losses;
  return json;
}

KernelResources KernelResourcesFromJson(const nlohmann::json& json) {
  KernelResources r;
  r.function = json.at("function").get<std::string>();
  r.arch = json.at("arch").get<std::string>();
  r.registers = json.at("registers").get<int>();
  r.barriers = json.at("barriers").get<int>();
  r.smem_static = json.at("smem_static").get<int64_t>();
  r.cmem0 = json.at("cmem0").get<int64_t>();
  r.stack_frame = json.at("stack_frame").get<int64_t>();
  r.spill_stores = json.at("spill_stores").get<int64_t>();
  r.spill_loads = json.at("spill_loads").get<int64_t>();
  r.cumulative_stack = json.at("cumulative_stack").get<int64_t>();
  if (json.contains("performance_losses")) {
    r.performance_losses = json.at("performance_losses").get<std::vector<std::string>>();
  }
  return r;
}

nlohmann::json TimingFiguresToJson(const TimingFigures& timing) {
  // The verdict's JSON already spells timing figures out; reuse it so both stay one format.
  GpuVerdict verdict;
  verdict.timing = timing;
  return GpuVerdictToJson(verdict).at("timing");
}

TimingFigures TimingFiguresFromJson(const nlohmann::json& json) {
  GpuVerdict verdict;
  nlohmann::json wrapper = GpuVerdictToJson(verdict);
  wrapper["timing"] = json;
  return *GpuVerdictFromJson(wrapper).timing;
}

nlohmann::json CandidateOutcomeToJson(const CandidateOutcome& outcome) {
  nlohmann::json json = {{"status", ToString(outcome.status)},
                         {"reason", outcome.reason},
                         {"threads_per_block", outcome.threads_per_block},
                         {"dynamic_smem", outcome.dynamic_smem},
                         {"compile_ms", outcome.compile_ms},
                         {"compile_cached", outcome.compile_cached},
                         {"compile_log", outcome.compile_log},
                         {"gpu_ms", outcome.gpu_ms}};
  if (outcome.resources) json["resources"] = KernelResourcesToJson(*outcome.resources);
  if (outcome.gpu) json["gpu"] = GpuVerdictToJson(*outcome.gpu);
  return json;
}

CandidateOutcome CandidateOutcomeFromJson(const nlohmann::json& json) {
  CandidateOutcome outcome;
  const auto status = StatusFromString(json.at("status").get<std::string>());
  if (!status) throw Error("unknown status '" + json.at("status").get<std::string>() + "'");
  outcome.status = *status;
  outcome.reason = json.at("reason").get<std::string>();
  outcome.threads_per_block = json.at("threads_per_block").get<int64_t>();
  outcome.dynamic_smem = json.at("dynamic_smem").get<int64_t>();
  outcome.compile_ms = json.at("compile_ms").get<double>();
  outcome.compile_cached = json.at("compile_cached").get<bool>();
  outcome.compile_log = json.value("compile_log", "");
  outcome.gpu_ms = json.at("gpu_ms").get<double>();
  if (json.contains("resources")) outcome.resources = KernelResourcesFromJson(json["resources"]);
  if (json.contains("gpu")) outcome.gpu = GpuVerdictFromJson(json["gpu"]);
  return outcome;
}

}  // namespace evo

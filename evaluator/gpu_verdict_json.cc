#include "evaluator/gpu_verdict_json.h"

#include <cmath>
#include <limits>

#include "common/error.h"

namespace evo {

nlohmann::json GpuVerdictToJson(const GpuVerdict& verdict) {
  using Json = nlohmann::json;
  const CorrectnessFigures& c = verdict.correctness;
  Json json = {{"status", ToString(verdict.status)},
               {"error", verdict.error},
               {"poisoned", verdict.poisoned}};
  json["correctness"] = {
      {"passed", c.passed},
      {"checks", c.checks},
      {"max_abs_error",
       std::isfinite(c.worst.max_abs_error) ? Json(c.worst.max_abs_error) : Json(nullptr)},
      {"mean_abs_error", c.worst.mean_abs_error},
      {"fraction_over_tolerance", c.worst.fraction_over_tolerance},
      {"elements", c.worst.elements},
      {"over_tolerance", c.worst.over_tolerance},
      {"non_finite", c.worst.non_finite},
      {"max_abs_reference", c.worst.max_abs_reference},
      {"failure", c.failure},
      {"atol", c.tolerance.atol},
      {"rtol", c.tolerance.rtol}};
  if (verdict.timing) {
    const TimingFigures& t = *verdict.timing;
    json["timing"] = {{"median_us", t.median_us},
                      {"p10_us", t.p10_us},
                      {"p90_us", t.p90_us},
                      {"min_us", t.min_us},
                      {"repetitions", t.repetitions},
                      {"launches_per_repetition", t.launches_per_repetition},
                      {"settled", t.settled},
                      {"l2_flushed", t.l2_flushed},
                      {"tflops", t.tflops},
                      {"recheck_passed", t.recheck_passed},
                      {"sm_clock_mhz", t.sm_clock_mhz}};
    // Only templates with a bytes formula have a bandwidth; the others' verdicts stay as they were.
    if (t.gbps > 0) json["timing"]["gbps"] = t.gbps;
    // Likewise the mean clock: verdicts from before it was measured stay byte for byte.
    if (t.mean_sm_clock_mhz > 0) json["timing"]["mean_sm_clock_mhz"] = t.mean_sm_clock_mhz;
  }
  return json;
}

GpuVerdict GpuVerdictFromJson(const nlohmann::json& json) {
  GpuVerdict verdict;
  const auto status = StatusFromString(json.at("status").get<std::string>());
  if (!status) throw Error("unknown status in a verdict");
  verdict.status = *status;
  verdict.error = json.at("error").get<std::string>();
  verdict.poisoned = json.at("poisoned").get<bool>();
  const auto& c = json.at("correctness");
  CorrectnessFigures& figures = verdict.correctness;
  figures.passed = c.at("passed").get<bool>();
  figures.checks = c.at("checks").get<int>();
  figures.worst.max_abs_error = c.at("max_abs_error").is_null()
                                    ? std::numeric_limits<double>::infinity()
                                    : c.at("max_abs_error").get<double>();
  figures.worst.mean_abs_error = c.at("mean_abs_error").get<double>();
  figures.worst.fraction_over_tolerance = c.at("fraction_over_tolerance").get<double>();
  figures.worst.elements = c.at("elements").get<int64_t>();
  figures.worst.over_tolerance = c.at("over_tolerance").get<int64_t>();
  figures.worst.non_finite = c.at("non_finite").get<int64_t>();
  figures.worst.max_abs_reference = c.at("max_abs_reference").get<double>();
  figures.failure = c.at("failure").get<std::string>();
  // Verdicts recorded before tolerances were per candidate carry none.
  figures.tolerance.atol = c.value("atol", 0.0);
  figures.tolerance.rtol = c.value("rtol", 0.0);
  if (json.contains("timing")) {
    const auto& t = json.at("timing");
    TimingFigures timing;
    timing.median_us = t.at("median_us").get<double>();
    timing.p10_us = t.at("p10_us").get<double>();
    timing.p90_us = t.at("p90_us").get<double>();
    timing.min_us = t.at("min_us").get<double>();
    timing.repetitions = t.at("repetitions").get<int>();
    timing.launches_per_repetition = t.at("launches_per_repetition").get<int>();
    timing.settled = t.at("settled").get<bool>();
    timing.l2_flushed = t.at("l2_flushed").get<bool>();
    timing.tflops = t.at("tflops").get<double>();
    timing.recheck_passed = t.at("recheck_passed").get<bool>();
    // Recordings made before the gate read the SM clock carry none.
    timing.sm_clock_mhz = t.value("sm_clock_mhz", 0.0);
    timing.gbps = t.value("gbps", 0.0);
    timing.mean_sm_clock_mhz = t.value("mean_sm_clock_mhz", 0.0);
    verdict.timing = timing;
  }
  return verdict;
}

}  // namespace evo

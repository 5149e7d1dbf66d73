#include "cli/search_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "evaluator/gpu_verdict_json.h"
#include "kernel_templates/genome.h"
#include "population/retiming.h"

namespace evo::cli {
namespace {

using Json = nlohmann::json;

std::string OptionalId(const std::optional<int64_t>& id) { return id ? std::to_string(*id) : "-"; }

// The clock a timing ran at: averaged over its timed launches, or in older records the one read
// right after them; 0 when neither was measured.
double ClockMhz(const TimingFigures& t) {
  return t.mean_sm_clock_mhz > 0 ? t.mean_sm_clock_mhz : t.sm_clock_mhz;
}

// That clock as text, with the cycles per call where the mean clock gives them.
std::string ClockText(const TimingFigures& t) {
  if (const std::optional<double> cycles = t.median_cycles()) {
    return fmt::format(" at {:.0f} MHz, {:.1f} k SM cycles", ClockMhz(t), *cycles / 1000);
  }
  return ClockMhz(t) > 0 ? fmt::format(" at {:.0f} MHz", ClockMhz(t)) : "";
}

// A timing's throughput: TFLOP/s where the template counts flops, GB/s where it counts only
// bytes (a bandwidth-bound kernel), both where it counts both.
std::string Throughput(const TimingFigures& t) {
  if (t.gbps > 0 && t.tflops > 0)
    return fmt::format("{:.1f} TFLOP/s, {:.1f} GB/s", t.tflops, t.gbps);
  if (t.gbps > 0) return fmt::format("{:.1f} GB/s", t.gbps);
  return fmt::format("{:.1f} TFLOP/s", t.tflops);
}

}  // namespace

std::string FormatSeconds(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (total >= 3600)
    return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
  return fmt::format("{}:{:02}", total / 60, total % 60);
}

Json RunToJson(const RunRecord& run) {
  const RunSpec& s = run.spec;
  return {{"id", run.id},
          {"state", ToString(run.state)},
          {"stop_reason", run.stop_reason},
          {"template", s.template_name},
          {"template_hash", s.template_hash},
          {"problem", s.problem},
          {"arch", s.arch},
          {"device", s.device},
          {"evaluator", s.evaluator},
          {"driver_version", s.driver_version},
          {"nvrtc_version", s.nvrtc_version},
          {"evo_version", s.evo_version},
          {"seed", s.seed},
          {"budget", s.budget},
          {"elite_size", s.elite_size},
          {"generation_size", s.generation_size},
          {"patience", s.patience},
          {"fixed", s.fixed},
          {"evaluated", run.finished_candidates},
          {"pending", run.pending_candidates},
          {"created_at", run.created_at},
          {"updated_at", run.updated_at}};
}

Json CandidateToJson(const CandidateRecord& c) {
  Json json = {{"id", c.id},
               {"run", c.run_id},
               {"config_id", c.config_id},
               {"generation", c.generation},
               {"genome", c.proposal.genome},
               {"operator", c.proposal.operator_name},
               {"parents", Json::array()},
               {"state", c.state == CandidateState::kPending ? "pending" : "finished"},
               {"created_at", c.created_at},
               {"finished_at", c.finished_at}};
  if (c.proposal.parent1) json["parents"].push_back(*c.proposal.parent1);
  if (c.proposal.parent2) json["parents"].push_back(*c.proposal.parent2);
  if (c.state == CandidateState::kFinished) {
    json["outcome"] = CandidateOutcomeToJson(c.outcome);
    json["outcome"].erase("compile_log");
  }
  if (c.confirmation) json["confirmation"] = TimingFiguresToJson(*c.confirmation);
  if (const auto score = c.score_us()) json["score_us"] = *score;
  if (const auto cycles = c.score_cycles()) json["score_cycles"] = *cycles;
  if (c.side_by_side) {
    json["side_by_side"] = {{"retiming", c.side_by_side->retiming_id},
                            {"median_us", c.side_by_side->median_us},
                            {"timings", c.side_by_side->timings},
                            {"timed", c.side_by_side->timed}};
    if (c.side_by_side->median_cycles) {
      json["side_by_side"]["median_cycles"] = *c.side_by_side->median_cycles;
    }
  }
  if (c.measured_on) {
    json["gpu"] = {{"ordinal", c.measured_on->ordinal},
                   {"name", c.measured_on->name},
                   {"uuid", c.measured_on->uuid}};
  }
  return json;
}

std::string LanesText(const std::vector<GpuIdentity>& lanes) {
  std::string ordinals;
  for (const GpuIdentity& gpu : lanes) {
    ordinals += (ordinals.empty() ? "" : ", ") + std::to_string(gpu.ordinal);
  }
  return lanes.size() == 1 ? "GPU " + ordinals
                           : std::to_string(lanes.size()) + " GPUs (" + ordinals + ")";
}

std::string MeasuredOnText(const std::vector<CandidateRecord>& candidates) {
  std::map<int, int64_t> counts;
  for (const CandidateRecord& c : candidates) {
    if (c.measured_on) ++counts[c.measured_on->ordinal];
  }
  std::string text = "candidates measured on";
  if (counts.empty()) return text + " no GPU";
  bool first = true;
  for (const auto& [ordinal, count] : counts) {
    text += fmt::format("{} GPU {}: {}", first ? "" : ",", ordinal, count);
    first = false;
  }
  return text;
}

namespace {

// " with A=1, B=2 fixed" for a run that holds knobs fixed; empty for one that searches all.
std::string FixedSuffix(const RunSpec& spec) {
  return spec.fixed.empty() ? "" : " with " + FormatSettings(spec.fixed, ", ") + " fixed";
}

}  // namespace

std::string RunHeadline(const RunRecord& run) {
  const RunSpec& s = run.spec;
  return fmt::format("run {}: {} {}{} on {} ({}{}), seed {}, budget {}, elite {}", run.id,
                     s.template_name, FormatSettings(s.problem), FixedSuffix(s), s.device, s.arch,
                     s.evaluator == "gpu" ? "" : ", " + s.evaluator, s.seed, s.budget,
                     s.elite_size);
}

std::string RunsToText(const std::vector<RunRecord>& runs) {
  if (runs.empty()) return "no runs\n";
  std::string text = fmt::format("{:>4}  {:<8}  {:<22}  {:>9}  {:<24}  {}\n", "run", "state",
                                 "stopped", "evaluated", "updated", "task");
  for (const RunRecord& run : runs) {
    text += fmt::format("{:>4}  {:<8}  {:<22}  {:>9}  {:<24}  {} {}{} on {}\n", run.id,
                        ToString(run.state), run.stop_reason.empty() ? "-" : run.stop_reason,
                        fmt::format("{}/{}", run.finished_candidates, run.spec.budget),
                        run.updated_at, run.spec.template_name, FormatSettings(run.spec.problem),
                        FixedSuffix(run.spec), run.spec.device);
  }
  return text;
}

std::string EliteToText(const RunRecord& run, const std::vector<CandidateRecord>& elite) {
  std::string text = "elite of " + RunHeadline(run) + "\n";
  if (elite.empty()) return text + "  (empty: no candidate has been measured and confirmed)\n";
  // A template that counts bytes but no flops (bandwidth-bound) is ranked by GB/s instead.
  const bool bandwidth =
      std::all_of(elite.begin(), elite.end(),
                  [](const CandidateRecord& c) { return c.scoring_timing()->tflops == 0; }) &&
      std::any_of(elite.begin(), elite.end(),
                  [](const CandidateRecord& c) { return c.scoring_timing()->gbps > 0; });
  const std::optional<SideBySide>& retimed = elite.front().side_by_side;
  if (retimed) {
    const bool cycles = CyclesBreakTies(elite);
    text += fmt::format(
        "  ordered by the side-by-side re-timing {} ({} timings of each member{}, {}): the "
        "median of each member's timings{}{}\n",
        retimed->retiming_id, retimed->timings,
        retimed->gpu ? fmt::format(" on GPU {}", retimed->gpu->ordinal) : "", retimed->finished_at,
        cycles ? fmt::format(", and {}", kCyclesBreakTies) : "",
        static_cast<size_t>(retimed->timed) > elite.size()
            ? fmt::format("; the {} {}of the {} it timed (the score's elite, close "
                          "contenders and the fewest SM cycles)",
                          elite.size(), cycles ? "" : "fastest ", retimed->timed)
            : "");
  } else if (elite.size() > 1) {
    text += "  ordered by score (these members were not re-timed side by side)\n";
  }
  text += fmt::format(
      "{:>4}  {:>9}  {:>10}  {:>11}  {:>12}  {:>10}  {:>10}  {:>15}  {:>8}  {:>4}  {:>9}  {}\n",
      "rank", "candidate", "score us", "score kcyc", "side-by-side", "first us", "second us",
      "p10..p90 us", bandwidth ? "GB/s" : "TFLOP/s", "regs", "smem KiB", "knobs");
  int rank = 0;
  for (const CandidateRecord& c : elite) {
    // The score is the slower median; its spread and throughput are shown beside it.
    const TimingFigures& score = *c.scoring_timing();
    const TimingFigures* first = c.outcome.timing();
    const int64_t smem =
        (c.outcome.resources ? c.outcome.resources->smem_static : 0) + c.outcome.dynamic_smem;
    const std::optional<double> cycles = c.score_cycles();
    text += fmt::format(
        "{:>4}  {:>9}  {:>10.2f}  {:>11}  {:>12}  {:>10.2f}  {:>10.2f}  {:>15}  {:>8.1f}  {:>4}  "
        "{:>9.1f}  {}\n",
        ++rank, c.id, score.median_us, cycles ? fmt::format("{:.1f}", *cycles / 1000) : "-",
        c.side_by_side ? fmt::format("{:.2f}", c.side_by_side->median_us) : "-",
        first ? first->median_us : NAN, c.confirmation->median_us,
        fmt::format("{:.2f}..{:.2f}", score.p10_us, score.p90_us),
        bandwidth ? score.gbps : score.tflops,
        c.outcome.resources ? c.outcome.resources->registers : 0, static_cast<double>(smem) / 1024,
        FormatSettings(c.proposal.genome));
  }
  return text;
}

std::string RetimingsToText(int64_t candidate_id, const std::vector<Retiming>& retimings,
                            std::optional<int64_t> ordering, bool in_elite) {
  std::string text;
  for (const Retiming& retiming : retimings) {
    const std::map<int64_t, double> medians = retiming.Medians();
    const auto median = medians.find(candidate_id);
    if (median == medians.end()) continue;
    std::string timings;
    for (const RetimingTiming& t : retiming.timings) {
      if (t.candidate_id != candidate_id) continue;
      timings += fmt::format("{}{:.2f}", timings.empty() ? "" : ", ", t.timing.median_us);
      if (ClockMhz(t.timing) > 0) timings += fmt::format(" ({:.0f} MHz)", ClockMhz(t.timing));
    }
    text += fmt::format(
        "  side by side: median {:.2f} us in re-timing {} of {} candidates{} ({}): {} us{}\n",
        median->second, retiming.id, retiming.Members().size(),
        retiming.gpu ? fmt::format(" on GPU {}", retiming.gpu->ordinal) : "", retiming.finished_at,
        timings,
        ordering != retiming.id ? ""
        : in_elite              ? "; it orders the elite"
                                : "; it chose the elite, and this candidate was not among the "
                                  "fastest");
  }
  return text;
}

Json RetimingsToJson(int64_t candidate_id, const std::vector<Retiming>& retimings,
                     std::optional<int64_t> ordering, bool in_elite) {
  Json json = Json::array();
  for (const Retiming& retiming : retimings) {
    const std::map<int64_t, double> medians = retiming.Medians();
    const auto median = medians.find(candidate_id);
    if (median == medians.end()) continue;
    Json timings = Json::array();
    for (const RetimingTiming& t : retiming.timings) {
      if (t.candidate_id == candidate_id) {
        timings.push_back({{"round", t.round}, {"timing", TimingFiguresToJson(t.timing)}});
      }
    }
    json.push_back({{"retiming", retiming.id},
                    {"median_us", median->second},
                    {"members", retiming.Members()},
                    {"gpu", retiming.gpu ? Json(retiming.gpu->ordinal) : Json()},
                    {"finished_at", retiming.finished_at},
                    {"orders_elite", ordering == retiming.id},
                    {"in_elite", ordering == retiming.id && in_elite},
                    {"timings", timings}});
  }
  return json;
}

std::string CandidateToText(const CandidateRecord& c) {
  std::string text =
      fmt::format("candidate {} of run {}, generation {}\n", c.id, c.run_id, c.generation);
  text += "  knobs:     " + FormatSettings(c.proposal.genome) + "\n";
  text += "  config:    " + c.config_id + "\n";
  text += "  operator:  " + c.proposal.operator_name + "\n";
  text += "  parents:   " + OptionalId(c.proposal.parent1) + ", " + OptionalId(c.proposal.parent2) +
          "\n";
  text += "  created:   " + c.created_at + "\n";
  if (c.state == CandidateState::kPending) return text + "  state:     pending\n";
  const CandidateOutcome& o = c.outcome;
  text += "  finished:  " + c.finished_at + "\n";
  text += "  status:    " + std::string(ToString(o.status)) +
          (o.reason.empty() ? "" : ": " + o.reason) + "\n";
  if (o.resources) {
    const KernelResources& r = *o.resources;
    text += fmt::format(
        "  compile:   {} registers, {} B static + {} B dynamic shared memory, {} B stack, "
        "spills {} B stored / {} B loaded, {} threads, {:.0f} ms{}\n",
        r.registers, r.smem_static, o.dynamic_smem, r.stack_frame, r.spill_stores, r.spill_loads,
        o.threads_per_block, o.compile_ms, o.compile_cached ? " (cached)" : "");
    for (const std::string& loss : r.performance_losses) {
      text += "  ptxas:     performance loss " + loss + "\n";
    }
  }
  if (o.gpu) {
    const CorrectnessFigures& k = o.gpu->correctness;
    text += fmt::format(
        "  correct:   {} over {} checks: max |err| {:.3g}, mean |err| {:.3g}, {} over tolerance, "
        "{} non-finite{}\n",
        k.passed ? "passed" : "failed", k.checks, k.worst.max_abs_error, k.worst.mean_abs_error,
        k.worst.over_tolerance, k.worst.non_finite,
        k.failure.empty() ? "" : " (" + k.failure + ")");
  }
  const auto timing_line = [](const char* label, const TimingFigures& t) {
    return fmt::format(
        "  {}median {:.2f} us, p10 {:.2f}, p90 {:.2f}, min {:.2f}; {} repetitions x {} "
        "launches{}{}; "
        "{}{}\n",
        label, t.median_us, t.p10_us, t.p90_us, t.min_us, t.repetitions, t.launches_per_repetition,
        t.settled ? "" : " (spread not settled)", t.l2_flushed ? ", L2 flushed" : "", Throughput(t),
        ClockText(t));
  };
  if (const TimingFigures* t = o.timing()) text += timing_line("timing:    ", *t);
  if (c.confirmation) text += timing_line("confirmed: ", *c.confirmation);
  if (o.gpu_ms > 0) text += fmt::format("  gpu time:  {:.0f} ms\n", o.gpu_ms);
  if (c.measured_on) {
    text += fmt::format("  gpu:       {} ({}{})\n", c.measured_on->ordinal, c.measured_on->name,
                        c.measured_on->uuid.empty() ? "" : ", " + c.measured_on->uuid);
  }
  return text;
}

std::string ProgressLine(const SearchProgress& p) {
  std::string line =
      fmt::format("run {} gen {}: {}/{} evaluated", p.run_id, p.generation, p.evaluated, p.budget);
  if (p.best) {
    line += fmt::format(", best {:.2f} us ({}, #{})", *p.best->score_us(),
                        Throughput(*p.best->scoring_timing()), p.best->id);
  } else {
    line += ", best -";
  }
  line += fmt::format(", {:.1f}/min", p.per_minute);
  if (p.eta_seconds) line += ", ETA " + FormatSeconds(*p.eta_seconds);
  return line;
}

}  // namespace evo::cli

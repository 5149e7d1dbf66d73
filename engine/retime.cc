#include "engine/retime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <set>

#include "evaluator/recording.h"

namespace evo {
namespace {

std::string Ids(const std::vector<CandidateRecord>& elite) {
  std::string text;
  for (const CandidateRecord& c : elite) text += (text.empty() ? "#" : " #") + std::to_string(c.id);
  return text;
}

// The candidates of `candidates` that are not in `elite`, in their order.
std::vector<CandidateRecord> Outside(const std::vector<CandidateRecord>& candidates,
                                     const std::vector<CandidateRecord>& elite) {
  std::vector<CandidateRecord> outside;
  for (const CandidateRecord& c : candidates) {
    if (std::none_of(elite.begin(), elite.end(),
                     [&](const CandidateRecord& member) { return member.id == c.id; })) {
      outside.push_back(c);
    }
  }
  return outside;
}

RetimeReport Report(RetimeResult result, std::string message) {
  RetimeReport report;
  report.result = result;
  report.message = std::move(message);
  return report;
}

constexpr const char* kScoreOrderKept = "the elite keeps its score order and nothing was stored";

}  // namespace

std::string_view ToString(RetimeResult result) {
  switch (result) {
    case RetimeResult::kRetimed:
      return "retimed";
    case RetimeResult::kUpToDate:
      return "up_to_date";
    case RetimeResult::kTooFew:
      return "too_few";
    case RetimeResult::kOff:
      return "off";
    case RetimeResult::kUnavailable:
      return "unavailable";
    case RetimeResult::kInterrupted:
      return "interrupted";
    case RetimeResult::kFailed:
      return "failed";
  }
  return "?";
}

RetimeReport RetimeElite(PopulationStore& store, int64_t run_id, CandidateEvaluator& evaluator,
                         const RetimeOptions& options, const std::function<bool()>& should_stop) {
  if (options.rounds <= 0) {
    return Report(RetimeResult::kOff, "the elite was not re-timed (turned off)");
  }
  const std::vector<CandidateRecord> elite = store.EliteByScore(run_id);
  // The elite's members and, after them, the close contenders (by score).
  const std::vector<CandidateRecord> timed = store.Contenders(run_id);
  if (timed.size() < 2) {
    return Report(RetimeResult::kTooFew, fmt::format("the elite has {} member{}: nothing to "
                                                     "re-time side by side",
                                                     elite.size(), elite.size() == 1 ? "" : "s"));
  }
  std::set<int64_t> members;
  for (const CandidateRecord& c : timed) members.insert(c.id);
  if (const std::optional<Retiming> latest = store.LatestRetiming(run_id);
      latest && latest->Members() == members) {
    return Report(
        RetimeResult::kUpToDate,
        fmt::format("the elite's order comes from re-timing {} of the same members", latest->id));
  }
  std::string why = evaluator.RetimingUnavailable();
  // A run resumed with --force on another template version or GPU model: its members' figures
  // came from other code or another GPU, which a re-timing here would not order.
  if (const std::optional<RunRecord> run = store.FindRun(run_id); why.empty() && run) {
    const EvaluatorIdentity& identity = evaluator.identity();
    if (run->spec.template_hash != identity.template_hash) {
      why = "the run was measured with another version of " + run->spec.template_name;
    } else if (run->spec.device != identity.device) {
      why = "the run was measured on " + run->spec.device + ", not on " + identity.device;
    }
  }
  if (!why.empty()) {
    return Report(RetimeResult::kUnavailable,
                  "the elite was not re-timed: " + why + "; it keeps its score order");
  }
  const size_t lane = static_cast<size_t>(options.lane);
  if (lane >= evaluator.lanes().size()) {
    return Report(RetimeResult::kFailed, fmt::format("the elite was not re-timed: there is no "
                                                     "lane {}; {}",
                                                     options.lane, kScoreOrderKept));
  }
  const GpuIdentity& gpu = evaluator.lanes()[lane];
  std::vector<int64_t> ids;
  std::map<int64_t, const CandidateRecord*> by_id;
  std::vector<Genome> genomes;
  for (const CandidateRecord& c : timed) {
    ids.push_back(c.id);
    by_id[c.id] = &c;
    genomes.push_back(c.proposal.genome);
  }
  if (options.announce) {
    const std::vector<CandidateRecord> close = Outside(timed, elite);
    options.announce(fmt::format(
        "re-timing the elite's {} member{} ({}){} side by side on GPU {}: {} rounds, {} timings "
        "(Ctrl-C stops it; the elite then keeps its score order)",
        elite.size(), elite.size() == 1 ? "" : "s", Ids(elite),
        close.empty() ? ""
                      : fmt::format(" and {} close contender{} ({}, scored within {:.0f} % of "
                                    "the last member)",
                                    close.size(), close.size() == 1 ? "" : "s", Ids(close),
                                    kContenderMargin * 100),
        gpu.ordinal, options.rounds, timed.size() * static_cast<size_t>(options.rounds)));
  }

  Retiming retiming;
  retiming.run_id = run_id;
  retiming.rounds = options.rounds;
  retiming.gpu = gpu;
  retiming.started_at = NowIso8601();
  const auto start = std::chrono::steady_clock::now();
  try {
    // Members an earlier session measured are compiled again while the first ones are timed.
    evaluator.Prefetch(genomes);
    for (int round = 0; round < options.rounds; ++round) {
      for (const int64_t id : RoundOrder(ids, round)) {
        if (should_stop && should_stop()) {
          return Report(
              RetimeResult::kInterrupted,
              fmt::format("re-timing stopped after {} of {} timings; {}", retiming.timings.size(),
                          ids.size() * options.rounds, kScoreOrderKept));
        }
        const GpuVerdict verdict = evaluator.Remeasure(options.lane, by_id.at(id)->proposal.genome);
        if (verdict.status != Status::kMeasured || !verdict.timing) {
          const std::string failure = !verdict.error.empty() ? verdict.error
                                      : !verdict.correctness.failure.empty()
                                          ? verdict.correctness.failure
                                          : "no timing";
          return Report(
              RetimeResult::kFailed,
              fmt::format("re-timing failed: candidate {} in round {} was {} ({}); {}", id,
                          round + 1, ToString(verdict.status), failure, kScoreOrderKept));
        }
        retiming.timings.push_back({id, round, *verdict.timing});
      }
    }
    retiming.finished_at = NowIso8601();
    retiming.id = store.AddRetiming(retiming);
  } catch (const std::exception& error) {
    return Report(RetimeResult::kFailed,
                  fmt::format("re-timing failed: {}; {}", error.what(), kScoreOrderKept));
  }

  const std::vector<CandidateRecord> ordered = store.Elite(run_id);
  const bool changed = Ids(ordered) != Ids(elite);
  const std::vector<CandidateRecord> joined = Outside(ordered, elite);
  RetimeReport report = Report(
      RetimeResult::kRetimed,
      fmt::format("re-timing {} stored ({} timings in {:.1f} s): side by side the order is {}{}{}",
                  retiming.id, retiming.timings.size(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                  Ids(ordered), changed ? " (by score it was " + Ids(elite) + ")" : ", as by score",
                  joined.empty()
                      ? ""
                      : fmt::format("; {} joined the elite from the contenders", Ids(joined))));
  report.retiming = std::move(retiming);
  return report;
}

}  // namespace evo

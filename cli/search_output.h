#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/search.h"
#include "population/store.h"

namespace evo::cli {

nlohmann::json RunToJson(const RunRecord& run);
nlohmann::json CandidateToJson(const CandidateRecord& candidate);

// One line per run.
std::string RunsToText(const std::vector<RunRecord>& runs);
std::string RunHeadline(const RunRecord& run);
// The elite as a table, best first, saying where its order comes from (the side-by-side
// re-timing, whose median each member shows beside its score, or the score).
std::string EliteToText(const RunRecord& run, const std::vector<CandidateRecord>& elite);
// Everything stored about one candidate.
std::string CandidateToText(const CandidateRecord& candidate);
// The side-by-side re-timings among `retimings` that timed the candidate: its median and
// timings in each, which one (`ordering`) chose and orders its run's elite now, and whether the
// candidate is in that elite (`in_elite`; a close contender re-timed beside it may not be).
std::string RetimingsToText(int64_t candidate_id, const std::vector<Retiming>& retimings,
                            std::optional<int64_t> ordering, bool in_elite);
nlohmann::json RetimingsToJson(int64_t candidate_id, const std::vector<Retiming>& retimings,
                               std::optional<int64_t> ordering, bool in_elite);
// The live progress line of `evo run` (no newline).
std::string ProgressLine(const SearchProgress& progress);

std::string FormatSeconds(double seconds);

// "GPU 0", or "2 GPUs (0, 1)": the GPUs a run measures on.
std::string LanesText(const std::vector<GpuIdentity>& lanes);
// "candidates measured on GPU 0: 51, GPU 1: 49".
std::string MeasuredOnText(const std::vector<CandidateRecord>& candidates);

}  // namespace evo::cli

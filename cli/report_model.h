#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/report_peers.h"
#include "population/store.h"

namespace evo::cli {

// Everything a report shows of one run, read from the store.
struct ReportRun {
  RunRecord run;
  std::vector<CandidateRecord> candidates;  // by id
  std::vector<CandidateRecord> elite;       // best first
  // The knobs in the template's order when evo has the template, else by name.
  std::vector<std::string> knobs;
  std::vector<PeerTime> peers;  // empty: none known
};

// How a candidate was made, from the operator the engine stored with it: "default", "starting
// point", "neighbour scan" (an untried one-knob neighbour of a good candidate), "knob marginals"
// (the knob values the fastest candidates share, engine/knob_marginals), "cost model" (ranked
// first by the learned model), "random", "mutation" and "crossover" (runs of the engine
// before the cost model), or "other" for an operator this evo does not know.
std::string_view Provenance(std::string_view operator_name);

// Seconds since the epoch of an ISO 8601 UTC time as the store writes it
// ("2026-11-24T03:00:52.096Z"); nothing for anything else.
std::optional<double> ParseUtcSeconds(std::string_view text);

// The data the page's script plots for one run: each candidate (generation, provenance, status,
// first and confirming medians, score, registers, shared memory, seconds since the run was
// created, genome), best-so-far over the evaluated candidates in the order they finished, the
// knobs with the values tried, and the peers.
nlohmann::json RunChartData(const ReportRun& report);

// "run 3: sdpa_fp16 B=2 CAUSAL=0 D=64 ...".
std::string RunTitle(const RunRecord& run);

}  // namespace evo::cli

#pragma once

#include <string>
#include <vector>

#include "cli/report_model.h"

namespace evo::cli {

// HTML tables of a report; every stored string in them is escaped.

// The task and where it ran: template and version, problem, device, arch, driver, NVRTC, evo,
// evaluator, seed, budget, progress, state.
std::string RunFactsTable(const ReportRun& run);

// The elite, best first: genome, the first and the confirming median, the score, the ptxas
// figures.
std::string EliteTable(const ReportRun& run);

// One row per run (a tune over many shapes): the shape, evo's best, each known peer and the
// ratio of the peer's time to evo's.
std::string ShapesTable(const std::vector<ReportRun>& runs);

// Where the peers' times come from, or why there are none.
std::string PeersNote(const std::vector<ReportRun>& runs, const std::string& peers_file);

}  // namespace evo::cli

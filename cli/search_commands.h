#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli/command_support.h"

namespace evo::cli {

// `evo run`: search a template's space, or resume a stored search.
std::function<int()> SetupRun(CLI::App& app, const GlobalOptions& global);
// `evo tune`: search a set of shapes, one run each, in one database.
std::function<int()> SetupTune(CLI::App& app, const GlobalOptions& global);
// `evo sweep`: measure every valid configuration of a task into a recording (for replays).
std::function<int()> SetupSweep(CLI::App& app, const GlobalOptions& global);
// `evo show runs|elite|candidate`: read a population back.
std::function<int()> SetupShow(CLI::App& app, const GlobalOptions& global);
// `evo export`: a candidate's cubin, source and launch description for other programs, or the
// tuned runs as a Python package or C++ library with a dispatch table.
std::function<int()> SetupExport(CLI::App& app, const GlobalOptions& global);

}  // namespace evo::cli

#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "cli/command_support.h"

namespace evo::cli {

// `evo report`: one self-contained HTML page of stored runs (charts, the elite, peers).
std::function<int()> SetupReport(CLI::App& app, const GlobalOptions& global);
// `evo doctor`: what this machine can and cannot do for evo, each problem with its fix.
std::function<int()> SetupDoctor(CLI::App& app, const GlobalOptions& global);

}  // namespace evo::cli

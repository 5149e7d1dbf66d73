#pragma once

#include <span>

#include "kernel_templates/embedded_files.h"

namespace evo {

// The files of cli/report_assets/ (the page's script and style sheet), compiled into the binary
// so that `evo report` needs nothing beside it but the plotting library.
std::span<const EmbeddedFile> EmbeddedReportFiles();

}  // namespace evo

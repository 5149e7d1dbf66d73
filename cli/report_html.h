#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/report_model.h"

namespace evo::cli {

// Text for HTML element content and quoted attribute values: & < > " ' as character references.
std::string HtmlEscape(std::string_view text);

// JSON that may stand inside a <script> element: '<', '>' and '&' (which JSON has only inside
// strings) written as \u escapes, so no stored string can close the element ("</script>") or
// open an HTML comment; bytes that are not UTF-8 become U+FFFD.
std::string ScriptSafeJson(const nlohmann::json& json);

// The Content-Security-Policy source for an inline element of exactly this text:
// 'sha256-<base64 of its SHA-256>'.
std::string CspHashSource(std::string_view text);

// The plotting library, read from the system at report time.
struct ChartLibrary {
  std::string path;
  std::string version;  // "3.9.1", from its banner; empty when it has none
  std::string code;
};

// Reads Chart.js's UMD build; throws evo::Error when the file is missing, unreadable, not
// Chart.js, or holds text that would end an inline <script> element.
ChartLibrary ReadChartLibrary(const std::string& path);

struct ReportInputs {
  std::string database;
  std::string generated_at;  // ISO 8601 UTC
  std::string evo_version;
  std::string peers_file;  // empty: no --peers
  std::vector<ReportRun> runs;
  ChartLibrary chart;
};

// The whole page: one file with its data, the plotting library and the script that draws the
// charts inline, under a Content-Security-Policy that allows those scripts and nothing else to
// load or run, so the page opens offline and makes no request.
std::string RenderReport(const ReportInputs& inputs);

}  // namespace evo::cli

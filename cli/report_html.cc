#include "cli/report_html.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "cli/report_assets.h"
#include "cli/report_tables.h"
#include "common/base64.h"
#include "common/error.h"
#include "common/files.h"
#include "common/sha256.h"

namespace evo::cli {
namespace {

std::string Lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

std::string_view ReportAsset(std::string_view name) {
  for (const EmbeddedFile& file : EmbeddedReportFiles()) {
    if (file.path == name) return file.content;
  }
  throw Error("evo was built without its report asset " + std::string(name));
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::string ScriptSafeJson(const nlohmann::json& json) {
  const std::string text = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        safe += "\\u003c";
        break;
      case '>':
        safe += "\\u003e";
        break;
      case '&':
        safe += "\\u0026";
        break;
      default:
        safe += c;
    }
  }
  return safe;
}

std::string CspHashSource(std::string_view text) {
  const std::array<uint8_t, 32> digest = Sha256().Update(text).Digest();
  return "'sha256-" +
         Base64Encode(
             std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size())) +
         "'";
}

ChartLibrary ReadChartLibrary(const std::string& path) {
  const std::string install =
      "; install Debian's libjs-chart.js (scripts/install-deps.sh does) or pass --chart-js FILE";
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    throw Error("the plotting library Chart.js is not at " + path + install);
  }
  if (!std::filesystem::is_regular_file(path, error)) {
    throw Error("the plotting library Chart.js at " + path + " is not a file" + install);
  }
  const std::optional<std::string> code = TryReadFile(path);
  if (!code) throw Error("cannot read the plotting library Chart.js at " + path);
  ChartLibrary library{path, "", *code};
  // Its UMD build opens with "/*!\n * Chart.js v3.9.1\n".
  const std::string_view banner = "Chart.js v";
  const size_t at = library.code.find(banner);
  if (at == std::string::npos || at > 64) {
    throw Error(path + " is not Chart.js's UMD build (no \"Chart.js v\" banner at its start)" +
                install);
  }
  for (size_t i = at + banner.size();
       i < library.code.size() && !std::isspace(static_cast<unsigned char>(library.code[i])); ++i) {
    library.version += library.code[i];
  }
  // Inline, the library must not hold what ends a script element or opens a comment in it;
  // rewriting such text inside minified code could change what it does, so refuse instead.
  const std::string lower = Lowercase(library.code);
  if (lower.find("</script") != std::string::npos || lower.find("<!--") != std::string::npos) {
    throw Error(path + " holds '</script' or '<!--' and cannot be embedded in a page");
  }
  return library;
}

std::string RenderReport(const ReportInputs& inputs) {
  nlohmann::json data = {{"runs", nlohmann::json::array()}};
  for (const ReportRun& run : inputs.runs) data["runs"].push_back(RunChartData(run));
  const std::string script(ReportAsset("report.js"));
  const std::string style(ReportAsset("report.css"));
  // Only these two scripts run and only this style sheet applies; nothing may be fetched.
  const std::string policy = "default-src 'none'; script-src " + CspHashSource(inputs.chart.code) +
                             " " + CspHashSource(script) + "; style-src " + CspHashSource(style);

  std::string title = "evo report";
  if (inputs.runs.size() == 1) title += ": " + RunTitle(inputs.runs.front().run);
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n";
  // The policy comes first, so that it governs everything after it.
  html += "<meta http-equiv=\"Content-Security-Policy\" content=\"" + HtmlEscape(policy) + "\">\n";
  html += "<meta charset=\"utf-8\">\n<title>" + HtmlEscape(title) + "</title>\n";
  html += "<style>" + style + "</style>\n</head>\n<body>\n";
  html +=
      "<header><h1>" + HtmlEscape(title) + "</h1><p>" +
      HtmlEscape("database " + inputs.database + ", " + std::to_string(inputs.runs.size()) +
                 (inputs.runs.size() == 1 ? " run" : " runs") + "; written " + inputs.generated_at +
                 " by evo " + inputs.evo_version + "; plots drawn by Chart.js " +
                 inputs.chart.version + " (" + inputs.chart.path + "), embedded in this file") +
      "</p></header>\n";
  // The script reports here what it drew (each chart's points) or the errors it met.
  html += "<pre id=\"evo-render-status\" data-state=\"not run\"></pre>\n";
  html += PeersNote(inputs.runs, inputs.peers_file);
  if (inputs.runs.size() > 1) html += ShapesTable(inputs.runs);
  for (const ReportRun& run : inputs.runs) {
    html += "<section class=\"run\" id=\"run-" + std::to_string(run.run.id) + "\">\n";
    html += "<h2>" + HtmlEscape(RunTitle(run.run)) + "</h2>\n";
    html += RunFactsTable(run);
    html += "<div class=\"charts\" data-run=\"" + std::to_string(run.run.id) + "\"></div>\n";
    html += EliteTable(run);
    html += "</section>\n";
  }
  html += "<script type=\"application/json\" id=\"evo-report-data\">" + ScriptSafeJson(data) +
          "</script>\n";
  html += "<script>" + inputs.chart.code + "</script>\n";
  html += "<script>" + script + "</script>\n";
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace evo::cli

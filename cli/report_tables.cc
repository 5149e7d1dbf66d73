#include "cli/report_tables.h"

#include <fmt/format.h>

#include <algorithm>

#include "cli/report_html.h"
#include "kernel_templates/genome.h"
#include "population/retiming.h"

namespace evo::cli {
namespace {

std::string Cell(const std::string& text) { return "<td>" + HtmlEscape(text) + "</td>"; }
std::string NumberCell(const std::string& text) {
  return "<td class=\"num\">" + HtmlEscape(text) + "</td>";
}
std::string Header(const std::vector<std::string>& names) {
  std::string row = "<tr>";
  for (const std::string& name : names) row += "<th>" + HtmlEscape(name) + "</th>";
  return row + "</tr>\n";
}

std::string Microseconds(double us) { return fmt::format("{:.2f}", us); }

std::string Spread(const TimingFigures& t) {
  return fmt::format("{:.2f} ({:.2f}..{:.2f})", t.median_us, t.p10_us, t.p90_us);
}

// The best-known peer time beside evo's best, or nothing.
const PeerTime* FastestPeer(const std::vector<PeerTime>& peers) {
  const auto it = std::min_element(
      peers.begin(), peers.end(), [](const PeerTime& a, const PeerTime& b) { return a.us < b.us; });
  return it == peers.end() ? nullptr : &*it;
}

std::optional<double> BestScore(const ReportRun& run) {
  if (run.elite.empty()) return std::nullopt;
  return run.elite.front().score_us();
}

}  // namespace

std::string RunFactsTable(const ReportRun& report) {
  const RunRecord& run = report.run;
  const RunSpec& s = run.spec;
  const std::vector<std::pair<std::string, std::string>> facts = {
      {"task", s.template_name + " " + FormatSettings(s.problem)},
      {"template version", s.template_hash},
      {"device", s.device + " (" + s.arch + ")"},
      {"driver",
       s.driver_version.empty() ? "none (no GPU was involved)" : "CUDA " + s.driver_version},
      {"NVRTC", s.nvrtc_version},
      {"evo", s.evo_version},
      {"evaluator", s.evaluator},
      {"seed", std::to_string(s.seed)},
      {"evaluated", fmt::format("{} of a budget of {} ({} pending)", run.finished_candidates,
                                s.budget, run.pending_candidates)},
      {"search",
       fmt::format("elite of {}, generations of {}, patience {}", s.elite_size, s.generation_size,
                   s.patience == 0 ? "none" : std::to_string(s.patience))},
      {"state", std::string(ToString(run.state)) +
                    (run.stop_reason.empty() ? "" : " (" + run.stop_reason + ")")},
      {"created", run.created_at},
      {"updated", run.updated_at},
  };
  std::string html = "<table class=\"facts\">\n";
  for (const auto& [name, value] : facts) {
    html += "<tr><th>" + HtmlEscape(name) + "</th>" + Cell(value) + "</tr>\n";
  }
  return html + "</table>\n";
}

std::string EliteTable(const ReportRun& report) {
  std::string html = "<h3>Elite</h3>\n";
  if (report.elite.empty()) {
    return html + "<p>Empty: no candidate has been measured and confirmed.</p>\n";
  }
  const std::optional<SideBySide>& retimed = report.elite.front().side_by_side;
  html += retimed
              ? fmt::format(
                    "<p>{}, the score being the slower of the first median and the "
                    "confirming one; ranked by the median of {} side-by-side timings each{} "
                    "(re-timing {}, {}) (microseconds, p10..p90 in brackets).</p>\n",
                    static_cast<size_t>(retimed->timed) > report.elite.size()
                        ? fmt::format(
                              "The {}{} of the {} candidates re-timed side by "
                              "side (the score's elite, close contenders and the fewest SM cycles)",
                              CyclesBreakTies(report.elite) ? "" : "fastest ", report.elite.size(),
                              retimed->timed)
                        : std::string("Members by score"),
                    retimed->timings,
                    CyclesBreakTies(report.elite) ? fmt::format(", and {}", kCyclesBreakTies) : "",
                    retimed->retiming_id, HtmlEscape(retimed->finished_at))
              : "<p>Ranked by the score, the slower of the first median and the confirming "
                "one (microseconds, p10..p90 in brackets).</p>\n";
  html += "<div class=\"wide\"><table class=\"elite\">\n";
  html += Header({"rank", "candidate", "generation", "made by", "genome", "first median",
                  "confirming median", "score", "side by side", "TFLOP/s", "registers",
                  "spills (B st/ld)", "static smem B", "dynamic smem B", "stack B", "threads",
                  "compile ms"});
  int rank = 0;
  for (const CandidateRecord& c : report.elite) {
    const CandidateOutcome& o = c.outcome;
    const TimingFigures* first = o.timing();
    const TimingFigures* score = c.scoring_timing();
    const KernelResources* r = o.resources ? &*o.resources : nullptr;
    html += "<tr>" + NumberCell(std::to_string(++rank)) + NumberCell(std::to_string(c.id)) +
            NumberCell(std::to_string(c.generation)) + Cell(c.proposal.operator_name) +
            "<td class=\"genome\">" + HtmlEscape(FormatSettings(c.proposal.genome)) + "</td>" +
            NumberCell(first ? Spread(*first) : "-") +
            NumberCell(c.confirmation ? Spread(*c.confirmation) : "-") +
            NumberCell(score ? Microseconds(score->median_us) : "-") +
            NumberCell(c.side_by_side ? Microseconds(c.side_by_side->median_us) : "-") +
            NumberCell(score ? fmt::format("{:.1f}", score->tflops) : "-") +
            NumberCell(r ? std::to_string(r->registers) : "-") +
            NumberCell(r ? fmt::format("{}/{}", r->spill_stores, r->spill_loads) : "-") +
            NumberCell(r ? std::to_string(r->smem_static) : "-") +
            NumberCell(std::to_string(o.dynamic_smem)) +
            NumberCell(r ? std::to_string(r->stack_frame) : "-") +
            NumberCell(std::to_string(o.threads_per_block)) +
            NumberCell(fmt::format("{:.0f}", o.compile_ms)) + "</tr>\n";
  }
  return html + "</table></div>\n";
}

std::string ShapesTable(const std::vector<ReportRun>& runs) {
  // The peers of every run, in the order first met, as columns.
  std::vector<std::string> peers;
  for (const ReportRun& run : runs) {
    for (const PeerTime& peer : run.peers) {
      if (std::find(peers.begin(), peers.end(), peer.name) == peers.end()) {
        peers.push_back(peer.name);
      }
    }
  }
  std::vector<std::string> columns = {"run",   "template",  "shape",      "device",
                                      "state", "evaluated", "evo best us"};
  for (const std::string& peer : peers) {
    columns.push_back(peer + " us");
    columns.push_back(peer + " / evo");
  }
  if (!peers.empty()) columns.push_back("fastest peer / evo");
  std::string html =
      "<section id=\"shapes\"><h2>Shapes</h2>\n<p>One row per run. A ratio above 1 means evo's "
      "kernel is faster than the peer's.</p>\n<div class=\"wide\"><table class=\"shapes\">\n" +
      Header(columns);
  for (const ReportRun& run : runs) {
    const RunSpec& s = run.run.spec;
    const std::optional<double> best = BestScore(run);
    html += "<tr>" + NumberCell(std::to_string(run.run.id)) + Cell(s.template_name) +
            Cell(FormatSettings(s.problem)) + Cell(s.device) +
            Cell(std::string(ToString(run.run.state))) +
            NumberCell(fmt::format("{}/{}", run.run.finished_candidates, s.budget)) +
            NumberCell(best ? Microseconds(*best) : "-");
    for (const std::string& name : peers) {
      const auto peer = std::find_if(run.peers.begin(), run.peers.end(),
                                     [&](const PeerTime& p) { return p.name == name; });
      if (peer == run.peers.end()) {
        html += NumberCell("n/a") + NumberCell("-");
        continue;
      }
      html += NumberCell(Microseconds(peer->us)) +
              NumberCell(best ? fmt::format("{:.2f}x", peer->us / *best) : "-");
    }
    if (!peers.empty()) {
      const PeerTime* fastest = FastestPeer(run.peers);
      html += NumberCell(
          fastest && best ? fmt::format("{:.2f}x ({})", fastest->us / *best, fastest->name) : "-");
    }
    html += "</tr>\n";
  }
  return html + "</table></div></section>\n";
}

std::string PeersNote(const std::vector<ReportRun>& runs, const std::string& peers_file) {
  if (peers_file.empty()) {
    return "<p class=\"note\">No peer times: the database keeps only evo's own candidates. "
           "<code>evo report --peers FILE</code> draws them from the JSON that "
           "<code>scripts/bench-attention.py --json FILE</code> writes (torch flash, cuDNN, "
           "FlexAttention).</p>\n";
  }
  size_t matched = 0;
  for (const ReportRun& run : runs) matched += run.peers.empty() ? 0 : 1;
  return "<p class=\"note\">" +
         HtmlEscape(fmt::format(
             "Peer times from {}: {} of {} runs matched by problem and device. Peers were timed "
             "by their benchmark (CUDA graphs in a PyTorch process); evo's times are its gate's "
             "medians, which bench-attention.py found within about 2% of the same kernel in a "
             "graph.",
             peers_file, matched, runs.size())) +
         "</p>\n";
}

}  // namespace evo::cli

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"
#include "cli/inspect_commands.h"
#include "cli/report_html.h"
#include "common/error.h"
#include "common/files.h"
#include "evaluator/recording.h"
#include "population/store.h"

namespace evo::cli {
namespace {

namespace fs = std::filesystem;

struct ReportOptions {
  std::string db = "runs/evo.db";
  std::vector<int64_t> runs;  // empty: every run
  std::string out;
  std::string peers;
  std::string chart_js = "/usr/share/javascript/chart.js/chart.min.js";
};

// The knobs of a run: the template's order when evo has that template, then any other the
// genomes hold (a template changed since), by name.
std::vector<std::string> KnobOrder(const std::vector<CandidateRecord>& candidates,
                                   const KernelTemplate* kernel_template) {
  std::set<std::string> in_genomes;
  for (const CandidateRecord& c : candidates) {
    for (const auto& [name, value] : c.proposal.genome) in_genomes.insert(name);
  }
  std::vector<std::string> order;
  if (kernel_template != nullptr) {
    for (const KnobSpec& knob : kernel_template->manifest.knobs) {
      if (in_genomes.erase(knob.name) > 0) order.push_back(knob.name);
    }
  }
  order.insert(order.end(), in_genomes.begin(), in_genomes.end());
  return order;
}

const KernelTemplate* FindTemplate(const TemplateLibrary& library, const std::string& name) {
  for (const KernelTemplate& t : library.templates()) {
    if (t.manifest.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

std::function<int()> SetupReport(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<ReportOptions>();
  app.add_option("--db", options->db, "the population database")->capture_default_str();
  app.add_option("--run", options->runs, "a run to report (repeatable; default: every run)")
      ->transform(DecimalId());
  app.add_option("--out", options->out, "the HTML file to write")->required();
  app.add_option("--peers", options->peers,
                 "other kernels' times per shape: the JSON of scripts/bench-attention.py --json");
  app.add_option("--chart-js", options->chart_js, "Chart.js's UMD build, embedded in the page")
      ->capture_default_str();
  return [&global, options] {
    if (!fs::exists(options->db)) {
      throw Error("there is no database " + options->db +
                  " (evo run creates it; --db names another)");
    }
    // Nor over what it reads: the peers' figures or a Chart.js build.
    std::vector<fs::path> inputs_read = {options->chart_js};
    if (!options->peers.empty()) inputs_read.push_back(options->peers);
    RefuseToOverwrite(options->out, "--out", options->db, inputs_read);
    // Everything that can fail on input fails before anything is written.
    const ChartLibrary chart = ReadChartLibrary(options->chart_js);
    std::optional<PeerTable> peers;
    if (!options->peers.empty()) peers = PeerTable::Load(options->peers);
    const TemplateLibrary library = LoadLibrary(global);

    PopulationStore store(options->db, PopulationStore::Access::kReadOnly);
    std::vector<RunRecord> runs;
    if (options->runs.empty()) {
      runs = store.Runs();
      if (runs.empty()) throw Error("there are no runs in " + options->db);
    } else {
      for (int64_t id : options->runs) {
        std::optional<RunRecord> run = store.FindRun(id);
        if (!run) throw Error("there is no run " + std::to_string(id) + " in " + options->db);
        // A run named twice is reported once, where it was first named.
        const bool named_before = std::any_of(
            runs.begin(), runs.end(), [id](const RunRecord& known) { return known.id == id; });
        if (!named_before) runs.push_back(*run);
      }
    }

    ReportInputs inputs;
    inputs.database = options->db;
    inputs.generated_at = NowIso8601();
    inputs.evo_version = EVO_VERSION;
    inputs.peers_file = options->peers;
    inputs.chart = chart;
    size_t candidates = 0;
    for (const RunRecord& run : runs) {
      ReportRun report{run, store.Candidates(run.id), store.Elite(run.id), {}, {}};
      report.knobs = KnobOrder(report.candidates, FindTemplate(library, run.spec.template_name));
      if (peers) report.peers = peers->Match(run.spec, &library);
      candidates += report.candidates.size();
      inputs.runs.push_back(std::move(report));
    }
    const fs::path out(options->out);
    if (!out.parent_path().empty()) fs::create_directories(out.parent_path());
    WriteFileAtomically(out, RenderReport(inputs));
    std::cout << "wrote " << out.string() << ": " << runs.size()
              << (runs.size() == 1 ? " run, " : " runs, ") << candidates << " candidates; Chart.js "
              << chart.version << " from " << chart.path << " embedded\n";
    return kExitOk;
  };
}

}  // namespace evo::cli

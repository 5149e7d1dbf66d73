#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/doctor_database.h"
#include "cli/doctor_machine.h"
#include "cli/inspect_commands.h"
#include "common/error.h"

namespace evo::cli {
namespace {

// Problems were found: evo's "did not pass" code, as for a rejected configuration.
constexpr int kExitProblems = kExitRejected;

struct DoctorOptions {
  std::string db;  // empty: no database is checked
  std::string cache_dir = "runs/cache";
};

// What the findings mean for a user's next command.
std::string Summary(const MachineCheck& machine) {
  std::string can = "replay recorded searches (evo run --replay FILE); show and report stored runs";
  if (machine.compiles) {
    can = "compile every template (evo compile --arch sm_XX); export stored candidates; " + can;
  }
  std::string text = "This machine can: " + can + ".\n";
  if (machine.usable_gpus > 0) {
    text += "It can also search (evo run), bench and sweep on " +
            std::to_string(machine.usable_gpus) + (machine.usable_gpus == 1 ? " GPU" : " GPUs") +
            ".\n";
  } else {
    text +=
        "It cannot search (evo run), bench or sweep: they need a GPU that runs evo's "
        "kernels, and " +
        std::string(!machine.have_driver ? "there is no CUDA driver here"
                    : machine.gpus == 0  ? "the driver sees no GPU"
                                         : "no GPU here ran the probe kernel") +
        ".\n";
  }
  return text;
}

}  // namespace

std::function<int()> SetupDoctor(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<DoctorOptions>();
  app.add_option("--db", options->db,
                 "also check this database (read-only): schema, integrity, unfinished runs");
  app.add_option("--cache-dir", options->cache_dir, "the compile cache to check")
      ->capture_default_str();
  app.footer(
      "Exit codes: 0 everything evo needs works here, searching on a GPU included; 1 problems "
      "were found (each is listed with its fix; a machine without a GPU is one); 2 --db does not "
      "name an evo database, or bad usage.");
  return [&global, options] {
    MachineCheckOptions machine_options;
    machine_options.cache_dir = options->cache_dir;
    std::optional<TemplateLibrary> library;
    try {
      library = LoadLibrary(global);
      machine_options.library = &*library;
    } catch (const Error& error) {
      machine_options.library_error = error.what();
    }
    std::cout << "evo doctor: what this machine can do for evo\n\n";
    const MachineCheck machine = CheckMachine(machine_options);
    std::vector<Finding> findings = machine.findings;
    std::string refused;
    if (!options->db.empty()) {
      DatabaseCheck database = CheckDatabase(options->db);
      findings.insert(findings.end(), database.findings.begin(), database.findings.end());
      refused = database.refused;
    } else {
      findings.push_back(NoteFinding("database", "none checked (evo doctor --db FILE checks one)"));
    }
    std::cout << FindingsToText(findings) << "\n" << Summary(machine);
    int problems = 0;
    for (const Finding& finding : findings) {
      problems += finding.kind == Finding::Kind::kProblem ? 1 : 0;
    }
    std::cout << (problems == 0
                      ? std::string("No problems found.")
                      : std::to_string(problems) + (problems == 1 ? " problem" : " problems") +
                            " found; each is listed above with its fix.")
              << "\n";
    if (!refused.empty()) {
      std::cerr << "evo: error: --db " << refused << "\n";
      return kExitError;
    }
    return problems == 0 ? kExitOk : kExitProblems;
  };
}

}  // namespace evo::cli
